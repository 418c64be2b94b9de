"""Stack's flush cadence in the app on the virtual clock (issue 9's last gap, issue 11 item 2;
sidecar.router.cadence): new writes wait for the 10 s grid and go out together, ``next_due``
announces the flush instant, retries keep their exact ladder instants, the ``sidecar/stack
unreachable`` watch keeps its 5 minutes, and ``stack.flush`` / logout / login flush at once.
Against a real HTTP Stack on loopback (tests/stack/fake_stack.py: single writes, no batch)."""
from __future__ import annotations

import asyncio
import json
import sys
import threading
from pathlib import Path

import pytest

from sidecar.app.root import SidecarApp
from sidecar.config import Settings
from sidecar.router.attempt import Attempts
from sidecar.runtime.engine import OUTBOX_TIMER
from sidecar.store.db import Store
from tests.app.test_app_steps import T0, TU, msg

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "stack"))
from fake_stack import StackServer  # noqa: E402

assert T0 % 10 == 0  # the grid instants below are T0 + k·10


@pytest.fixture
def stack():
    server = StackServer()
    server.start()
    yield server
    server.stop()


class App:
    def __init__(self, path: Path, stack: StackServer, interval: float = 10.0) -> None:
        self.path, self.stack, self.interval = path, stack, interval

    async def __aenter__(self) -> "App":
        self.store = await Store.open(self.path / "sidecar.db")
        self.app = SidecarApp(Settings(token="t", clock="virtual", data_dir=self.path,
                                       stack_url=self.stack.url,
                                       stack_flush_interval_s=self.interval), self.store)
        self.app.bridge.notify = lambda m, p=None: 0  # type: ignore[method-assign]
        self.app.engine.outbox_at(await self.app.routing.start(None))  # what start() does
        # no sender health here: every attempt is made (its cooldown has tests of its own)
        self.app.routing.pump_.gate = Attempts()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.app.close()
        await self.store.close()

    async def call(self, method: str, params: dict):
        return await self.app.handle(method, params)

    def writes(self) -> int:
        return len(self.stack.writes())

    async def rows(self) -> list[dict]:
        return (await self.call("deliveries.list", {"target": "stack"}))["deliveries"]


async def _login(a: App) -> None:
    await a.call("clock.advance_to", {"t": T0})
    await a.call("session.login", {"tu": TU, "project": "golden", "operator": "op"})


def test_new_writes_wait_for_the_grid_and_next_due_announces_the_flush(tmp_path, stack):
    async def main() -> None:
        async with App(tmp_path, stack) as a:
            await _login(a)
            for i, at in enumerate((T0 + 3, T0 + 5, T0 + 7)):
                await a.call("clock.advance_to", {"t": at})
                ans = await a.call("platform.event", msg(f"ru-{i}", f"m-{i}", at))
                assert ans["next_due"] <= T0 + 10  # the flush instant (or a sooner timer)
            assert a.writes() == 0
            assert a.app.routing.flush_at == T0 + 10 == a.app.engine.scheduler.due_of(OUTBOX_TIMER)
            await a.call("clock.advance_to", {"t": T0 + 9.999})
            assert a.writes() == 0
            queued = len(await a.rows())
            assert queued >= 6  # a task and a candidate per message
            ans = await a.call("clock.advance_to", {"t": T0 + 25})  # one advance past the grid
            assert a.writes() == queued  # all of them at T0 + 10, none before
            rows = await a.rows()
            assert {(r["status"], r["attempts"], r["delivered_at"]) for r in rows} == {("delivered", 1, T0 + 10)}
            assert a.app.routing.flush_at is None and ans["next_due"] != T0 + 10
    asyncio.run(main())


