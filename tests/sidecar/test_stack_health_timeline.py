"""Stack's timeline after an outage, in the app on the virtual clock with the real sender health
and the reference Stack on loopback (``electron_stub.stack_server``: ``POST /v1/batch``, fault
``down`` drops the connection).  Breaker finding F4: one dropped batch of N writes counted N
failures, so Stack entered cooldown on ONE failed request and its writes waited ~16 min.
(A request on a kept-alive connection that dies before its answer begins is resent once on a
new connection inside the same attempt: the server counts two, sender health one.)

Now (seed 000 §1, DESIGN §9/§10): sender health counts attempts — one HTTP request is one —
so a dropped request is one failure and its writes retry on Stack's ladder (+5 s); three failed
requests in a row start the built-in group's 1–2 min cooldown, released at the modelled exit
with no 10 min rest; ``stack.flush`` says why writes wait; no row shows a stale instant."""
from __future__ import annotations

from pathlib import Path


from electron_stub.stack_server import StackServer
from sidecar.app.root import SidecarApp
from sidecar.config import Settings
from sidecar.senders import health as h
from sidecar.store.db import Store
from tests.app.test_app_steps import T0, TU, msg


class App:
    def __init__(self, path: Path, stack: StackServer) -> None:
        self.path, self.stack = path, stack

    async def __aenter__(self) -> "App":
        self.store = await Store.open(self.path / "sidecar.db")
        self.app = SidecarApp(Settings(token="t", clock="virtual", data_dir=self.path,
                                       stack_url=self.stack.url), self.store)
        self.app.bridge.notify = lambda m, p=None: 0  # type: ignore[method-assign]
        # what start() does, without the websocket
        self.app.engine.outbox_at(await self.app.routing.start(None))
        await self.app.senders.start(["stack"])
        return self

    async def __aexit__(self, *exc) -> None:
        await self.app.close()
        await self.store.close()

    async def call(self, method: str, params: dict | None = None):
        return await self.app.handle(method, params or {})

    async def at(self, t: float) -> None:
        await self.call("clock.advance_to", {"t": t})

    async def rows(self) -> list[dict]:
        return (await self.call("deliveries.list", {"target": "stack"}))["deliveries"]

    async def history(self) -> list[tuple[float, int, str]]:
        rows = (await self.call("senders.history", {"sender": "stack"}))["rows"]
        return [(r["at"] - T0, r["code"], r["note"]) for r in rows]

    def sender(self) -> h.SenderState:
        return self.app.senders.gate.state("stack")


async def _queue_while_down(a: App, n: int = 4) -> int:
    """Login at T0 (Stack up), Stack goes down, ``n`` chat messages at T0+3: their writes."""
    await a.at(T0)
    await a.call("session.login", {"tu": TU, "project": "golden", "operator": "op"})
    a.stack.set_fault("down")
    await a.at(T0 + 3)
    for i in range(n):
        await a.call("platform.event", msg(f"ru-{i}", f"m-{i}", T0 + 3))
    return len(await a.rows())


async def test_one_dropped_batch_is_one_failure_and_retries_on_the_ladder(tmp_path, stack):
    async with App(tmp_path, stack) as a:
        n = await _queue_while_down(a)
        assert n >= 4
        ans = await a.call("stack.flush")  # ONE POST /v1/batch, dropped
        assert (ans["acked"], ans["failed"], ans["pending"]) == (0, n, n)
        # one attempt, on the wire twice: it went out on the login's kept-alive connection, which
        # died before any byte of an answer, so the client resent it once on a new one (idempotency
        # keys make that safe; sidecar/stack/http11.py) — and that one was dropped too
        assert stack.counters["refused"] == 2
        assert ans["waiting"] == {"state": "retry", "until": T0 + 8, "reason": ans["waiting"]["reason"]}
        assert "2026-11-30 08:00:08 UTC" in ans["waiting"]["reason"]
        s = a.sender()
        assert s.state == h.ACTIVE and s.failed_in_row == 1  # once, not once per write
        assert await a.history() == [(3.0, 109, "failed_in_row=1")]
        stack.set_fault("up")
        await a.at(T0 + 7.999)
        assert stack.counters["acked"] == 0
        await a.at(T0 + 8)  # the ladder's first step: +5 s, not cooldown + exit lag + 10 min
        assert stack.counters["acked"] == n
        assert all(r["status"] == "delivered" and r["delivered_at"] == T0 + 8 for r in await a.rows())
        assert a.sender().failed_in_row == 0 and a.sender().state == h.ACTIVE
        assert [c for _, c, _ in await a.history()] == [109]  # no cooldown (101) at all


