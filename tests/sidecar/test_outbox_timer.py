"""The Stack outbox's next attempt lives in the one scheduler (issue 12; DESIGN §5, §12.6): a
process-wide timer ``OUTBOX_TIMER = (None, "outbox")``, so the virtual clock's ``next_due`` comes
from the scheduler alone and the app keeps no shadow due time."""
from __future__ import annotations

import asyncio

from sidecar.app.root import SidecarApp
from sidecar.config import Settings
from sidecar.core.rng import KeyedRandom
from sidecar.runtime.engine import OUTBOX_TIMER, Engine
from sidecar.runtime.step import Step
from sidecar.services import default_services
from sidecar.store.db import Store
from tests.app.test_app_steps import T0, TU, msg


def test_the_outbox_timer_keeps_the_sooner_instant_and_fires_as_a_pump_request():
    e = Engine(KeyedRandom(1), default_services)
    e.outbox_at(T0 + 30)
    e.outbox_at(T0 + 50)  # later: the armed attempt stands
    e.outbox_at(None)  # nothing queued: no change
    assert e.scheduler.due_of(OUTBOX_TIMER) == T0 + 30
    e.outbox_at(T0 + 10)
    assert e.scheduler.due_of(OUTBOX_TIMER) == T0 + 10
    e.scheduler.schedule((None, "housekeeping"), T0 + 20)
    # an attempt at or before now is made by the next input: not an instant of its own
    assert e.next_due(T0) == T0 + 10 and e.next_due(T0 + 10) == T0 + 20
    step = Step(now=T0 + 10)
    assert e.fire(step) and step.outbox_due and step.ops == []  # not housekeeping
    assert OUTBOX_TIMER not in e.scheduler and e.next_due(T0 + 10) == T0 + 20


def test_the_app_keeps_no_shadow_due_time_and_answers_next_due_from_the_scheduler(tmp_path):
    async def main() -> None:
        store = await Store.open(tmp_path / "sidecar.db")
        app = SidecarApp(Settings(token="t", clock="virtual", data_dir=tmp_path), store)
        app.bridge.notify = lambda m, p=None: 0  # type: ignore[method-assign]
        try:
            assert not hasattr(app, "_outbox_due")
            await app.handle("clock.advance_to", {"t": T0})
            await app.handle("session.login", {"tu": TU, "project": "golden", "operator": "op"})
            await app.handle("clock.advance_to", {"t": T0 + 10})
            ans = await app.handle("platform.event", msg("ru-1", "m-1", T0 + 10))
            # the task's history row is queued for Stack; with no Stack configured it waits for
            # one and arms no delivery timer (sidecar.router.cadence): next_due is the scheduler's
            assert OUTBOX_TIMER not in app.engine.scheduler
            assert ans["next_due"] == app.engine.scheduler.next_due()
            assert app.status()["outbox_due"] is None
            await app.handle("clock.advance_to", {"t": T0 + 11})
            assert OUTBOX_TIMER not in app.engine.scheduler
            assert app.status()["timers"] == len(app.engine.scheduler)
        finally:
            await app.close()
            await store.close()
    asyncio.run(main())
