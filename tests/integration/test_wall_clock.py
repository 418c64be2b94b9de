"""Real-clock modes through a real sidecar process: ``--clock wall`` with ``--time-scale K`` fires
timers by itself (expiry), platform requests are answered concurrently, a socket reconnect runs
check chat again, and a reconnecting client gets the frames it missed."""
from __future__ import annotations

import asyncio
import time

from bridge.client import BridgeClient
from tests.integration.sidecar_proc import SidecarProcess, send_event
from tests.waits import EXIT_S


async def test_time_scale_makes_tasks_overdue_by_itself_and_reconnect_rechecks(tmp_path):
    notes: list[tuple[str, dict]] = []
    asked: list[str] = []

    async def answer(method, params):
        asked.append(params["method"])
        return {"dialogs": []}

    async with SidecarProcess(tmp_path, clock="wall", extra=("--time-scale", "100")) as sc:
        c = await BridgeClient.connect(sc.port, sc.token, on_request=answer,
                                       on_notification=lambda m, p: notes.append((m, p)))
        await c.call("session.login", {"tu": "c-tu-1", "project": "chathouse"})
        t0 = time.monotonic()  # wall clock: the login's passes run concurrently with the answer
        while not {"scroll_new", "scroll_all_online"} <= set(asked) and time.monotonic() - t0 < EXIT_S:
            await asyncio.sleep(0.02)
        assert {"scroll_new", "scroll_all_online"} <= set(asked)
        await c.call("platform.event", send_event(1, time.time()))
        created = [p for m, p in notes if m == "task.created"]
        assert [p["task"]["type"] for p in created] == ["unanswered_message"]
        task = created[0]["task"]
        assert task["deadline"] - task["created_at"] == 120
        # 120 s of clock time at 100x is 1.2 s of wall time: seen within 30 s (a quarter of the
        # 120 s it would take unscaled; no tighter bound — a loaded machine is slow, issue 18 item 2)
        t0 = time.monotonic()
        while not any(m == "task.updated" for m, _ in notes) and time.monotonic() - t0 < 30:
            await asyncio.sleep(0.05)
        [updated] = [p for m, p in notes if m == "task.updated"]  # overdue, not expired (DESIGN §6)
        assert updated["task_id"] == task["task_id"] and updated["overdue"] is True
        assert not any(m == "task.closed" for m, _ in notes)
        n = asked.count("scroll_new")
        await c.call("platform.reconnected", {"project": "chathouse", "tu": "c-tu-1"})
        t0 = time.monotonic()
        while asked.count("scroll_new") == n and time.monotonic() - t0 < EXIT_S:
            await asyncio.sleep(0.02)
        assert asked.count("scroll_new") == n + 1
        await c.close()


async def test_reconnecting_client_gets_missed_task_frames_once_in_order(tmp_path):
    async def answer(method, params):
        return {"dialogs": []}

    async with SidecarProcess(tmp_path, clock="virtual") as sc:
        first: list = []
        c = await BridgeClient.connect(sc.port, sc.token, on_request=answer,
                                       on_notification=lambda m, p: first.append(p["seq"]))
        await c.call("clock.advance_to", {"t": 1796025600.0})
        await c.call("session.login", {"tu": "c-tu-1", "project": "chathouse"})
        for i in range(3):
            await c.call("platform.event", send_event(i, 1796025600.0))
        await c.ack()
        seen = c.last_seq
        await c.close()
        # a second connection drives 3 more events but never acks, then drops
        c2 = await BridgeClient.connect(sc.port, sc.token, on_request=answer, seen_seq=seen, ack_every=10**6, ack_delay=3600)
        for i in range(3, 6):
            await c2.notify("platform.event", send_event(i, 1796025600.0))
        await c2.call("status", {})
        await c2.close()
        again: list = []
        c3 = await BridgeClient.connect(sc.port, sc.token, on_request=answer, seen_seq=seen,
                                        on_notification=lambda m, p: again.append((p["seq"], p["task"]["ru"])))
        await c3.call("status", {})
        assert [ru for _, ru in again] == ["c-ru-3", "c-ru-4", "c-ru-5"]
        assert [s for s, _ in again] == sorted(s for s, _ in again) and again[0][0] == seen + 1
        await c3.close()


async def test_a_restarted_sidecar_is_recognised_and_its_frames_not_skipped(tmp_path):
    """Found by the breaker: seq numbers restart with a new process, so a client resuming with an
    old seen_seq silently dropped the new process's frames.  The auth answer names the stream."""
    async def answer(method, params):
        return {"dialogs": []}

    async with SidecarProcess(tmp_path / "a", clock="virtual") as sc:
        c = await BridgeClient.connect(sc.port, sc.token, on_request=answer)
        await c.call("clock.advance_to", {"t": 1796025600.0})
        await c.call("session.login", {"tu": "c-tu-1", "project": "chathouse"})
        for i in range(5):
            await c.call("platform.event", send_event(i, 1796025600.0))
        seen, sid = c.last_seq, c.stream_id
        await c.close()
    assert seen >= 5 and sid
    got: list = []
    async with SidecarProcess(tmp_path / "b", clock="virtual") as sc2:  # a new process
        c2 = await BridgeClient.connect(sc2.port, sc2.token, on_request=answer, seen_seq=seen,
                                        stream_id=sid, on_notification=lambda m, p: got.append(p["seq"]))
        assert c2.restarted and c2.stream_id != sid
        await c2.call("clock.advance_to", {"t": 1796025600.0})
        await c2.call("session.login", {"tu": "c-tu-1", "project": "chathouse"})
        await c2.call("platform.event", send_event(9, 1796025600.0))
        assert got == [1]
        await c2.close()
