"""Platform answers that do not match their shape (found by the breaker): one bad row is skipped,
an undecodable answer counts as a failed pass, and neither breaks a step or a login."""
from __future__ import annotations

import pytest

from tests.sidecar.world import T0, World, fav

TU = "tu-1"


def rows(*ids):
    return [{"userId": r, "dialogId": "d-" + r, "isOnline": True,
             "lastMessage": {"from": "ru", "at": T0 - 30, "type": "message"}} for r in ids]


def test_one_bad_row_is_skipped_the_rest_become_tasks():
    w = World(project="chathouse")
    base = w.answer
    w.d.answer = lambda tu, m, p: ({"dialogs": rows("r1", "r2") + [{"userId": None, "dialogId": "d9"}] + rows("r3")}
                                   if m == "scroll_new" else base(tu, m, p))
    w.login([fav(r, "chathouse") for r in ("r1", "r2", "r3")])
    assert sorted(t.ru for t in w.d.created("unanswered_message")) == ["r1", "r2", "r3"]
    assert w.d.engine.tus[TU].inbox_synced


@pytest.mark.parametrize("garbage", [None, "oops", 42, [1, 2], {"dialogs": "nope"}, {"dialogs": [None, 7]}])
@pytest.mark.parametrize("project", ["golden", "chathouse", "prime"])
def test_undecodable_answers_are_failed_passes(project, garbage):
    w = World(project=project)
    w.d.answer = lambda tu, m, p: garbage
    w.login([fav("r1", project)])
    w.at(4000)  # every periodic pass, with garbage each time
    assert w.d.engine.tus[TU].inbox_synced
    assert w.d.created() == []


def test_garbage_restriction_answer_creates_nothing_and_breaks_nothing():
    w = World(project="prime")
    base = w.answer
    w.d.answer = lambda tu, m, p: {"chatLimit": "lots"} if m == "chat_restriction" else base(tu, m, p)
    w.login([fav("r1", "prime")])
    w.at(10).d.event(TU, "prime", "dialog_created", {"dialogId": "d", "ruId": "r1", "at": T0 + 10})
    assert w.d.created("open_limits") == []
    w.at(20).ru_writes("r1")
    assert len(w.d.created("unanswered_message")) == 1


def test_garbage_chat_history_is_ignored():
    w = World()
    base = w.answer
    w.d.answer = lambda tu, m, p: ({"dialogs": [{"ru": "r1", "messages": [{"at": "noon", "from": 3}, None]}, "x"]}
                                   if m == "chat_history" else base(tu, m, p))
    w.online.add("r1")
    w.login([fav("r1")])
    w.at(100)
    assert w.d.created() == []