def _arrive_after_another(stack: StackServer, path: str) -> list[str]:
    """Make the second request of a write reach ``stack`` only after a request of another
    write on ``path`` has (bounded, 5 s): the flush sends its writes concurrently, so on a
    loaded machine either may be taken first.  Returns the list to put that write's key in;
    after the hold it also holds ``"held"`` (or ``"timed out"``)."""
    key: list[str] = []
    other = threading.Event()
    times: dict[str, int] = {}

    def before(seen) -> None:
        k = seen.headers.get("idempotency-key", "")
        if path not in seen.path or not key:
            return
        if k != key[0]:
            other.set()
            return
        times[k] = times.get(k, 0) + 1
        if times[k] == 2:
            key.append("held" if other.wait(5.0) else "timed out")
    stack.before = before
    return key


@pytest.mark.parametrize("arrival", ["as sent", "retry last"])
def test_retries_keep_their_ladder_instants_and_a_flush_takes_every_due_write(tmp_path, stack, arrival):
    # "retry last": ru-1's retry reaches Stack after ru-2's fresh task write of the same flush
    # (the order once seen at load ~9; its flake found ru-1 delivered, (2, None): the fault
    # was aimed at the path every task write shares, and ru-2's write took the 503)
    held = _arrive_after_another(stack, "/tasks") if arrival == "retry last" else []

    async def main() -> None:
        async with App(tmp_path, stack) as a:
            await _login(a)
            await a.call("clock.advance_to", {"t": T0 + 3})
            await a.call("platform.event", msg("ru-1", "m-1", T0 + 3))
            key = next(r for r in await a.rows() if r["source"] == "tasks")["idem_key"]
            held.append(key)
            stack.fail(503, key=key, times=2)  # ru-1's task write, whatever else is in flight
            await a.call("clock.advance_to", {"t": T0 + 10})  # flush: the task write fails (attempt 1)
            task = next(r for r in await a.rows() if r["source"] == "tasks")
            assert (task["status"], task["attempts"], task["next_attempt_at"]) == ("pending", 1, T0 + 15)
            # the retry is due at attempt + 5 s, off the grid: that is the flush instant
            assert a.app.routing.flush_at == T0 + 15
            await a.call("clock.advance_to", {"t": T0 + 12})
            ans = await a.call("platform.event", msg("ru-2", "m-2", T0 + 12))  # fresh: grid T0 + 20
            assert ans["next_due"] <= T0 + 15 and a.app.routing.flush_at == T0 + 15
            before = a.writes()
            await a.call("clock.advance_to", {"t": T0 + 16})
            rows = {(r["source"], r["ru"]): r for r in await a.rows()}
            task = rows[("tasks", "ru-1")]
            # attempt 2 at exactly T0 + 15 (fails again) -> attempt 3 at + 15 s; ru-2's fresh
            # writes (due at T0 + 12) went out in the same flush
            assert (task["attempts"], task["next_attempt_at"]) == (2, T0 + 30)
            assert rows[("tasks", "ru-2")]["delivered_at"] == T0 + 15
            assert a.writes() - before >= 3
            await a.call("clock.advance_to", {"t": T0 + 29.9})
            assert next(r for r in await a.rows() if r["source"] == "tasks" and r["ru"] == "ru-1")["attempts"] == 2
            await a.call("clock.advance_to", {"t": T0 + 31})
            task = next(r for r in await a.rows() if r["source"] == "tasks" and r["ru"] == "ru-1")
            assert (task["status"], task["attempts"], task["delivered_at"]) == ("delivered", 3, T0 + 30)
    asyncio.run(main())
    assert held[1:] == (["held"] if arrival == "retry last" else [])


