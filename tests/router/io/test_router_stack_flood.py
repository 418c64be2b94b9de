"""Stack's 429 is flood control on every path (DESIGN §10 "flood control", §9 "Batch writes"):
a single write, a whole batch and the health probe each come back ``flooded`` — not an attempt,
no failure of the ``stack`` sender — paced by ``Retry-After`` in either of its RFC 9110 §10.2.3
forms, delay-seconds or an HTTP-date (read against the pass's ``now``).  Before: an HTTP-date was
ignored (the ladder's step instead) and a batch's 429 was a retryable failure of every write."""
from __future__ import annotations

import email.utils

import httpx
import pytest

from sidecar.router.io.stack_channel import StackChannel
from sidecar.router.model import Delivery
from sidecar.stack.client import StackClient

NOW = 1_764_489_600.0  # 2025-11-30T08:00:00Z, unix seconds


def _row(i: int = 0) -> Delivery:
    return Delivery(f"e.{i}", "e", NOW, "markers", "followUpChat", "set", "high", None, "stack", "stack",
                    "pending", b"{}", pair=f"tu/A{i}", idem_key=f"k{i}", method="PUT", path=f"/v1/x{i}")


def _channel(retry_after: str | None) -> StackChannel:
    def answer(request: httpx.Request) -> httpx.Response:
        headers = {} if retry_after is None else {"Retry-After": retry_after}
        return httpx.Response(429, json={"error": "slow down"}, headers=headers)
    client = StackClient("http://stack.test", timeout=1.0, transport=httpx.MockTransport(answer))
    return StackChannel(client, batch=True)


FORMS = [("120", 120.0), (email.utils.formatdate(NOW + 120, usegmt=True), 120.0),
         (email.utils.formatdate(NOW - 30, usegmt=True), 0.0), ("soon", None), (None, None)]


@pytest.mark.parametrize("header,seconds", FORMS, ids=["seconds", "http-date", "date-past", "unreadable", "absent"])
async def test_a_single_write_429_is_flooded_by_either_form(header, seconds):
    out = await _channel(header).send(_row(), NOW)
    assert out.kind == "flooded" and out.retry_after == seconds


@pytest.mark.parametrize("header,seconds", FORMS, ids=["seconds", "http-date", "date-past", "unreadable", "absent"])
async def test_a_whole_batch_429_floods_every_write(header, seconds):
    outs = await _channel(header).send_batch([_row(0), _row(1), _row(2)], NOW)
    assert [(o.kind, o.retry_after) for o in outs] == [("flooded", seconds)] * 3


async def test_the_probe_429_is_flooded_by_an_http_date():
    out = await _channel(email.utils.formatdate(NOW + 45, usegmt=True)).probe(NOW)
    assert out.kind == "flooded" and out.retry_after == 45.0
