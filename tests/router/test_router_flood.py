"""Flood control is not failure (DESIGN §10 as revised; issue 21 item 3): a 429 paces the
target — its next send at ``retry_after`` (or the ladder's next step, capped at 1 h) — is not one
of the 5 attempts, never counts against sender health (seed 000 counts failed sends; a 429 is the
receiver asking to slow down), and the row's ``ttl_s`` still applies.  The pump over a real store,
scripted channels and the real :class:`~sidecar.senders.gate.HealthGate`, on a virtual clock."""
from __future__ import annotations

import pytest

from sidecar.core.rng import KeyedRandom
from sidecar.core.scheduler import Scheduler
from sidecar.router.attempt import DELIVERED, LADDER, Attempts, classify_status, request_outcome
from sidecar.router.flood import FLOOD_CAP_S, FLOOD_CRITICAL_LEAD_S as LEAD, flood_wait
from sidecar.router.io.channels import retry_after_header
from sidecar.router.io.pump import DeliveryPump
from sidecar.router.model import RoutingEvent
from sidecar.senders import health as h
from sidecar.senders.gate import HealthGate
from sidecar.senders.manage import Registry

from routerhelp import T0, Scripted, emit, make_state

TG = {"name": "tg", "actions": [{"target": "ops-telegram"}]}


def alert(i: int = 0, priority: str = "high", ttl_s: float | None = None) -> RoutingEvent:
    return RoutingEvent(source="sidecar", subject="operator", action="overdue", priority=priority,
                        payload={"i": i}, ttl_s=ttl_s)


def gated(rstore, channels) -> tuple[DeliveryPump, HealthGate]:
    gate = HealthGate(h.HealthMachine(KeyedRandom(3)), Scheduler())
    gate.load(Registry(), [])
    return DeliveryPump(rstore, channels, attempts=Attempts(gate)), gate


def test_429_is_flooded_and_carries_its_retry_after():
    out = classify_status(429, "Too Many Requests", retry_after=7)
    assert (out.kind, out.status, out.retry_after) == ("flooded", 429, 7)
    assert classify_status(503, retry_after=7).retry_after is None  # only a 429 paces
    assert request_outcome([out, out]) is None  # a batch answered only 429: nothing to report
    assert request_outcome([out, classify_status(503)]).kind == "retryable"


def test_flood_wait_is_retry_after_else_the_ladder_capped_at_an_hour():
    assert flood_wait(LADDER[0], 42.0)[0] == 42.0
    assert flood_wait(LADDER[0], None) == (LADDER[0], "no retry-after: the ladder's next step")
    wait, why = flood_wait(LADDER[0], 7200.0)
    assert wait == FLOOD_CAP_S and "capped at 3600 s" in why
    assert flood_wait(LADDER[3], None)[0] == LADDER[3]
    assert flood_wait(5.0, -5.0)[0] == 0.0


def test_retry_after_header_seconds_or_http_date():
    assert retry_after_header("120", T0) == 120.0
    assert retry_after_header(None, T0) is None and retry_after_header("soon", T0) is None
    # T0 = 2025-11-30 08:00:00 UTC
    assert retry_after_header("Sun, 30 Nov 2025 08:01:30 GMT", T0) == 90.0
    assert retry_after_header("Sun, 30 Nov 2025 07:00:00 GMT", T0) == 0.0


async def test_repeated_429s_pace_the_target_never_cool_it_down(rstore):
    st = make_state(TG)
    flood = {"on": True}
    tg = Scripted("ops-telegram", lambda r, n: classify_status(429, "slow", retry_after=60)
                  if flood["on"] else DELIVERED)
    pump, gate = gated(rstore, {"ops-telegram": tg})
    await emit(rstore, st, [alert()], T0)
    t = T0
    for _ in range(8):  # eight 429s in a row, each honoured to the second
        res = await pump.run_due(t)
        assert res.next_due == pytest.approx(t + 60 + LEAD, abs=1e-6)
        await pump.run_due(t + 60)  # not before the retry-after
        t = res.next_due
    assert len(tg.calls) == 8 and [a for _, _, a in tg.calls] == [0] * 8  # never an attempt
    row = (await rstore.deliveries(target="ops-telegram"))[0]
    assert (row.status, row.attempts) == ("pending", 0)
    assert row.last_error.startswith("flood control: HTTP 429") and "retry_after 60 s" in row.last_error
    s = gate.state("ops-telegram")
    assert (s.state, s.failed_in_row) == (h.ACTIVE, 0)  # two retryable failures would cool it down
    flood["on"] = False
    await pump.run_due(T0 + 481)
    row = (await rstore.deliveries(target="ops-telegram"))[0]
    assert (row.status, row.attempts) == ("delivered", 1)


