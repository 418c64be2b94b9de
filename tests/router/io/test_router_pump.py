"""The pump and the gate on a virtual clock with a real store: the retry schedule to the second,
Stack never ``failed``, TTL at send time, claims before sends, health's plug (DESIGN §10)."""
from __future__ import annotations

from sidecar.router.attempt import Admission, AlwaysOpen, Attempts, Report, ReleaseTarget
from sidecar.router.model import RoutingEvent, StackWrite
from sidecar.router.flood import FLOOD_CRITICAL_LEAD_S
from sidecar.router.attempt import (DELIVERED, LADDER, classify_exc, classify_status, held, retryable,
                                   terminal)
from sidecar.router.io.pump import DeliveryPump
from sidecar.router.io.stack_channel import StackChannel

from routerhelp import T0, Scripted, emit, make_state

ALERT = RoutingEvent(source="electron", subject="alert", action="fired", priority="normal", payload={})


async def drive(pump: DeliveryPump, until: float, start: float = T0) -> list[float]:
    """Advance a virtual clock: call the pump at each ``next_due`` until ``until``; the instants."""
    at, seen = start, []
    while at <= until:
        res = await pump.run_due(at)
        seen.append(at)
        if res.next_due is None or res.next_due > until:
            break
        at = max(res.next_due, at)
    return seen


async def test_retry_schedule_to_the_second_then_failed(rstore):
    st = make_state({"name": "to crm", "actions": [{"target": "crm-hook"}]})
    hook = Scripted("crm-hook", lambda r, n: retryable("HTTP 503", 503))
    pump = DeliveryPump(rstore, {"crm-hook": hook})
    await emit(rstore, st, [ALERT], T0 + 10)
    await drive(pump, T0 + 10_000, start=T0 + 10)
    t = T0 + 10
    assert [c[1] - t for c in hook.calls] == [0, 30, 150, 750, 2550]  # +30 s, +2 min, +10 min, +30 min
    assert [c[1] - p[1] for p, c in zip(hook.calls, hook.calls[1:])] == list(LADDER)
    (row,) = await rstore.deliveries(target="crm-hook")
    assert (row.status, row.attempts, row.next_attempt_at) == ("failed", 5, None)
    assert row.last_error.startswith("retryable: HTTP 503")
    assert await rstore.next_due() is None


async def test_pending_until_the_fifth_attempt_r05_times(rstore):
    st = make_state({"name": "to crm", "actions": [{"target": "crm-hook"}]})
    pump = DeliveryPump(rstore, {"crm-hook": Scripted("crm-hook", lambda r, n: retryable("boom"))})
    await emit(rstore, st, [ALERT], T0 + 10)
    await drive(pump, T0 + 2500, start=T0 + 10)
    (row,) = await rstore.deliveries()
    assert (row.status, row.attempts, row.next_attempt_at) == ("pending", 4, T0 + 2560)
    await drive(pump, T0 + 2620, start=T0 + 2500)
    assert (await rstore.deliveries())[0].status == "failed"


async def test_terminal_fails_at_once_and_retry_after_is_honoured(rstore):
    st = make_state({"name": "both", "actions": [{"target": "crm-hook"}, {"target": "ops-telegram"}]})
    hook = Scripted("crm-hook", lambda r, n: terminal("HTTP 400", 400))
    tg = Scripted("ops-telegram", lambda r, n: classify_status(429, "slow down", retry_after=90)
                  if len(tg.calls) == 1 else DELIVERED)
    pump = DeliveryPump(rstore, {"crm-hook": hook, "ops-telegram": tg})
    await emit(rstore, st, [ALERT], T0)
    res = await pump.run_due(T0)
    assert res.next_due == T0 + 90 + FLOOD_CRITICAL_LEAD_S  # 429 retry_after 90 s: flood control
    rows = {r.target: r for r in await rstore.deliveries()}
    assert (rows["crm-hook"].status, rows["crm-hook"].attempts) == ("failed", 1)
    assert rows["crm-hook"].last_error == "terminal: HTTP 400"
    await pump.run_due(T0 + 90)
    assert len(tg.calls) == 1
    await pump.run_due(T0 + 90 + FLOOD_CRITICAL_LEAD_S)
    assert (await rstore.deliveries(target="ops-telegram"))[0].status == "delivered"


def test_classification():
    assert classify_status(200).ok and classify_status(204).ok
    for code in (500, 502, 503, 408):
        assert classify_status(code).kind == "retryable", code
    assert classify_status(429).kind == "flooded"  # flood control is not failure (DESIGN §10)
    for code in (400, 401, 403, 404, 409, 422, 301):
        assert classify_status(code).kind == "terminal", code
    assert classify_status(429, retry_after=5).retry_after == 5
    assert classify_status(503, retry_after=5).retry_after is None
    assert classify_exc(ConnectionRefusedError("refused")).kind == "retryable"
    assert classify_exc(TimeoutError()).kind == "retryable"


def marker_event(i: int, pair: str = "g/r1") -> RoutingEvent:
    return RoutingEvent(source="markers", subject="followUpChat", action="set", priority="high",
                 payload={"i": i}, write=StackWrite(pair=pair, idem_key=f"k{i}", method="PUT",
                                                     path=f"/v1/tus/g/favorites/{pair[2:]}/markers/followUpChat",
                                                     body=b'{"value":{"step":0}}'))


class FakeStack(StackChannel):
    def __init__(self, answer) -> None:
        super().__init__(client=None, batch=False)  # type: ignore[arg-type]
        self.answer, self.calls = answer, []

    async def send(self, row, now):
        self.calls.append((row.idem_key, now))
        return self.answer(row, now)