def test_unreachable_keeps_its_five_minutes_from_the_first_failed_attempt(tmp_path, stack, monkeypatch):
    monkeypatch.setenv("SIDECAR_ROUTER_TARGETS", json.dumps({"audit": {"channel": "journal"}}))

    async def main() -> None:
        async with App(tmp_path, stack) as a:
            await _login(a)
            await a.call("rules.create", {"name": "stack trouble", "conditions": {
                "source": "sidecar", "subjects": ["stack"]}, "actions": [{"target": "audit"}]})
            stack.fail(503)  # every write, until healed
            await a.call("clock.advance_to", {"t": T0 + 3})
            await a.call("platform.event", msg("ru-1", "m-1", T0 + 3))
            # first failed attempt at the flush T0 + 10; retries at +15, +30, +60, +120, +240 s
            await a.call("clock.advance_to", {"t": T0 + 300})
            assert a.app.routing.watch.waiting_since == T0 + 10 and not a.app.routing.watch.down
            await a.call("clock.advance_to", {"t": T0 + 305})
            await a.call("platform.event", msg("ru-2", "m-2", T0 + 305))  # fresh: flushed at T0 + 310
            await a.call("clock.advance_to", {"t": T0 + 311})
            audit = (await a.call("deliveries.list", {"target": "audit"}))["deliveries"]
            assert [(d["action"], d["event_at"]) for d in audit] == [("unreachable", T0 + 310)]
            stack.heal()
            await a.call("clock.advance_to", {"t": T0 + 400})  # ru-2's retry at T0 + 315 is acknowledged
            audit = (await a.call("deliveries.list", {"target": "audit"}))["deliveries"]
            assert [(d["action"], d["event_at"]) for d in audit] == [("unreachable", T0 + 310),
                                                                     ("reachable", T0 + 315)]
    asyncio.run(main())


def test_stack_flush_logout_and_login_send_at_once(tmp_path, stack):
    async def main() -> None:
        async with App(tmp_path, stack) as a:
            await _login(a)
            assert await a.call("stack.flush", {}) == {"acked": 0, "failed": 0, "pending": 0,
                                                       "next_due": a.app.next_due()}
            await a.call("clock.advance_to", {"t": T0 + 3})
            await a.call("platform.event", msg("ru-1", "m-1", T0 + 3))
            queued = len(await a.rows())
            ans = await a.call("stack.flush", {})
            assert (ans["acked"], ans["failed"], ans["pending"]) == (queued, 0, 0)
            assert a.writes() == queued and {r["delivered_at"] for r in await a.rows()} == {T0 + 3}
            await a.call("clock.advance_to", {"t": T0 + 4})
            await a.call("platform.event", msg("ru-2", "m-2", T0 + 4))
            await a.call("session.logout", {"tu": TU})  # the next machine reads Stack
            assert {r["status"] for r in await a.rows()} == {"delivered"}
            # the logout itself queued rows (its tasks closed) and flushed them too
            assert a.writes() == len(await a.rows())
            await a.call("clock.advance_to", {"t": T0 + 5})
            await a.call("session.login", {"tu": TU, "project": "golden", "operator": "op"})
            await a.call("platform.event", msg("ru-3", "m-3", T0 + 5))
            key = next(r for r in await a.rows() if r["status"] == "pending" and r["source"] == "tasks")["idem_key"]
            stack.fail(503, key=key, times=1)  # ru-3's task write (fake_stack: aim at the write)
            ans = await a.call("stack.flush", {})  # the task write fails: it waits for its retry
            pending = [r for r in await a.rows() if r["status"] == "pending"]
            assert ans["failed"] == 1 and ans["pending"] == len(pending) >= 1  # its pair waits behind it
            assert {(r["source"], r["ru"]) for r in pending if r["attempts"]} == {("tasks", "ru-3")}
            assert a.app.routing.flush_at == T0 + 10  # attempt + 5 s
    asyncio.run(main())


def test_a_restart_sends_what_a_sigkill_left_queued(tmp_path, stack):
    async def main() -> None:
        a = App(tmp_path, stack)
        await a.__aenter__()
        await _login(a)
        await a.call("clock.advance_to", {"t": T0 + 3})
        await a.call("platform.event", msg("ru-1", "m-1", T0 + 3))
        queued = len(await a.rows())
        # a SIGKILL: nothing is flushed (the store is simply closed under the app)
        await a.store.close()
        await a.app.stack.close()
        assert a.writes() == 0
        async with App(tmp_path, stack) as b:
            assert b.app.routing.flush_at == T0 + 10  # from SQLite: the rows' grid instant
            await b.call("clock.advance_to", {"t": T0 + 60})  # the restart's first advance sends them
            assert b.writes() == queued
            assert {(r["status"], r["delivered_at"]) for r in await b.rows()} == {("delivered", T0 + 60)}
    asyncio.run(main())