async def test_a_429_leaves_failed_in_row_as_it_was(rstore):
    st = make_state(TG)
    answers = iter([classify_status(503), classify_status(429, retry_after=10)])
    tg = Scripted("ops-telegram", lambda r, n: next(answers, DELIVERED))
    pump, gate = gated(rstore, {"ops-telegram": tg})
    await emit(rstore, st, [alert()], T0)
    await pump.run_due(T0)  # 503: a failure, +1
    assert gate.state("ops-telegram").failed_in_row == 1
    await pump.run_due(T0 + LADDER[0])  # 429: not a failure, not an attempt
    assert gate.state("ops-telegram").failed_in_row == 1
    row = (await rstore.deliveries(target="ops-telegram"))[0]
    assert (row.attempts, row.next_attempt_at) == (1, T0 + LADDER[0] + 10 + LEAD)


async def test_the_whole_target_waits_and_a_critical_is_first_after_it(rstore):
    st = make_state(TG)
    tg = Scripted("ops-telegram", lambda r, n: classify_status(429, retry_after=300)
                  if len(tg.calls) == 1 else DELIVERED)
    pump = DeliveryPump(rstore, {"ops-telegram": tg})
    await emit(rstore, st, [alert(0, "normal")], T0)
    await pump.run_due(T0)  # the 429
    await emit(rstore, st, [alert(1, "normal"), alert(2, "critical")], T0 + 1)
    for t in (T0 + 1, T0 + 100, T0 + 299.9):
        await pump.run_due(t)
    assert len(tg.calls) == 1  # the critical waits for flood control like any other
    waiting = [r for r in await rstore.deliveries(target="ops-telegram") if r.status == "pending"]
    assert sorted(r.next_attempt_at for r in waiting) == [T0 + 300, T0 + 300 + LEAD, T0 + 300 + LEAD]
    await pump.run_due(T0 + 300 + LEAD)
    critical = next(r for r in waiting if r.priority == "critical")
    assert tg.calls[1][0] == critical.id  # first in line after it


async def test_ttl_still_applies_under_flood_control(rstore):
    st = make_state(TG)
    tg = Scripted("ops-telegram", lambda r, n: classify_status(429, retry_after=600))
    pump = DeliveryPump(rstore, {"ops-telegram": tg})
    await emit(rstore, st, [alert(ttl_s=300)], T0)
    await pump.run_due(T0)
    await pump.run_due(T0 + 601)
    row = (await rstore.deliveries(target="ops-telegram"))[0]
    assert (row.status, row.attempts) == ("failed", 0) and row.last_error.startswith("expired")
    assert len(tg.calls) == 1


async def test_stack_429_paces_stack_by_its_retry_after_header():
    """Stack's 429 likewise paces Stack (DESIGN §10 as revised): flooded, its ``Retry-After``
    seconds carried from the client — no failure for StackWatch or sender health."""
    import httpx

    from sidecar.router.io.stack_channel import StackChannel
    from sidecar.stack.client import StackClient
    from sidecar.stack.errors import StackUnavailable

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(429, headers={"Retry-After": "17"}, json={"error": "slow down"})

    async with StackClient("http://stack.test", transport=httpx.MockTransport(answer)) as c:
        try:
            await c.send("PUT", "/v1/x", b"{}", "k")
        except StackUnavailable as exc:
            err = exc
    assert (err.status, err.retry_after) == (429, 17.0)
    out = StackChannel._outcome(err, 0.0)
    assert (out.kind, out.retry_after) == ("flooded", 17.0)
