"""``sidecar.shutdown`` (DESIGN §3, issue 20 item 3): the graceful stop a client asks for over the
bridge — the only one on Windows, where Node's ``child.kill()`` is a hard kill.  Through the real
process: the answer comes once the store is closed, then the connection closes 1001 and the
process exits 0; a request sent after it is refused -32002 (nothing done), never -32603 (a failed
step's code); what was committed before it is there after a restart."""
from __future__ import annotations

import asyncio
import json
import sqlite3
import time

from bridge.client import BridgeClient
from bridge.errors import RemoteError
from tests.integration.sidecar_proc import SidecarProcess, answer_no_dialogs, send_event


async def test_the_shutdown_request_is_answered_after_the_store_closed_then_exit_0(tmp_path):
    async with SidecarProcess(tmp_path, clock="wall") as sc:
        c = await BridgeClient.connect(sc.port, sc.token, on_request=answer_no_dialogs)
        await c.call("session.login", {"tu": "c-tu-1", "project": "chathouse"})
        await c.call("platform.event", send_event(1, time.time()))
        answer = await c.call("sidecar.shutdown", {})
        assert answer == {"ok": True, "abandoned": []}, answer
        # the answer went out after the store's close: the data dir's lock is released already
        assert _unlocked(tmp_path)
        async with asyncio.timeout(2):
            await c.wait_closed()
        assert c.close_code == 1001
        assert await sc.wait_exit(2.0, what="sidecar.shutdown") == 0
        err = await sc.stderr_text()
        assert "shutting down: sidecar.shutdown request" in err and "shut down cleanly" in err, err[-2000:]
        assert "Traceback" not in err
    # committed before the request: the task is in SQLite for the next start
    with sqlite3.connect(tmp_path / "sidecar.db") as db:
        assert db.execute("SELECT count(*) FROM tasks").fetchone()[0] == 1


def _unlocked(data_dir) -> bool:
    """True when no process holds the data dir (a second sidecar could start on it)."""
    import fcntl
    with open(data_dir / "sidecar.lock", "a+b") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False
        fcntl.flock(fh, fcntl.LOCK_UN)
        return True


async def test_a_request_after_the_shutdown_request_is_refused_32002_nothing_done(tmp_path):
    async with SidecarProcess(tmp_path, clock="virtual") as sc:
        c = await BridgeClient.connect(sc.port, sc.token, on_request=answer_no_dialogs)
        await c.call("clock.advance_to", {"t": 1796025600.0})
        # both frames leave back to back: the second is read while the first stops the sidecar
        await c.send_raw(json.dumps({"jsonrpc": "2.0", "id": 70, "method": "sidecar.shutdown"}))
        late = asyncio.ensure_future(c.call("session.login", {"tu": "c-tu-1", "project": "chathouse"}))
        try:
            await late
            raise AssertionError("a login after sidecar.shutdown was served")
        except RemoteError as exc:
            assert exc.code == -32002 and "nothing was done" in exc.message, exc
        assert await sc.wait_exit(2.0, what="sidecar.shutdown") == 0
        err = await sc.stderr_text()
        assert "session.login failed" not in err  # a stop's refusals are counted, not logged each
    with sqlite3.connect(tmp_path / "sidecar.db") as db:
        assert db.execute("SELECT count(*) FROM sessions").fetchone()[0] == 0


async def test_a_second_shutdown_request_gets_the_same_answer(tmp_path):
    async with SidecarProcess(tmp_path, clock="virtual") as sc:
        c = await BridgeClient.connect(sc.port, sc.token, on_request=answer_no_dialogs)
        first = asyncio.ensure_future(c.call("sidecar.shutdown"))
        second = asyncio.ensure_future(c.call("sidecar.shutdown"))
        results = await asyncio.gather(first, second, return_exceptions=True)
        # the second is read before the stop began (answered with the first) or after it (-32002)
        assert results[0] == {"ok": True, "abandoned": []}, results
        assert results[1] == results[0] or (isinstance(results[1], RemoteError) and results[1].code == -32002), results
        assert await sc.wait_exit(2.0, what="sidecar.shutdown") == 0
