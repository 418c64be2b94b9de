"""Standard Webhooks signing: the spec's vectors against our signer and the harness's receiver
(valid, tampered body, wrong secret, stale and future timestamp, missing headers → 401), and
the webhook channel end to end (DESIGN §10; the standardwebhooks library's own test vectors)."""
from __future__ import annotations

import base64
import hashlib
import hmac
import time
from datetime import datetime, timezone

import httpx
import pytest
from standardwebhooks.webhooks import Webhook

from electron_stub.receivers import Receivers
from sidecar.core.clock import VirtualClock
from sidecar.router.io.channels import WebhookChannel
from sidecar.router.config import Target
from sidecar.router.model import Delivery

# the spec's example (libraries/python/tests/test_webhooks.py::test_sign_function)
SPEC_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
SPEC_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
SPEC_TS = 1614265330
SPEC_BODY = b'{"test": 2432232314}'
SPEC_SIG = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def target(url: str, secret: str) -> Target:
    return Target(channel="webhook", url=url, secret=secret)


def row(id_: str, body: bytes) -> Delivery:
    return Delivery(id=id_, event_id="ev-1", event_at=0.0, source="electron", subject="s", action="a",
                    priority="normal", rule="r", channel="webhook", target="crm-hook", status="pending",
                    message=body)


def test_our_signer_reproduces_the_spec_vector():
    ch = WebhookChannel("x", target("http://127.0.0.1:9/", SPEC_SECRET), signing_clock=VirtualClock(SPEC_TS))
    h = ch.headers(SPEC_ID, SPEC_BODY)
    assert h["webhook-signature"] == SPEC_SIG
    assert (h["webhook-id"], h["webhook-timestamp"]) == (SPEC_ID, str(SPEC_TS))
    # and by hand: base64 HMAC-SHA256 over "id.timestamp.body" with the base64-decoded secret
    key = base64.b64decode(SPEC_SECRET.removeprefix("whsec_"))
    mac = hmac.new(key, f"{SPEC_ID}.{SPEC_TS}.".encode() + SPEC_BODY, hashlib.sha256).digest()
    assert SPEC_SIG == "v1," + base64.b64encode(mac).decode()


@pytest.fixture
def receivers():
    r = Receivers(seed=3, now_fn=lambda: 42.0)
    r.add_target("crm-hook", "webhook")
    r.start()
    yield r
    r.stop()


def signed(secret: str, msg_id: str, ts: int, body: bytes) -> dict[str, str]:
    sig = Webhook(secret).sign(msg_id, datetime.fromtimestamp(ts, tz=timezone.utc), body.decode())
    return {"webhook-id": msg_id, "webhook-timestamp": str(ts), "webhook-signature": sig}


def post(receivers: Receivers, headers: dict[str, str], body: bytes) -> int:
    return httpx.post(f"{receivers.url}/hooks/crm-hook", content=body, headers=headers).status_code


def test_receiver_verifies_every_signature(receivers):
    secret = receivers.secret("crm-hook")
    now = int(time.time())
    body = b'{"type":"electron.alert.fired","data":{}}'
    assert post(receivers, signed(secret, "msg_1", now, body), body) == 200
    assert post(receivers, signed(secret, "msg_2", now, body), body + b" ") == 401  # tampered body
    assert post(receivers, signed(SPEC_SECRET, "msg_3", now, body), body) == 401  # wrong secret
    assert post(receivers, signed(secret, "msg_4", now - 5 * 60 - 10, body), body) == 401  # stale
    assert post(receivers, signed(secret, "msg_5", now + 5 * 60 + 10, body), body) == 401  # future
    good = signed(secret, "msg_6", now, body)
    for missing in ("webhook-id", "webhook-timestamp", "webhook-signature"):
        assert post(receivers, {k: v for k, v in good.items() if k != missing}, body) == 401, missing
    assert post(receivers, {**good, "webhook-signature": "garbage"}, body) == 401
    assert post(receivers, {**good, "webhook-timestamp": "hello"}, body) == 401
    # several signatures, one valid (spec: any v1 match passes)
    multi = {**good, "webhook-signature": "v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc= " + good["webhook-signature"]}
    assert post(receivers, multi, body) == 200
    recs = receivers.records("webhook.received")
    assert [r["verified"] for r in recs] == [True] + [False] * 9 + [True]
    assert recs[0] == {"at": 42.0, "event": "webhook.received", "target": "crm-hook", "webhook_id": "msg_1",
                       "verified": True}


async def test_webhook_channel_end_to_end_with_stable_id(receivers):
    cfg = receivers.target_config("crm-hook")
    ch = WebhookChannel("crm-hook", Target(**cfg))
    try:
        r = row("ev-7.0", b'{"type":"electron.alert.fired","data":{"n":1}}')
        assert (await ch.send(r, 0.0)).ok
        assert (await ch.send(r, 30.0)).ok  # a resend after a crash: same webhook-id
        assert (await ch.probe(0.0)).ok
        ids = [x["webhook_id"] for x in receivers.records("webhook.received")]
        assert ids[:2] == ["ev-7.0", "ev-7.0"] and receivers.duplicates == {"crm-hook": 1}
        receivers.set_fault("crm-hook", "terminal")
        assert (await ch.send(r, 1.0)).kind == "terminal"
        receivers.set_fault("crm-hook", "up")
        receivers.set_fault("crm-hook", "error_rate", 1.0)
        out = await ch.send(r, 2.0)
        assert (out.kind, out.status) == ("retryable", 500)
        receivers.set_fault("crm-hook", "up")
        receivers.set_fault("crm-hook", "probe_fail")
        assert (await ch.send(r, 3.0)).ok and not (await ch.probe(3.0)).ok
        receivers.set_fault("crm-hook", "down")
        out = await ch.send(r, 4.0)
        assert out.kind == "retryable" and out.status is None
        # a wrong secret is the receiver's 401: terminal, and the secret is nowhere in the error
        bad = WebhookChannel("crm-hook", Target(**{**cfg, "secret": SPEC_SECRET}))
        receivers.set_fault("crm-hook", "up")
        out = await bad.send(r, 5.0)
        await bad.close()
        assert (out.kind, out.status) == ("terminal", 401)
        assert SPEC_SECRET.removeprefix("whsec_") not in (out.error or "")
    finally:
        await ch.close()
