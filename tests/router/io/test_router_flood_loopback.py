"""Flood control through a real loopback receiver (DESIGN §10 as revised; issue 21 item 3): the
webhook answers 429 with ``Retry-After`` over HTTP, the real :class:`WebhookChannel` reads it,
the pump and the real sender health gate pace the target by it — no attempt used, no failure
counted — and a TTL that passes meanwhile fails the row ``expired``, noted like any outcome."""
from __future__ import annotations

import pytest

from electron_stub.receivers import Receivers
from sidecar.core.rng import KeyedRandom
from sidecar.core.scheduler import Scheduler
from sidecar.router.attempt import Attempts
from sidecar.router.flood import FLOOD_CRITICAL_LEAD_S as LEAD
from sidecar.router.config import Target
from sidecar.router.io.channels import WebhookChannel
from sidecar.router.io.pump import DeliveryPump
from sidecar.router.model import RoutingEvent
from sidecar.senders import health as h
from sidecar.senders.gate import HealthGate
from sidecar.senders.manage import Registry

from routerhelp import T0, emit, make_state

HOOK = {"name": "hook", "actions": [{"target": "crm-hook"}]}


@pytest.fixture
def receivers():
    r = Receivers(seed=21)
    r.add_target("crm-hook", "webhook")
    r.start()
    yield r
    r.stop()


def alert(ttl_s: float | None = None) -> RoutingEvent:
    return RoutingEvent(source="electron", subject="alert", action="fired", priority="high", ttl_s=ttl_s)


async def test_a_webhook_429_with_retry_after_paces_without_cooldown(receivers, rstore):
    ch = WebhookChannel("crm-hook", Target(**receivers.target_config("crm-hook")))
    gate = HealthGate(h.HealthMachine(KeyedRandom(3)), Scheduler())
    gate.load(Registry(), [])
    pump = DeliveryPump(rstore, {"crm-hook": ch}, attempts=Attempts(gate))
    st = make_state(HOOK)
    try:
        receivers.set_fault("crm-hook", "rate_limit", 90)
        await emit(rstore, st, [alert()], T0)
        t = T0
        for _ in range(3):  # three 429s in a row: with the default threshold 2, two failures cool down
            res = await pump.run_due(t)
            assert res.next_due == pytest.approx(t + 90 + LEAD)
            t = res.next_due
        row = (await rstore.deliveries(target="crm-hook"))[0]
        assert (row.status, row.attempts) == ("pending", 0)
        assert "HTTP 429" in row.last_error and "retry_after 90 s" in row.last_error
        s = gate.state("crm-hook")
        assert (s.state, s.failed_in_row) == (h.ACTIVE, 0)
        receivers.set_fault("crm-hook", "up")
        await pump.run_due(t)
        row = (await rstore.deliveries(target="crm-hook"))[0]
        assert (row.status, row.attempts) == ("delivered", 1)
        assert [x["webhook_id"] for x in receivers.records("webhook.received")] == [row.id]
    finally:
        await ch.close()


async def test_ttl_passing_under_flood_control_fails_expired_and_is_settled(receivers, rstore):
    ch = WebhookChannel("crm-hook", Target(**receivers.target_config("crm-hook")))
    pump = DeliveryPump(rstore, {"crm-hook": ch})
    st = make_state(HOOK)
    try:
        receivers.set_fault("crm-hook", "rate_limit", 600)
        await emit(rstore, st, [alert(ttl_s=120)], T0)
        res = await pump.run_due(T0)
        res = await pump.run_due(res.next_due)
        assert [(n.status, n.attempts) for _, n in res.settled] == [("failed", 0)]  # a note goes out
        row = (await rstore.deliveries(target="crm-hook"))[0]
        assert row.status == "failed" and row.last_error.startswith("expired")
        assert receivers.records("webhook.received") == []
    finally:
        await ch.close()
