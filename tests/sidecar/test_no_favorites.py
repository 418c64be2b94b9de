"""A TU that Stack has no favorites list for is visible, not silent (issue 22 item 2; DESIGN §9,
§12.5, §10's ``sidecar/tu/no_favorites`` row; seed 003 question 5: «бутстрап першого запуску TU
все одно звідкись треба брати»).  Startup data's ``favorites`` missing or ``null`` = no list;
``[]`` = an empty list; Stack unreachable = the local cache stands in, nothing raised."""
from __future__ import annotations

from sidecar.router.ops import PutDelivery
from sidecar.stack.startup import parse_startup
from sidecar.store import ops
from tests.sidecar.world import T0, World, fav

TU = "tu-1"


def test_startup_data_tells_no_list_from_an_empty_one():
    assert parse_startup(TU, {"history": []}).favorites is None  # key missing
    assert parse_startup(TU, {"favorites": None, "history": []}).favorites is None
    assert parse_startup(TU, {"favorites": [], "history": []}).favorites == []
    assert parse_startup(TU, {"favorites": "x", "history": []}) is None  # unusable, as before


def _alerts(w: World) -> list:
    return [op.delivery for op in w.d.ops if isinstance(op, PutDelivery)
            and op.delivery.source == "sidecar" and op.delivery.subject == "tu"]


def _tu_rows(w: World) -> list:
    return [op for op in w.d.ops if isinstance(op, ops.PutDecision) and op.ru == ""]


def _no_list_world() -> World:
    w = World()
    w.d.router.targets["lead"] = "journal"
    from sidecar.router.model import parse_rule
    w.d.router.apply_rule(parse_rule({"name": "lead", "conditions": {"source": "sidecar", "subjects": ["tu"]},
                                      "actions": [{"target": "lead"}]}))
    return w


def test_no_list_is_logged_for_the_tu_and_alerts_the_lead_once_a_day():
    w = _no_list_world()
    w.startup = {"history": []}
    w.d.login(TU, "golden", startup=w.startup, local_favorites={})
    rows = _tu_rows(w)
    assert [(r.task_type, r.source, r.outcome) for r in rows] == [("favorites", "login", "no_list")]
    [alert] = [a for a in _alerts(w) if a.status == "pending"]
    assert (alert.action, alert.priority, alert.target) == ("no_favorites", "high", "lead")
    assert w.d.engine.tus[TU].favorites == {}
    # a second login the same day: logged again (a fact of that login), routed as a duplicate
    w.d.logout(TU)
    w.at(3600).d.login(TU, "golden", startup={"favorites": None}, local_favorites={})
    assert len(_tu_rows(w)) == 2
    assert [a.status for a in _alerts(w)] == ["pending", "duplicate"]
    # the next UTC day: the lead hears again
    w.d.logout(TU)
    w.at(86400).d.login(TU, "golden", startup={"favorites": None}, local_favorites={})
    assert [a.status for a in _alerts(w)] == ["pending", "duplicate", "pending"]


def test_an_empty_list_or_an_unreachable_stack_raises_nothing():
    w = _no_list_world()
    w.login([])  # Stack's list, empty: the TU simply has no favorites
    assert _tu_rows(w) == [] and _alerts(w) == []
    w.d.logout(TU)
    from sidecar.stack.startup import favorite_of
    local = {"ru-1": favorite_of(fav("ru-1"))}
    w.d.login(TU, "golden", startup=None, local_favorites=local)  # Stack down: the cache stands in
    assert set(w.d.engine.tus[TU].favorites) == {"ru-1"}
    assert _tu_rows(w) == [] and _alerts(w) == []


def test_no_list_drops_the_local_cache_and_says_how_many():
    """Stack is the favorites' source (DESIGN §6: a favorite Stack stops listing is dropped at
    the next login); the alert says how many cached favorites went, so a lost list shows."""
    w = _no_list_world()
    from sidecar.stack.startup import favorite_of
    local = {"ru-1": favorite_of(fav("ru-1")), "ru-2": favorite_of(fav("ru-2"))}
    w.d.login(TU, "golden", startup={"favorites": None}, local_favorites=local)
    assert w.d.engine.tus[TU].favorites == {}
    assert sorted(op.ru for op in w.d.ops if isinstance(op, ops.DeleteFavorite)) == ["ru-1", "ru-2"]
    [row] = _tu_rows(w)
    assert row.detail == {"local_favorites_dropped": 2}
    import msgspec
    body = msgspec.json.decode(_alerts(w)[0].message)
    assert "2" in str(body) and TU in str(body)
    assert T0  # the world's clock: the alert's day is T0's UTC day
