"""A write Stack refuses (a 4xx other than 408/409/429) through the pump, single and batched,
against the reference Stack's ``refuse`` fault: the write fails with Stack's status and body,
one ERROR line names key, path and status on every path, and the pair's later writes go on
(DESIGN §9 "Batch writes", §10 "Outcomes are classified"; docs/decisions.md "A refused Stack
write")."""
from __future__ import annotations

import logging

import pytest

from electron_stub.stack_server import StackServer
from sidecar.router.attempt import Outcome, after, terminal, retryable
from sidecar.router.io.stack_channel import StackChannel
from sidecar.router.io.pump import DeliveryPump
from sidecar.stack.client import StackClient
from sidecar.stack.writes import followup_chat_key, marker_write

from routerhelp import T0, emit, make_state

NOW = T0


@pytest.fixture
def ref_stack():
    s = StackServer(seed=1)
    s.start()
    yield s
    s.stop()


@pytest.fixture
async def client(ref_stack):
    c = StackClient(ref_stack.url, timeout=2.0)
    yield c
    await c.close()


async def put(rstore, st, ru: str, step: int, tu: str = "tu") -> str:
    key = followup_chat_key(tu, ru, "src", step)
    w = marker_write(tu, ru, "followUpChat", {"sourceUnansweredTaskId": "src", "step": step}, key)
    await emit(rstore, st, [w.event("followUpChat", "set", {"ru": ru})], NOW)
    return key


@pytest.mark.parametrize("batch", [False, True], ids=["single", "batch"])
async def test_a_refused_write_fails_loudly_and_the_pair_goes_on(rstore, client, ref_stack, batch, caplog):
    st = make_state()
    keys = [await put(rstore, st, "A", s) for s in range(3)]
    ref_stack.set_fault("refuse")
    pump = DeliveryPump(rstore, {}, stack=StackChannel(client, batch=batch))
    with caplog.at_level(logging.ERROR, logger="sidecar.router.io.stack_channel"):
        await pump.run_due(NOW)
        await pump.run_due(NOW + 5)  # a batch's later writes were held (424): due with the head
    rows = {d.idem_key: d for d in await rstore.deliveries()}
    head = rows[keys[0]]
    assert head.status == "failed" and head.next_attempt_at is None and head.attempts == 1
    assert "HTTP 422" in head.last_error and "injected refusal" in head.last_error
    assert [rows[k].status for k in keys[1:]] == ["delivered", "delivered"]
    assert ref_stack.marker("tu", "A", "followUpChat")["step"] == 2  # the newest marker, whole
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1, errors
    assert keys[0] in errors[0] and head.path in errors[0] and "422" in errors[0]
    res = await pump.run_due(NOW + 600)
    assert res.settled == [] and res.next_due is None  # nothing held, nothing retried forever


@pytest.mark.parametrize("status", [408, 409, 429, 500, 503])
async def test_stack_answers_that_are_not_refusals_stay_pending(status):
    from sidecar.router.model import Delivery
    row = Delivery("e.0", "e", NOW, "markers", "followUpChat", "set", "high", None, "stack", "stack",
                   "pending", b"{}", pair="tu/A", idem_key="k", method="PUT", path="/v1/x")
    out = StackChannel._outcome_of(status, "busy")
    # a 429 paces Stack (flood control, DESIGN §10): not an attempt, not an outage failure
    assert out.kind == ("flooded" if status == 429 else "retryable")
    nxt = after(row, out, NOW)
    assert nxt.status == "pending" and nxt.attempts == (0 if status == 429 else 1)


def test_a_terminal_stack_answer_fails_the_write_with_its_status():
    from sidecar.router.model import Delivery
    row = Delivery("e.0", "e", NOW, "markers", "followUpChat", "set", "high", None, "stack", "stack",
                   "pending", b"{}", pair="tu/A", idem_key="k", method="PUT", path="/v1/x")
    nxt = after(row, terminal('HTTP 422: {"error":"bad"}', 422), NOW)
    assert (nxt.status, nxt.next_attempt_at, nxt.status_code, nxt.final) == ("failed", None, 422, True)
    assert nxt.last_error == 'terminal: HTTP 422: {"error":"bad"}'
    assert after(row, retryable("ConnectError"), NOW).status == "pending"
    assert isinstance(StackChannel._outcome_of(422, "x"), Outcome)
