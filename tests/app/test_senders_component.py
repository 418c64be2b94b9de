"""The manage API of seed 000 §6 as bridge methods of the real app (DESIGN §10 "Management"):
shapes checked against the answer schema, bad input names the field and changes nothing, a
restart keeps groups, assignments and a running cooldown; sender timers fire as steps."""
from __future__ import annotations

import msgspec
import pytest

from bridge.errors import InvalidParams
from sidecar.app.root import SidecarApp
from sidecar.config import Settings
from sidecar.protocol.answers import ANSWERS
from sidecar.router.attempt import retryable
from sidecar.senders import health as h
from sidecar.senders.gate import timer_key
from sidecar.store.db import Store

T0 = 1_764_536_400.0  # 2025-11-30 21:00:00 UTC


async def make_app(tmp_path, store: Store) -> SidecarApp:
    app = SidecarApp(Settings(clock="virtual", data_dir=str(tmp_path), token="t", seed="5"), store)
    await app.senders.start(["crm-hook", "hook-b"])
    await app.handle("clock.advance_to", {"t": T0})
    return app


async def call(app: SidecarApp, method: str, params: dict) -> dict:
    res = await app.handle(method, params)
    res.pop("next_due", None)
    msgspec.convert(res, ANSWERS[method])  # the answer is what the schema says
    return res


@pytest.fixture
async def store(tmp_path):
    s = await Store.open(tmp_path / "sidecar.db")
    yield s
    await s.close()


async def test_groups_and_assignments_round_trip_and_survive_a_restart(tmp_path):
    async with await Store.open(tmp_path / "sidecar.db") as store:
        app = await make_app(tmp_path, store)
        g = (await call(app, "groups.create", {"name": "night", "priority": 5, "failed_in_row": 1,
                                                "from_time": "22:00", "to_time": "06:00"}))["group"]
        assert (g["name"], g["priority"], g["from_time"], g["senders"]) == ("night", 5, "22:00", [])
        res = await call(app, "groups.senders.set", {"id": g["id"], "senders": ["crm-hook", "hook-b"]})
        assert res["group"]["senders"] == ["crm-hook", "hook-b"]
        await call(app, "groups.assignments.remove", {"items": [{"sender": "hook-b", "groups": [g["id"]]}]})
        patched = (await call(app, "groups.patch", {"group": "night", "cooldown_delay_from": 10,
                                                     "cooldown_delay_to": 20}))["group"]  # by name
        assert (patched["cooldown_delay_to"], patched["senders"]) == (20, ["crm-hook"])
        hook = (await call(app, "senders.get", {"sender": "crm-hook"}))["sender"]
        assert (hook["state"], hook["groups"]) == ("active", [g["id"]])
        stack = (await call(app, "senders.get", {"sender": "stack"}))["sender"]
        assert stack["groups"] == ["builtin-stack"]
    async with await Store.open(tmp_path / "sidecar.db") as store:
        app = await make_app(tmp_path, store)
        (again,) = (await call(app, "groups.list", {}))["groups"]
        assert again == patched
        names = [s["sender"] for s in (await call(app, "senders.list", {}))["senders"]]
        assert names == ["crm-hook", "hook-b", "stack"]
        await call(app, "groups.delete", {"id": g["id"]})
        assert (await call(app, "groups.list", {}))["groups"] == []
        assert (await call(app, "senders.get", {"sender": "crm-hook"}))["sender"]["groups"] == []


