"""A shutdown never loses a Stack write (DESIGN §3 "flushes the outbox it can … leaves nothing
half-written"; §9 the outbox): a write in flight when ``close()`` comes is cut within the close
— not left to run to its deadline — stays pending in the outbox (its claim was committed before
the send), and the next run sends it again under the same idempotency key, applied once.

What cuts it here is the exit flush's bound (sidecar.app.closing): the flush waits for the
detached attempt (``DeliveryPump.drain``) and its cancellation cancels that attempt; the Stack
client's own close (sidecar.stack.http11 rules: it aborts what is still in flight) is the
backstop behind it and has its tests in tests/stack/test_client_close.py.  A real wall-clock app
and SQLite store, a real Stack on loopback (tests/stack/fake_stack.py) sitting on the write."""
from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

from sidecar.app.root import SidecarApp
from sidecar.config import Settings
from sidecar.core.clock import Clock
from sidecar.router.attempt import Attempts
from sidecar.store.db import Store
from test_app_steps import TU, msg

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "stack"))
from fake_stack import StackServer  # noqa: E402
from tests.waits import EXIT_S  # noqa: E402

SITS_S = 4 * EXIT_S  # seconds Stack sits on the write, and the client's deadline: never reached


class Later(Clock):
    """The wall clock ``ahead`` seconds on: the next run, after the write's retry instant."""

    def __init__(self, ahead: float) -> None:
        self.ahead = ahead

    def now(self) -> float:
        return time.time() + self.ahead


async def run(path: Path, stack: StackServer, ahead: float = 0.0) -> tuple[SidecarApp, Store]:
    store = await Store.open(path / "sidecar.db")
    # the Stack client's own deadline is longer than the test ever waits (EXIT_S): only the close
    # can end the write before it
    app = SidecarApp(Settings(token="t", clock="wall", data_dir=path, port=0, stack_url=stack.url,
                              stack_timeout_s=SITS_S), store, clock=Later(ahead))
    app.bridge.notify = lambda m, p=None: 0  # type: ignore[method-assign]

    async def perform(req):  # no Electron: every platform request fails at once
        return None, "ConnectionClosed: the client is gone"
    app.perform = perform  # type: ignore[method-assign]
    app.routing.pump_.gate = Attempts()  # no sender health: every attempt is made
    await app.start()
    return app, store


async def stack_rows(app: SidecarApp) -> list[dict]:
    return (await app.handle("deliveries.list", {"target": "stack"}))["deliveries"]


async def test_a_stack_write_in_flight_at_close_is_cut_stays_pending_and_goes_next_run(tmp_path):
    stack = StackServer()
    stack.start()
    try:
        stack.fail("delay", path_contains="/tasks", seconds=SITS_S)  # Stack sits on the task write
        app, store = await run(tmp_path, stack)
        await app.handle("session.login", {"tu": TU, "project": "golden", "operator": "op"})
        now = time.time()
        await app.handle("platform.event", msg("ru-1", "m-1", now))
        async with asyncio.timeout(10):  # the pump loop sent it; Stack holds it
            while not any("/tasks" in r.path for r in list(stack.requests)):
                await asyncio.sleep(0.01)
        key = next(r for r in stack.requests if "/tasks" in r.path).headers["idempotency-key"]
        assert "stack" in app.routing.pump_.in_flight
        await app.close()
        async with asyncio.timeout(EXIT_S):  # cut by the close: its deadline (SITS_S) is further
            while "stack" in app.routing.pump_.in_flight:
                await asyncio.sleep(0.01)
        await store.close()
        assert not stack.applied  # Stack never applied it

        stack.heal()
        b, store = await run(tmp_path, stack, ahead=60.0)  # the next run, past the retry instant
        try:
            async with asyncio.timeout(10):
                while not any(r.headers.get("idempotency-key") == key for r in stack.applied):
                    await asyncio.sleep(0.01)
            row = next(r for r in await stack_rows(b) if r["idem_key"] == key)
            async with asyncio.timeout(10):  # the landing is settled by the pump's next pass
                while row["status"] != "delivered":
                    await asyncio.sleep(0.01)
                    row = next(r for r in await stack_rows(b) if r["idem_key"] == key)
            assert row["attempts"] == 2  # the cut attempt counted, and this one
            assert [r.outcome for r in stack.requests
                    if r.headers.get("idempotency-key") == key] == ["fault:delay", "applied"]
        finally:
            await b.close()
            await store.close()
    finally:
        stack.stop()
