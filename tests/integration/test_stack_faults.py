"""A slow or stuck Stack never holds up the operator's tasks (found by the breaker): on the wall
clock the outbox pump runs beside the steps, and login waits for Stack's startup data only a
bounded time before restoring from local state."""
from __future__ import annotations

import asyncio
import time

from bridge.client import BridgeClient
from tests.integration.sidecar_proc import SidecarProcess
from tests.stack.fake_stack import StackServer
from tests.waits import EXIT_S


def send_event(i: int) -> dict:
    return {"project": "chathouse", "tu": "c-tu-1", "name": "Send",
            "data": {"id": f"m{i}", "type": "message", "from": f"c-ru-{i}", "to": "c-tu-1",
                     "at": time.time(), "body": "hi"}}


async def _answer(method, params):
    return {"dialogs": []}


async def test_slow_stack_writes_do_not_delay_events(tmp_path):
    """An event is answered while a Stack write is held in flight — held far longer than any
    machine is slow (``tests.waits.EXIT_S``), so the order proves it, not a stopwatch."""
    stack = StackServer()
    stack.start()
    stack.fail("delay", path_contains="/tasks", seconds=EXIT_S)  # cut short by stack.stop()

    def held() -> list:
        return [r for r in stack.requests if "/tasks" in r.path]

    try:
        async with SidecarProcess(tmp_path, clock="wall", extra=("--stack-url", stack.url)) as sc:
            c = await BridgeClient.connect(sc.port, sc.token, on_request=_answer)
            await c.call("session.login", {"tu": "c-tu-1", "project": "chathouse"})
            await c.call("platform.event", send_event(0))  # its task's Stack write is held
            async with asyncio.timeout(EXIT_S):
                while not held():
                    await asyncio.sleep(0.01)
            for i in range(1, 4):
                await c.call("platform.event", send_event(i))
            assert stack.in_flight >= 1 and all(r.outcome == "fault:delay" for r in held())
            await c.close()
    finally:
        stack.stop()


async def test_stuck_startup_falls_back_to_local_state_in_bounded_time(tmp_path):
    stack = StackServer()
    stack.start()
    stack.fail("delay", path_contains="/startup", seconds=30.0)
    try:
        async with SidecarProcess(tmp_path, clock="wall", extra=("--stack-url", stack.url)) as sc:
            c = await BridgeClient.connect(sc.port, sc.token, on_request=_answer)
            # Stack answers in 30 s; the login's own bound (3 s) ends the wait first: restored from
            # local state says so — had it waited for the answer, it would say restored from Stack
            res = await c.call("session.login", {"tu": "c-tu-1", "project": "chathouse"})
            assert res["restored_from_stack"] is False
            await c.close()
    finally:
        stack.stop()


async def test_wrongly_shaped_startup_still_logs_in_and_good_rows_count(tmp_path):
    stack = StackServer()
    stack.startup["c-tu-1"] = {"favorites": [{"ru": "c-ru-1", "active": True, "markers": {}},
                                             {"ru": "c-ru-2", "spend_30d_usd": "lots"}, "str", None],
                               "history": [{"ru": None}]}
    stack.start()
    try:
        async with SidecarProcess(tmp_path, clock="virtual", extra=("--stack-url", stack.url)) as sc:
            c = await BridgeClient.connect(sc.port, sc.token, on_request=_answer)
            await c.call("clock.advance_to", {"t": 1796025600.0})
            res = await c.call("session.login", {"tu": "c-tu-1", "project": "chathouse"})
            assert res["ok"] and res["restored_from_stack"] and res["favorites"] == 1
            ev = send_event(2)
            ev["data"]["at"] = 1796025600.0
            await c.call("platform.event", ev)  # c-ru-2's event works: no poisoned attributes
            assert (await c.call("status", {}))["open_tasks"] == 1
            await c.close()
    finally:
        stack.stop()