@pytest.mark.parametrize("method,params,field", [
    ("groups.create", {"name": "dup", "priority": 1}, "priority"),
    ("groups.create", {"name": "bad window", "priority": 7, "from_time": "25:00", "to_time": "06:00"}, "from_time"),
    ("groups.create", {"name": "half window", "priority": 7, "from_time": "22:00"}, "to_time"),
    ("groups.assignments.add", {"items": [{"sender": "crm-hook", "groups": []}] * 501}, "items"),
    ("groups.assignments.add", {"items": [{"sender": "no-such-sender", "groups": []}]}, "items[0].sender"),
    ("groups.assignments.set", {"items": [{"sender": "crm-hook", "groups": ["nope"]}]}, "items[0].groups[0]"),
    ("groups.senders.add", {"id": "nope", "senders": ["crm-hook"]}, "id"),
    ("groups.senders.add", {"id": "G", "senders": ["crm-hook", "ghost"]}, "senders[1]"),
    ("groups.patch", {"id": "G", "priority": 2, "cooldown_delay_from": 30, "cooldown_delay_to": 10}, "cooldown_delay_to"),
    ("senders.recover", {"sender": "ghost"}, "sender"),
    ("groups.patch", {"group": "no such group", "priority": 3}, "group"),
    ("groups.delete", {}, "id"),
    ("senders.history", {"sender": "ghost"}, "sender"),
    # a breaker's finds: an int64 overflow stopped the sidecar (exit 6); unknown fields passed
    ("groups.create", {"name": "big", "priority": 9223372036854775808}, "priority"),
    ("groups.create", {"name": "long", "priority": 8, "cooldown_delay_from": 1e300, "cooldown_delay_to": 1e301},
     "cooldown_delay_from"),
    ("groups.create", {"name": "bogus", "priority": 8, "bogus": 1}, "bogus"),
    ("groups.patch", {"id": "G", "bogus": 1}, "bogus"),
    # issue 9's breaker: a sender twice in one call counted twice; stack joined a user group;
    # an empty window meant "always"
    ("groups.assignments.set", {"items": [{"sender": "hook-b", "groups": ["G"]},
                                          {"sender": "hook-b", "groups": []}]}, "items[1].sender"),
    ("groups.assignments.add", {"items": [{"sender": "stack", "groups": ["G"]}]}, "items[0].sender"),
    ("groups.senders.add", {"id": "G", "senders": ["stack"]}, "senders[0]"),
    # a breaker's F11/F12: stack in a remove / an empty set answered ok and did nothing; an
    # unknown key inside an item was ignored; ``by`` had no bound and took control characters
    ("groups.assignments.remove", {"items": [{"sender": "stack", "groups": ["G"]}]}, "items[0].sender"),
    ("groups.assignments.set", {"items": [{"sender": "stack", "groups": []}]}, "items[0].sender"),
    ("groups.senders.remove", {"id": "G", "senders": ["stack"]}, "senders[0]"),
    ("groups.assignments.add", {"items": [{"sender": "crm-hook", "groups": ["G"], "extra": 1}]}, "items[0].extra"),
    ("senders.recover", {"sender": "crm-hook", "by": "x" * 201}, "by"),
    ("senders.recover", {"sender": "crm-hook", "by": "ops\n\u0000"}, "by"),
    ("senders.recover", {"sender": "crm-hook", "by": ""}, "by"),
    ("groups.create", {"name": "empty window", "priority": 7, "from_time": "06:00", "to_time": "06:00"}, "from_time"),
])
async def test_bad_input_names_the_field_and_changes_nothing(tmp_path, store, method, params, field):
    app = await make_app(tmp_path, store)
    gid = (await call(app, "groups.create", {"name": "g1", "priority": 1}))["group"]["id"]
    await call(app, "groups.senders.set", {"id": gid, "senders": ["crm-hook"]})
    if params.get("id") == "G":
        params = {**params, "id": gid}
    for item in params.get("items", [])[:2]:  # the group placeholder inside assignment items
        if isinstance(item, dict) and item.get("groups") == ["G"]:
            params = {**params, "items": [{**i, "groups": [gid if g == "G" else g for g in i["groups"]]}
                                          for i in params["items"]]}
            break
    before = (await call(app, "groups.list", {}), await call(app, "senders.list", {}))
    with pytest.raises(InvalidParams) as err:
        await app.handle(method, params)
    assert err.value.code == -32602 and err.value.data == {"field": field}, err.value
    assert (await call(app, "groups.list", {}), await call(app, "senders.list", {})) == before
    app2 = SidecarApp(Settings(clock="virtual", data_dir=str(tmp_path), token="t", seed="5"), store)
    await app2.senders.start(["crm-hook", "hook-b"])
    assert app2.senders.gate.reg.groups == app.senders.gate.reg.groups  # nothing half-written