async def test_stack_never_fails_keeps_the_last_step_and_keeps_pair_order(rstore):
    st = make_state()
    down = {"on": True}
    stack = FakeStack(lambda r, n: retryable("down") if down["on"] else DELIVERED)
    pump = DeliveryPump(rstore, {}, stack=stack)
    await emit(rstore, st, [marker_event(1), marker_event(2)], T0)
    await drive(pump, T0 + 4 * 3600)
    k1 = [n - T0 for key, n in stack.calls if key == "k1"]
    # the Stack ladder (STACK_LADDER): 5 s, 15 s, 30 s, 1 min, 2 min, then 2 min forever
    assert k1[:6] == [0, 5, 20, 50, 110, 230] and k1[6] - k1[5] == 120 and k1[7] - k1[6] == 120
    assert all(key == "k1" for key, _ in stack.calls)  # k2 never overtakes its pair's head
    rows = await rstore.deliveries()
    assert [r.status for r in rows] == ["pending", "pending"] and rows[0].attempts >= 7
    down["on"] = False
    await pump.run_due(T0 + 5 * 3600)
    assert [r.status for r in await rstore.deliveries()] == ["delivered", "delivered"]
    assert [k for k, _ in stack.calls[-2:]] == ["k1", "k2"]  # the ack made k2 the head in the same pass
    assert terminal("x").kind == "terminal" and held("x").kind == "held"


async def test_ttl_is_checked_at_send_time(rstore):
    st = make_state({"name": "r", "actions": [{"target": "crm-hook"}]})
    n = {"i": 0}
    hook = Scripted("crm-hook", lambda r, now: retryable("down"))
    pump = DeliveryPump(rstore, {"crm-hook": hook})
    e = RoutingEvent(source="electron", subject="s", action="a", payload={}, ttl_s=100)
    await emit(rstore, st, [e], T0)
    await pump.run_due(T0)  # attempt 1 fails; retry at +30, then +150 > ttl
    await pump.run_due(T0 + 30)
    await pump.run_due(T0 + 150)
    (row,) = await rstore.deliveries()
    assert len(hook.calls) == 2 and row.status == "failed" and row.last_error.startswith("expired")
    assert n["i"] == 0


class Cooldown(AlwaysOpen):
    """A stand-in for sender health: the gate asks it before each attempt and reports after
    (no probes: :class:`AlwaysOpen`'s)."""

    def __init__(self) -> None:
        self.closed_until: float | None = None
        self.parked = False
        self.reports: list[tuple[str, str, bool]] = []

    def may_send(self, target, channel, now):
        if self.parked:
            return Admission(allowed=False, not_before=None, reason="need check")
        if self.closed_until is not None and now < self.closed_until:
            return Admission(allowed=False, not_before=self.closed_until, reason="cooldown")
        return Admission(allowed=True)

    def report(self, target, channel, outcome, now, *, final):
        self.reports.append((target, outcome.kind, final))
        if outcome.kind == "retryable":
            self.closed_until = now + 3600
        return Report()


async def test_health_plugs_into_the_one_gate_waiting_is_not_an_attempt(rstore):
    st = make_state({"name": "r", "actions": [{"target": "crm-hook"}]})
    health = Cooldown()
    calls = {"n": 0}

    def answer(row, now):
        calls["n"] += 1
        return retryable("down") if calls["n"] == 1 else DELIVERED

    hook = Scripted("crm-hook", answer)
    pump = DeliveryPump(rstore, {"crm-hook": hook}, attempts=Attempts(health))
    await emit(rstore, st, [ALERT, ALERT], T0)
    await pump.run_due(T0)  # the first fails → cooldown for an hour; the second waits
    rows = await rstore.deliveries()
    assert [(r.attempts, r.status) for r in rows] == [(1, "pending"), (0, "pending")]
    assert rows[1].next_attempt_at == T0 + 3600 and rows[1].last_error == "waiting: cooldown"
    res = await pump.run_due(T0 + 30)  # the first's retry time: still cooling down, not an attempt
    assert (await rstore.deliveries())[0].attempts == 1 and res.next_due == T0 + 3600
    health.parked = True
    await pump.run_due(T0 + 3600)
    rows = await rstore.deliveries()
    assert [r.next_attempt_at for r in rows] == [None, None] and await rstore.next_due() is None
    health.parked = False
    await rstore.commit([ReleaseTarget("crm-hook", T0 + 4000)])
    await pump.run_due(T0 + 4000)
    assert [(r.status, r.attempts) for r in await rstore.deliveries()] == [("delivered", 2), ("delivered", 1)]
    assert health.reports == [("crm-hook", "retryable", False), ("crm-hook", "delivered", False),
                              ("crm-hook", "delivered", False)]


async def test_five_attempts_is_the_bound_across_a_crash(rstore):
    """The 5th attempt claimed, the process gone before its outcome: no 6th attempt."""
    st = make_state({"name": "r", "actions": [{"target": "crm-hook"}]})
    hook = Scripted("crm-hook", lambda r, n: retryable("down"))
    pump = DeliveryPump(rstore, {"crm-hook": hook})
    await emit(rstore, st, [ALERT], T0)
    await drive(pump, T0 + 750)  # attempts 1..4
    (row,) = await rstore.deliveries()
    begin = Attempts().begin(row, T0 + 2550)
    await rstore.commit(list(begin.ops))  # the claim of attempt 5 is committed … then SIGKILL
    (row,) = await rstore.deliveries()
    assert (row.status, row.attempts, row.next_attempt_at) == ("pending", 5, T0 + 2550 + 1800)
    await pump.run_due(T0 + 2550 + 1800)
    (row,) = await rstore.deliveries()
    assert (row.status, row.attempts) == ("failed", 5) and len(hook.calls) == 4
    assert "without an outcome" in row.last_error
