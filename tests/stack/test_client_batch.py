"""``POST /v1/batch``'s request bytes and the client's TLS set-up (issue 11: the writes' bodies
are spliced in as they are, not decoded and encoded again; no CA bundle loaded for an ``http``
Stack)."""
from __future__ import annotations

import ssl

import httpx
import msgspec

from sidecar.stack.client import BatchWrite, StackClient, tls_context
from sidecar.stack.writes import candidate_event, marker_write

BODIES = [
    msgspec.json.encode({"value": {"sourceUnansweredTaskId": "t-1", "step": 2,
                                   "nextCheckAt": "2026-11-30T08:01:02.345Z"}}),
    msgspec.json.encode({"value": None}),
    msgspec.json.encode({"ru": "ру-Ω \"q\" \\ \u2028", "at": 1796025600.125, "n": -0.0,
                         "big": 2 ** 53 + 1, "list": [1.5e-7, 1e300, True, None, {}]}),
    b"",
]


async def sent_batch(writes: list[BatchWrite]) -> bytes:
    seen: list[bytes] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request.content)
        return httpx.Response(200, json={"results": [{"key": w.key, "status": 200} for w in writes]})

    async with StackClient("http://stack.test", transport=httpx.MockTransport(answer)) as client:
        results = await client.batch(writes)
    assert [r.key for r in results] == [w.key for w in writes]
    [body] = seen
    return body


async def test_a_batch_carries_each_writes_body_byte_for_byte():
    writes = [BatchWrite(f"k{i}", "PUT", f"/v1/p/{i}", b) for i, b in enumerate(BODIES)]
    body = await sent_batch(writes)
    # what decoding every body and encoding the whole again made: the same bytes
    again = msgspec.json.encode({"writes": [
        {"key": w.key, "method": w.method, "path": w.path,
         "body": msgspec.json.decode(w.body) if w.body else None} for w in writes]})
    assert body == again
    decoded = msgspec.json.decode(body)["writes"]
    assert [d["body"] for d in decoded] == [msgspec.json.decode(b) if b else None for b in BODIES]


async def test_the_queued_writes_bodies_are_what_the_batch_carries():
    """The bodies the router queues (the Stack write builders) are compact JSON, so splicing
    them in is the same request as decoding and encoding them again."""
    m = marker_write("tu-1", "ru-1", "followUpChat", {"step": 1, "x": 0.1}, "k-m")
    c = candidate_event("tu-1", "ru-1", "follow_up_mail", "post_chat", 1796025600.5,
                        outcome="refused:offline", task_id=None, detail={"ref": "t-9"})
    writes = [BatchWrite("k-m", m.method, m.path, m.body),
              BatchWrite("k-c", c.write.method, c.write.path, c.write.body)]
    body = await sent_batch(writes)
    for w, d in zip(writes, msgspec.json.decode(body)["writes"]):
        assert msgspec.json.encode(d["body"]) == w.body


def test_an_http_stack_gets_a_context_that_trusts_nothing_and_https_the_default():
    assert tls_context("https://stack.example") is True
    assert tls_context("HTTPS://stack.example") is True
    ctx = tls_context("http://127.0.0.1:8080")
    assert isinstance(ctx, ssl.SSLContext)
    assert ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname
    assert ctx.cert_store_stats()["x509_ca"] == 0  # no CA bundle loaded: any handshake fails