async def test_three_failed_requests_start_a_short_cooldown_released_with_no_rest(tmp_path, stack):
    async with App(tmp_path, stack) as a:
        n = await _queue_while_down(a)
        await a.call("stack.flush")  # request 1 at +3
        await a.at(T0 + 8)  # request 2 at +8 (ladder +5 s)
        assert a.sender().failed_in_row == 2 and a.sender().state == h.ACTIVE
        await a.at(T0 + 23)  # request 3 at +23 (ladder +15 s): the group's threshold 3
        s = a.sender()
        assert s.state == h.COOLDOWN and s.cooldown_start == T0 + 23 and s.rest_s == 0
        assert 60 <= s.cooldown_end - s.cooldown_start <= 120  # the built-in group: 1–2 min
        assert 0 <= s.exit_at - s.cooldown_end <= 7 * 60  # the modelled scheduler step
        assert stack.counters["refused"] == 4  # request 1 resent once on a new connection (above)
        assert [(t, c) for t, c, _ in await a.history()] == [(3.0, 109), (8.0, 109), (23.0, 109), (23.0, 101)]
        stack.set_fault("up")
        await a.at(T0 + 60)  # the rows' next try (+30 s): refused by health, not an attempt
        rows = await a.rows()
        assert [r["attempts"] for r in rows] == [3] * n
        assert all(r["next_attempt_at"] == s.exit_at for r in rows)
        assert all(r["last_error"] == f"waiting: cooldown #1 until {h.utc_text(s.cooldown_end)},"
                   f" asked again at {h.utc_text(s.exit_at)}" for r in rows)
        ans = await a.call("stack.flush")
        assert ans["pending"] == n and ans["waiting"]["state"] == "cooldown"
        assert ans["waiting"]["until"] == s.exit_at
        await a.at(s.exit_at - 0.001)
        assert stack.counters["acked"] == 0
        await a.at(s.exit_at)  # released (100) and sent at the same instant: no 10 min rest
        assert stack.counters["acked"] == n
        rows = await a.rows()
        assert all(r["status"] == "delivered" and r["delivered_at"] == s.exit_at for r in rows)
        assert all(r["last_error"] is None for r in rows)  # no stale "until"
        assert (await a.history())[-1][:2] == (s.exit_at - T0, 100)
        assert (await a.call("stack.flush"))["pending"] == 0


async def test_the_waiting_text_follows_the_state_and_is_cleared_at_release(tmp_path, stack):
    """A row that waited for the cooldown keeps no stale instant: released, it says nothing of
    the cooldown; while it waits the text names the current end and the instant asked again."""
    async with App(tmp_path, stack) as a:
        await _queue_while_down(a, 1)
        await a.call("stack.flush")
        await a.at(T0 + 23)
        s = a.sender()
        await a.at(T0 + 53)  # asked while in cooldown: deferred, waiting text
        (row,) = [r for r in await a.rows() if r["status"] == "pending"][:1]
        assert row["last_error"].startswith("waiting: cooldown #1 until ")
        stack.set_fault("up")
        await a.at(s.exit_at + 1)
        assert all(r["last_error"] is None for r in await a.rows())
