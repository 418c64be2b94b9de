"""Favorites only (issue 6 item 3; DESIGN §6): a favorite is what Stack's startup data lists; a
block event, a limits answer, a dialog row or a ``favorite.update`` for any other RU is kept as the
pair's attributes and never makes it a favorite; a favorite Stack stops listing is dropped at the
next login."""
from __future__ import annotations

from sidecar.store.ops import DeleteFavorite, PutFavorite
from tests.sidecar.world import T0, World, fav

TU, RU, OTHER = "tu-1", "ru-1", "ru-9"
BLOCK_EVENT = "userBlocked"  # Golden: a block either way


def test_a_block_event_for_an_unknown_ru_does_not_make_it_a_favorite():
    w = World()
    w.online.add(OTHER)
    w.login([fav(RU)])
    w.at(10).ru_writes(OTHER)
    w.at(20).tu_writes(OTHER)
    w.at(30).d.event(TU, "golden", BLOCK_EVENT, {"blockerId": OTHER, "blockedId": TU, "at": T0 + 30,
                                                 "blocked": True})
    rt = w.d.engine.tus[TU]
    assert not rt.is_favorite(OTHER) and rt.attrs(OTHER).blocked_by_ru is True
    assert not any(isinstance(op, PutFavorite) and op.ru == OTHER for op in w.d.ops)
    w.at(35).d.event(TU, "golden", BLOCK_EVENT, {"blockerId": OTHER, "blockedId": TU, "at": T0 + 35,
                                                 "blocked": False})
    w.at(40).ru_writes(OTHER)
    w.at(50).tu_writes(OTHER)
    w.at(4000)
    assert w.d.created("follow_up_message") == [] and w.markers(OTHER) == []
    assert not rt.is_favorite(OTHER)


def test_a_block_of_a_non_favorite_still_closes_its_tasks_and_refuses_new_ones():
    w = World()
    w.login([])
    w.at(10).ru_writes(OTHER)
    w.at(20).d.favorite(TU, OTHER, blocked_by_tu=True)
    [c] = w.d.closed()
    assert (c.type, c.reason, c.closed_at) == ("unanswered_message", "blocked", T0 + 20)
    w.at(30).ru_writes(OTHER)
    assert len(w.d.created("unanswered_message")) == 1


def test_favorite_update_or_a_limits_answer_for_an_unknown_ru_makes_no_favorite():
    w = World(project="prime")
    w.limits[OTHER] = (2, 1)
    w.login([fav(RU, "prime")])
    w.at(10).d.favorite(TU, OTHER, active=True, spend_30d_usd=1000.0)
    w.at(20).d.event(TU, "prime", "MessageSent", {"id": "s", "type": "system", "senderId": OTHER,
                                                  "recipientId": TU, "at": T0 + 20, "text": "limits opened"})
    rt = w.d.engine.tus[TU]
    assert ("tu-1", "chat_restriction", {"ru": OTHER}) in w.d.requests
    assert not rt.is_favorite(OTHER) and rt.limit(OTHER, "chat") == 2
    assert [t.type for t in w.d.created()] == ["open_limits"]  # Open Limits needs no favorite
    assert rt.attrs(OTHER).spend_30d_usd == 1000.0


def test_a_favorite_stack_stops_listing_is_dropped_at_the_next_login():
    w = World()
    w.login([fav(RU), fav(OTHER)])
    w.d.logout(TU)
    w.at(10)
    local = w.local()
    assert set(local["local_favorites"]) == {RU, OTHER}
    w.d.login(TU, "golden", startup={"favorites": [fav(RU)], "history": []}, **local)
    rt = w.d.engine.tus[TU]
    assert set(rt.favorites) == {RU}
    assert DeleteFavorite(tu=TU, ru=OTHER) in w.d.ops


def test_with_stack_unreachable_the_local_favorites_stand_in():
    w = World()
    w.login([fav(RU), fav(OTHER)])
    w.d.logout(TU)
    w.at(10)
    w.d.login(TU, "golden", startup=None, **w.local())
    assert set(w.d.engine.tus[TU].favorites) == {RU, OTHER}


def test_a_pending_marker_of_a_ru_no_longer_listed_creates_no_favorite():
    w = World()
    w.at(10)
    w.d.login(TU, "golden", startup={"favorites": [fav(RU)], "history": []},
              pending_markers={(OTHER, "followUpChat"): {"sourceUnansweredTaskId": "x", "step": 0,
                                                         "nextCheckAt": None}})
    assert set(w.d.engine.tus[TU].favorites) == {RU}


def test_blocked_answers_what_the_pairs_attributes_say():
    """``TuRuntime.blocked`` (the Task Factory's and Inbound's gate) is ``attrs(ru).blocked`` for a
    favorite, a non-favorite pair that was told of a block, and an RU nothing was told of."""
    w = World()
    w.login([fav(RU), fav("ru-2")])
    w.at(10).d.favorite(TU, RU, blocked_by_tu=True)
    w.at(20).d.event(TU, "golden", BLOCK_EVENT, {"blockerId": OTHER, "blockedId": TU, "at": T0 + 20,
                                                 "blocked": True})
    w.at(30).d.event(TU, "golden", BLOCK_EVENT, {"blockerId": "ru-3", "blockedId": TU, "at": T0 + 30,
                                                 "blocked": False})
    rt = w.d.engine.tus[TU]
    for ru, want in ((RU, True), ("ru-2", False), (OTHER, True), ("ru-3", False), ("ru-4", False)):
        assert rt.blocked(ru) is want and rt.attrs(ru).blocked is want, ru
