"""The router inside the app (issue 9 phase B; DESIGN §10, §13): a step's events become delivery
rows in the step's ONE transaction, the management methods refuse bad input naming the field and
change nothing, a rule change never resets a throttle window, ``events.emit`` routes Electron's
own events, and the sidecar's own ``operator overdue`` / ``stack`` events."""
from __future__ import annotations

import asyncio
import json
import sqlite3

import pytest

from bridge.errors import InternalError, InvalidParams
from sidecar.router.core import UNREACHABLE_AFTER_S, StackWatch
from sidecar.router.io.storage import RouterStore
from tests.app.test_app_steps import T0, TU, Run, msg

# "hook" answers nothing (the discard port refuses): its rows stay pending on the retry ladder,
# which is all a throttle window needs (the journal is never throttled: seed 002 _throttled)
JOURNAL = json.dumps({"audit": {"channel": "journal"},
                      "hook": {"channel": "webhook", "url": "http://127.0.0.1:9/",
                               "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}})


@pytest.fixture(autouse=True)
def _journal_target(monkeypatch):
    monkeypatch.setenv("SIDECAR_ROUTER_TARGETS", JOURNAL)


async def started(path) -> Run:
    run = await Run(path).start()
    await run.call("clock.advance_to", {"t": T0})
    await run.call("session.login", {"tu": TU, "project": "golden", "operator": "op"})
    return run


def test_a_steps_stack_writes_are_pending_stack_deliveries_of_its_own_commit(tmp_path):
    async def main():
        run = await started(tmp_path)
        await run.call("clock.advance_to", {"t": T0 + 10})
        await run.call("platform.event", msg("ru-1", "m-1", T0 + 10))
        rows = await RouterStore(run.store).deliveries()
        by_source = {r.source for r in rows}
        assert {"tasks", "candidates"} <= by_source  # the task and its candidate
        assert all(r.channel == "stack" and r.target == "stack" and r.rule is None for r in rows)
        task_row = next(r for r in rows if r.source == "tasks")
        assert (task_row.action, task_row.priority, task_row.tu, task_row.ru) == ("created", "normal", TU, "ru-1")
        assert task_row.idem_key.startswith("task:") and task_row.path == f"/v1/tus/{TU}/tasks"
        await run.stop()

        # a failed commit: neither the task nor its deliveries, and the router's counter unchanged
        (tmp_path / "b").mkdir()
        run = await started(tmp_path / "b")
        seq_before = run.app.routing.router.state.seq
        await run.call("clock.advance_to", {"t": T0 + 10})
        run.fail_on = run.commits + 1
        with pytest.raises(InternalError):
            await run.call("platform.event", msg("ru-1", "m-1", T0 + 10))
        assert run.app.routing.router.state.seq == seq_before  # decide / evolve: nothing applied
        assert [r.source for r in await RouterStore(run.store).deliveries()] == []
        await run.stop()
    asyncio.run(main())


def test_rules_management_refuses_bad_input_naming_the_field_and_changes_nothing(tmp_path):
    async def main():
        run = await started(tmp_path)
        good = {"name": "alerts", "conditions": {"source": "electron"},
                "actions": [{"target": "audit"}, {"target": "hook"}], "throttle_seconds": 300}
        bad = [({**good, "actions": [{"target": "nowhere"}]}, "actions[0].target"),
               ({**good, "actions": [{"target": "stack"}]}, "actions[0].target"),
               ({**good, "conditions": {"priority_min": "urgent"}}, "conditions.priority_min"),
               ({**good, "weight": "heavy"}, "weight"),
               ({**good, "name": ""}, "name"),
               # a breaker's finds: a broken template failed every delivery later; 20 000 actions
               # fanned one event out into 20 000 deliveries and an oversized rules.list answer
               ({**good, "actions": [{"target": "audit", "template": "{{ "}]}, "actions[0].template"),
               ({**good, "actions": [{"target": "audit", "template": "x" * 5000}]}, "actions[0].template"),
               ({**good, "actions": [{"target": "audit"}] * 51}, "actions")]
        for params, field in bad:
            with pytest.raises(InvalidParams) as ei:
                await run.call("rules.create", params)
            assert ei.value.data == {"field": field}, (params, ei.value)
        with pytest.raises(InvalidParams):  # an unknown field never reaches the router
            await run.call("rules.create", {**good, "colour": "red"})
        assert (await run.call("rules.list", {}))["rules"] == []

        created = await run.call("rules.create", good)
        assert created["ok"] and created["rule"]["name"] == "alerts"
        with pytest.raises(InvalidParams) as ei:
            await run.call("rules.create", good)  # exists
        assert ei.value.data == {"field": "name"}
        with pytest.raises(InvalidParams) as ei:
            await run.call("rules.patch", {"name": "alerts", "changes": {"throttle_seconds": -1}})
        assert ei.value.data == {"field": "changes.throttle_seconds"}
        with pytest.raises(InvalidParams) as ei:
            await run.call("rules.patch", {"name": "alerts", "changes": {"actions": [{"target": "audit", "template": "{% for %}"}]}})
        assert ei.value.data == {"field": "changes.actions[0].template"}
        with pytest.raises(InvalidParams) as ei:
            await run.call("rules.delete", {"name": "nope"})
        assert ei.value.data == {"field": "name"}
        assert [r["throttle_seconds"] for r in (await run.call("rules.list", {}))["rules"]] == [300.0]

        # throttle: one real delivery at +10, the next inside 300 s skipped; a rule patch (and a
        # delete + create) never resets the window
        emit = {"source": "electron", "subject": "alert", "action": "fired", "payload": {}}
        await run.call("clock.advance_to", {"t": T0 + 10})
        first = await run.call("events.emit", emit)
        assert first["ok"] and first["event_id"]
        await run.call("rules.patch", {"name": "alerts", "changes": {"weight": 3}})
        await run.call("rules.delete", {"name": "alerts"})
        await run.call("rules.create", good)
        await run.call("clock.advance_to", {"t": T0 + 100})
        await run.call("events.emit", emit)
        await run.call("clock.advance_to", {"t": T0 + 310})
        await run.call("events.emit", emit)
        await run.call("clock.advance_to", {"t": T0 + 311})
        audit = (await run.call("deliveries.list", {"target": "audit"}))["deliveries"]
        assert [(d["event_at"] - T0, d["status"]) for d in audit] == [  # the journal: never cut
            (10.0, "delivered"), (100.0, "delivered"), (310.0, "delivered")]
        hook = (await run.call("deliveries.list", {"target": "hook"}))["deliveries"]
        assert [(d["event_at"] - T0, d["status"]) for d in hook] == [
            (10.0, "pending"), (100.0, "skipped"), (310.0, "pending")]
        assert audit[0]["id"] == f"{first['event_id']}.0"
        assert (await run.call("deliveries.list", {"status": "skipped"}))["deliveries"][0]["note"].startswith("throttled")
        assert (await run.call("deliveries.list", {"since": T0 + 200, "target": "audit"}))["deliveries"][0]["event_at"] == T0 + 310
        with pytest.raises(InvalidParams) as ei:
            await run.call("deliveries.list", {"status": "lost"})
        assert ei.value.data == {"field": "status"}
        for limit in (-1, 0, 100_001):  # -1 used to mean "every row": an answer past the frame cap
            with pytest.raises(InvalidParams) as ei:
                await run.call("deliveries.list", {"limit": limit})
            assert ei.value.data == {"field": "limit"}
        for bad_emit, field in (({**emit, "source": "markers"}, "source"),
                                ({**emit, "priority": "urgent"}, "priority"),
                                ({**emit, "ttl_s": -5}, "ttl_s")):
            with pytest.raises(InvalidParams) as ei:
                await run.call("events.emit", bad_emit)
            assert ei.value.data == {"field": field}
        assert len((await run.call("deliveries.list", {"target": "audit"}))["deliveries"]) == 3
        notes = [p for m, p in run.sent if m == "delivery"]
        assert [(n.status, n.at - T0) for n in notes if n.status != "pending"] == [
            ("delivered", 10.0), ("skipped", 100.0), ("delivered", 100.0), ("delivered", 310.0)]
        await run.stop()

        # a restart keeps the rules and the window
        again = await Run(tmp_path).start()
        await again.app.routing.start(None)  # what SidecarApp.start does (Run starts no bridge)
        await again.call("clock.advance_to", {"t": T0 + 320})
        assert [r["name"] for r in (await again.call("rules.list", {}))["rules"]] == ["alerts"]
        await again.call("events.emit", emit)
        rows = (await again.call("deliveries.list", {"target": "hook"}))["deliveries"]
        assert rows[-1]["status"] == "skipped" and rows[-1]["id"] != rows[0]["id"]

        # seed 002 ingest: a duplicate answers the FIRST event's id and deduplicated: true —
        # across a restart too (the key remembers its event, schema v7)
        keyed = {**emit, "dedup_key": "k-1"}
        one = await again.call("events.emit", keyed)
        assert one["deduplicated"] is False
        two = await again.call("events.emit", keyed)
        assert two == {**two, "event_id": one["event_id"], "deduplicated": True}
        await again.stop()
        third = await Run(tmp_path).start()
        await third.app.routing.start(None)
        await third.call("clock.advance_to", {"t": T0 + 330})
        assert (await third.call("events.emit", keyed))["event_id"] == one["event_id"]
        await third.stop()
    asyncio.run(main())


def test_stack_watch_raises_unreachable_after_five_minutes_and_reachable_once():
    w = StackWatch()
    assert w.observe(T0, acked=0, failed=0) is None  # nothing due, nothing failing
    assert w.observe(T0, acked=0, failed=3) is None
    assert w.observe(T0 + UNREACHABLE_AFTER_S - 1, acked=0, failed=1) is None
    ev = w.observe(T0 + UNREACHABLE_AFTER_S, acked=0, failed=1)
    assert ev is not None and (ev.source, ev.subject, ev.action, ev.priority) == (
        "sidecar", "stack", "unreachable", "high")
    assert ev.payload["failing_s"] == UNREACHABLE_AFTER_S
    assert w.observe(T0 + 900, acked=0, failed=1) is None  # once per outage
    back = w.observe(T0 + 901, acked=2, failed=0)
    assert back is not None and back.action == "reachable"
    assert w.observe(T0 + 902, acked=1, failed=0) is None


def test_operator_overdue_is_routed_once_per_tu_per_hour():
    from sidecar.router.core import Router
    from sidecar.router.model import parse_rule
    from tests.sidecar.world import World, fav

    w = World()
    w.d.router.targets["audit"] = "journal"
    w.d.router.apply_rule(parse_rule({"name": "overdue", "conditions": {"source": "sidecar",
                                                                         "subjects": ["operator"]},
                                      "actions": [{"target": "audit"}]}))
    assert isinstance(w.d.router, Router)
    w.login([fav(f"ru-{i}") for i in range(3)])
    for i in range(3):
        w.at(10 + i).ru_writes(f"ru-{i}")
    task = w.open_task("unanswered_message", "ru-0")
    w.at_abs(task.deadline + 1)  # overdue: one task, not yet 10 min
    w.at_abs(task.deadline + 600 + 5)  # the first one overdue 10 min: the alert
    w.at_abs(task.deadline + 1800)
    from sidecar.router.ops import PutDelivery
    alerts = [op.delivery for op in w.d.ops if isinstance(op, PutDelivery)
              and op.delivery.source == "sidecar"]
    real = [a for a in alerts if a.status == "pending"]
    assert [(a.subject, a.action, a.priority, a.target) for a in real] == [
        ("operator", "overdue", "high", "audit")]
    assert real[0].event_at == task.deadline + 600
    # the other two tasks' 10-minute marks fall within the hour: no second alert
    assert len(alerts) == 1


def test_a_failed_delivery_frees_the_throttle_window(tmp_path):
    # seed 002 _throttled counts only pending/delivered rows: once the one delivery inside the
    # window has failed (5 attempts to a receiver that refuses), the next event is sent, not cut
    async def main():
        run = await Run(tmp_path).start()
        await run.app.routing.start(None)
        await run.call("clock.advance_to", {"t": T0})
        await run.call("rules.create", {"name": "hooked", "conditions": {"source": "electron"},
                                        "actions": [{"target": "hook"}],
                                        "throttle_seconds": 30 * 86400})
        emit = {"source": "electron", "subject": "alert", "action": "fired", "payload": {}}
        await run.call("events.emit", emit)
        hour = 3600.0
        for i in range(1, 14 * 24):  # the retry ladder and the sender's cooldowns, an hour a step
            await run.call("clock.advance_to", {"t": T0 + i * hour})
            rows = (await run.call("deliveries.list", {"target": "hook"}))["deliveries"]
            if rows[0]["status"] == "failed":
                break
        assert rows[0]["status"] == "failed"
        await run.call("events.emit", emit)
        rows = (await run.call("deliveries.list", {"target": "hook"}))["deliveries"]
        assert [r["status"] for r in rows][1:] == ["pending"]
        second_at = rows[1]["event_at"]
        await run.stop()
        with sqlite3.connect(tmp_path / "sidecar.db") as c:  # the freed window is stored
            assert c.execute("SELECT last_at FROM router_throttle WHERE target = 'hook'"
                             ).fetchall() == [(second_at,)]
        again = await Run(tmp_path).start()  # the window now runs from the second event, stored
        await again.app.routing.start(None)
        await again.call("clock.advance_to", {"t": T0 + 15 * 86400})
        await again.call("events.emit", emit)
        rows = (await again.call("deliveries.list", {"target": "hook"}))["deliveries"]
        assert rows[-1]["status"] == "skipped"
        await again.stop()
    asyncio.run(main())
