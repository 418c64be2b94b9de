"""The virtual instant stamp (issue 11 item 3; sidecar/router/io/channels.py "Virtual instant
stamp"): on the virtual clock every HTTP call a channel makes carries its pass instant in
``Sidecar-Virtual-At``, and the reference Stack and the loopback receivers record the call at
that instant — not at whatever instant the harness's own driver is at (inside a
``platform.events`` frame the driver is still at the frame's first event).  Without the stamp
(the wall clock) they record their own clock, as before."""
from __future__ import annotations

import json

import pytest

from electron_stub.receivers import Receivers
from electron_stub.stack_server import StackServer, virtual_at
from sidecar.router.io.channels import TelegramChannel, WebhookChannel
from sidecar.router.io.stack_channel import StackChannel
from sidecar.router.config import Target
from sidecar.router.model import RoutingEvent, StackWrite
from sidecar.router.io.pump import DeliveryPump
from sidecar.stack.client import StackClient
from sidecar.stack.virtual_at import VIRTUAL_AT_HEADER

from routerhelp import T0, emit, make_state

HARNESS_NOW = 5.0  # the harness's own instant: what an unstamped call is recorded at


def _marker(i: int, ru: str) -> RoutingEvent:
    return RoutingEvent(source="markers", subject="followUpChat", action="set", priority="high", payload={},
                 write=StackWrite(pair=f"g/{ru}", idem_key=f"m:{ru}:{i}", method="PUT",
                                  path=f"/v1/tus/g/favorites/{ru}/markers/followUpChat",
                                  body=json.dumps({"value": {"step": i}}).encode()))


@pytest.fixture
def stack():
    s = StackServer(seed=1, now_fn=lambda: HARNESS_NOW)
    s.start()
    yield s
    s.stop()


@pytest.fixture
def receivers():
    r = Receivers(seed=3, now_fn=lambda: HARNESS_NOW)
    r.add_target("crm-hook", "webhook")
    r.add_target("ops-telegram", "telegram", {"chat_id": "-1"})
    r.start()
    yield r
    r.stop()


@pytest.mark.parametrize("batch", [True, False])
async def test_stack_writes_are_recorded_at_the_pass_instant_when_stamped(stack, rstore, batch):
    client = StackClient(stack.url)
    ch = StackChannel(client, batch=batch)
    ch.stamp_at = True
    pump = DeliveryPump(rstore, {}, stack=ch)
    try:
        await emit(rstore, make_state(), [_marker(1, "r1"), _marker(2, "r2")], T0)
        await pump.run_due(T0 + 10)  # the pass at Stack's flush instant
        assert [a["at"] for a in stack.acked] == [T0 + 10, T0 + 10]
        assert (await ch.probe(T0 + 11)).ok
    finally:
        await client.close()


async def test_unstamped_stack_writes_keep_the_harness_instant(stack, rstore):
    client = StackClient(stack.url)
    pump = DeliveryPump(rstore, {}, stack=StackChannel(client, batch=True))  # stamp_at off: wall clock
    try:
        await emit(rstore, make_state(), [_marker(1, "r1")], T0)
        await pump.run_due(T0 + 10)
        assert [a["at"] for a in stack.acked] == [HARNESS_NOW]
    finally:
        await client.close()


async def test_webhook_and_telegram_calls_are_recorded_at_the_pass_instant_when_stamped(receivers, rstore):
    hook = WebhookChannel("crm-hook", Target(**receivers.target_config("crm-hook")))
    tg = TelegramChannel("ops-telegram", Target(**receivers.target_config("ops-telegram")))
    hook.stamp_at = tg.stamp_at = True
    st = make_state({"name": "r", "actions": [{"target": "crm-hook"}, {"target": "ops-telegram"}]})
    pump = DeliveryPump(rstore, {"crm-hook": hook, "ops-telegram": tg})
    try:
        await emit(rstore, st, [RoutingEvent(source="electron", subject="a", action="b", payload={})], T0 + 3)
        await pump.run_due(T0 + 3)
        recs = receivers.records()
        assert sorted((r["event"], r["at"]) for r in recs) == [("telegram.received", T0 + 3),
                                                               ("webhook.received", T0 + 3)]
        assert all(r.get("verified", True) for r in recs)  # the stamp is not part of the signature
        hook.stamp_at = False
        assert (await hook.probe(T0 + 4)).ok
        assert receivers.records()[-1]["at"] == HARNESS_NOW
    finally:
        await pump.close()


def test_a_bad_stamp_falls_back_to_the_harness_instant():
    assert VIRTUAL_AT_HEADER == "Sidecar-Virtual-At"
    assert virtual_at("1796025610.5") == 1796025610.5
    assert virtual_at(None) is None and virtual_at("soon") is None and virtual_at("nan") is None
