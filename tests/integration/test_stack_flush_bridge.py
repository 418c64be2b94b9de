"""``stack.flush`` through the real websocket of a real ``sidecar serve --clock virtual`` process
(sidecar.router.cadence): Stack's new writes wait for the flush instant that ``next_due``
announces, and ``stack.flush`` sends them at once with the counts Electron reads."""
from __future__ import annotations

from bridge.client import BridgeClient
from sidecar.protocol.answers import json_schema
from tests.integration.sidecar_proc import SidecarProcess
from tests.stack.fake_stack import StackServer

T0 = 1796025600.0
TU = "g-tu-1"


def _msg(ru: str, mid: str, at: float) -> dict:
    return {"project": "golden", "tu": TU, "name": "receivePrivateMessage", "received_at": at,
            "data": {"messageId": mid, "senderId": ru, "recipientId": TU, "sentAt": at, "text": "hi"}}


async def _answer(method, params):
    return {"users": [], "dialogs": []}


async def test_stack_flush_over_the_websocket(tmp_path):
    stack = StackServer()
    stack.start()
    try:
        async with SidecarProcess(tmp_path, clock="virtual", extra=("--stack-url", stack.url)) as sc:
            c = await BridgeClient.connect(sc.port, sc.token, on_request=_answer)
            await c.call("clock.advance_to", {"t": T0})
            await c.call("session.login", {"tu": TU, "project": "golden", "operator": "op"})
            await c.call("clock.advance_to", {"t": T0 + 3})
            ans = await c.call("platform.event", _msg("ru-1", "m-1", T0 + 3))
            assert ans["next_due"] <= T0 + 10  # Stack's flush instant (10 s grid) or a sooner timer
            assert stack.writes() == []  # queued, not sent: the cadence holds them
            flushed = await c.call("stack.flush", {})
            assert flushed["acked"] >= 2 and flushed["failed"] == 0 and flushed["pending"] == 0
            assert len(stack.writes()) == flushed["acked"]
            assert await c.call("stack.flush", {}) == {"acked": 0, "failed": 0, "pending": 0,
                                                      "next_due": flushed["next_due"]}
            await c.close()
    finally:
        stack.stop()


def test_the_schema_has_stack_flush():
    schema = json_schema()
    assert "stack.flush" in schema["inbound"]
    answer = schema["$defs"]["StackFlushAnswer"]
    assert {"acked", "failed", "pending"} <= set(answer["required"])


async def test_stack_flush_on_the_wall_clock_sends_at_once_and_answers_the_counts(tmp_path):
    """The wall clock has no cadence: the pump sends a write as soon as it is queued, and
    ``stack.flush`` (serialised with the pump's own pass) leaves nothing pending."""
    import time

    stack = StackServer()
    stack.start()
    try:
        async with SidecarProcess(tmp_path, clock="wall", extra=("--stack-url", stack.url)) as sc:
            c = await BridgeClient.connect(sc.port, sc.token, on_request=_answer)
            await c.call("session.login", {"tu": TU, "project": "golden", "operator": "op"})
            now = time.time()
            await c.call("platform.event", _msg("ru-1", "m-1", now))
            flushed = await c.call("stack.flush", {})
            assert set(flushed) == {"acked", "failed", "pending"}  # no next_due on the wall clock
            assert flushed["failed"] == 0 and flushed["pending"] == 0
            assert len(stack.writes()) >= 2  # the task and its candidate, by the pump or the flush
            await c.close()
    finally:
        stack.stop()