async def test_wrongly_typed_params_are_32602_naming_the_method(tmp_path, store):
    app = await make_app(tmp_path, store)
    with pytest.raises(InvalidParams, match=r"^groups.create: .*priority"):
        await app.handle("groups.create", {"name": "x", "priority": "high"})


async def test_sender_timer_fires_as_a_step_and_recover_notifies(tmp_path, store):
    app = await make_app(tmp_path, store)
    sent: list = []
    app.notify = lambda method, note: sent.append((method, note))  # type: ignore[method-assign]
    gate = app.senders.gate
    for i in range(2):
        gate.may_send("crm-hook", "webhook", T0 + i)
        rep = gate.report("crm-hook", "webhook", retryable("ConnectError"), T0 + i, final=False)
        await store.commit(list(rep.ops))
    gate.take_notes()
    s = gate.state("crm-hook")
    assert app.engine.scheduler.due_of(timer_key("crm-hook")) == s.probe_at
    await app.handle("clock.advance_to", {"t": s.probe_at})
    assert [(m, n.code, n.at) for m, n in sent] == [("sender.state", 104, s.probe_at)]
    # the router's pump sent the one probe at once; crm-hook is not a configured target here,
    # so its answer is "bad target" — terminal, the path-B failure at the verdict
    assert gate.probes == {} and not gate.state("crm-hook").probe_in_flight
    assert gate.state("crm-hook").probe_failed_terminal
    res = await call(app, "senders.recover", {"sender": "crm-hook", "by": "shift lead"})
    assert res["sender"]["state"] == "active" and res["sender"]["cooldown_times"] == 0
    assert [(m, n.code, n.previous, n.state) for m, n in sent[1:]] == [("sender.state", 106, "cooldown", "active")]
    rows = (await call(app, "senders.history", {"sender": "crm-hook"}))["rows"]
    assert [r["code"] for r in rows] == [109, 109, 101, 104, 106]
    assert rows[-1]["note"] == "from cooldown by shift lead"
    assert app.engine.scheduler.due_of(timer_key("crm-hook")) is None
    assert gate.state("crm-hook").state == h.ACTIVE


async def test_reload_takes_the_stored_states_back_after_a_lost_commit(tmp_path, store):
    app = await make_app(tmp_path, store)
    gate = app.senders.gate
    for i in range(2):  # two failures applied in memory, their commit "failed": never written
        gate.may_send("crm-hook", "webhook", T0 + i)
        gate.report("crm-hook", "webhook", retryable("ConnectError"), T0 + i, final=False)
    assert gate.state("crm-hook").state == h.COOLDOWN and gate.notes
    await app.senders.reload()
    s = gate.state("crm-hook")
    assert (s.state, s.failed_in_row, s.cooldown_times) == ("active", 0, 0)
    assert gate.notes == [] and app.engine.scheduler.due_of(timer_key("crm-hook")) is None


async def test_recover_of_an_active_sender_changes_and_writes_nothing(tmp_path, store):
    """Issue 9's breaker: it wrote a 106 and reset the counters; now a no-op that says so."""
    app = await make_app(tmp_path, store)
    gate = app.senders.gate
    gate.may_send("crm-hook", "webhook", T0)
    await store.commit(list(gate.report("crm-hook", "webhook", retryable("ConnectError"), T0, final=False).ops))
    gate.take_notes()
    before = await call(app, "senders.get", {"sender": "crm-hook"})
    res = await call(app, "senders.recover", {"sender": "crm-hook", "by": "lead"})
    assert res == {**before, "recovered": False} and before["sender"]["failed_in_row"] == 1
    rows = (await call(app, "senders.history", {"sender": "crm-hook"}))["rows"]
    assert 106 not in [r["code"] for r in rows]
    assert gate.take_notes() == []
