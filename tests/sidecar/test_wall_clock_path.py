"""The wall clock's per-event path (issue 11, p99 ``platform.event`` → ``task.created`` at
1,000 events/s; sidecar/app/clockwork.py "Wall clock, per event"): an event costs its own step and
nothing more — no timer step for the delivery timer, no ticker round unless a timer became due
sooner than the ticker sleeps, no SQLite read by a delivery pass that could send nothing — and
yet every delivery a target can take still goes out at once, and a sooner timer still fires."""
from __future__ import annotations

import asyncio
import json

import pytest

from sidecar.router.io.storage import RouterStore
from sidecar.runtime import decisions
from sidecar.runtime.engine import OUTBOX_TIMER
from tests.app.test_step_groups import T0, Run, event
from tests.waits import EXIT_S

HOUSEKEEPING = (None, "housekeeping")


async def settle(cond, what: str, budget_s: float = 5.0) -> None:
    """Let the background tasks (ticker, pump) run until ``cond()``; fail naming ``what``."""
    loop = asyncio.get_running_loop()
    end = loop.time() + budget_s
    while not cond():
        if loop.time() > end:
            pytest.fail(f"not within {budget_s} s: {what}")
        await asyncio.sleep(0.001)


def count_passes(run: Run) -> list[float]:
    passes: list[float] = []
    real = run.app.routing.pump

    async def pump(now, **kw):
        passes.append(now)
        return await real(now, **kw)
    run.app.routing.pump = pump  # type: ignore[method-assign]
    return passes


async def test_without_stack_or_targets_an_event_costs_one_step_and_no_delivery_pass(tmp_path):
    run = await Run(tmp_path).start()
    passes = count_passes(run)
    try:
        steps0 = run.app.executor.steps
        for i in range(20):
            await run.app.handle("platform.event", event(i))
            await asyncio.sleep(0)  # the ticker and the pump look
        await asyncio.sleep(0.05)
        assert run.app.executor.steps == steps0 + 20  # no timer step of the delivery timer
        assert OUTBOX_TIMER not in run.app.engine.scheduler  # fired: straight to the pump
        assert len(passes) <= 1  # one pass learnt that nothing can ever be sent; no more reads
        stack_rows = [r for r in await RouterStore(run.store).deliveries() if r.channel == "stack"]
        assert len(stack_rows) >= 20 and all(r.status == "pending" for r in stack_rows)  # wait for a Stack
        assert len(run.created()) == 20
    finally:
        await run.stop()


async def test_a_target_s_deliveries_go_out_at_once_without_a_timer_step(tmp_path, monkeypatch):
    monkeypatch.setenv("SIDECAR_ROUTER_TARGETS", json.dumps({"audit": {"channel": "journal"}}))
    run = await Run(tmp_path).start()
    passes = count_passes(run)
    store = RouterStore(run.store)
    try:
        await run.app.handle("rules.create", {"name": "tasks to audit", "conditions": {"source": "tasks"},
                                              "actions": [{"target": "audit"}]})
        steps0 = run.app.executor.steps
        for i in range(5):
            await run.app.handle("platform.event", event(i))

        async def audit_rows():
            return [r for r in await store.deliveries() if r.target == "audit"]
        rows: list = []

        def delivered() -> bool:
            # the rows are committed first and the ``delivery`` notes sent after the pass
            # returns (durable before told), so both are waited for
            notes = sum(1 for e in run.log if e[:2] == ("note", "delivery"))
            return len(rows) == 5 and all(r.status == "delivered" for r in rows) and notes >= 5
        loop = asyncio.get_running_loop()
        end = loop.time() + EXIT_S  # a wait for the pump, not a bound on it
        while not delivered():
            assert loop.time() < end, [r.status for r in rows]
            await asyncio.sleep(0.005)
            rows = await audit_rows()
        assert run.app.executor.steps == steps0 + 5  # the pump was kicked, not a timer step
        # a pass per kick at most, plus the one that settles the last detached attempt's
        # landing (targets are isolated: a pass hands each send to a task of its own)
        assert 1 <= len(passes) <= 5 + 1 and all(t == T0 for t in passes)
        assert sum(1 for e in run.log if e[:2] == ("note", "delivery")) == 5
    finally:
        await run.stop()


async def test_the_ticker_wakes_for_a_sooner_timer_only(tmp_path):
    run = await Run(tmp_path).start()
    app = run.app
    try:
        await settle(lambda: app.alarm.tick_at > T0, "the ticker sleeps to its next timer")
        await app.handle("platform.event", event(1))  # arms nothing before the ticker's instant
        assert not app.alarm.event.is_set()
        # a step that arms a timer due now: the ticker wakes and fires it at once
        await app.step(lambda s: app.engine.scheduler.schedule(HOUSEKEEPING, T0))
        await settle(lambda: app.engine.scheduler.due_of(HOUSEKEEPING) == T0 + decisions.HOUSEKEEPING_PERIOD_S,
                     "the housekeeping timer due now fired and re-armed itself")
    finally:
        await run.stop()
