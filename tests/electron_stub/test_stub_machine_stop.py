"""The harness's graceful stop (``electron_stub.machine.Machine.stop``) judges the sidecar's
shutdown promise by its exit code, not by a stopwatch.

The sidecar's own watchdog ends a shutdown still running 1.5 s after the request with exit code 5
(``sidecar/cli/stop_guard.py``), so an exit 0 after stdin EOF is an orderly close inside the
promise whenever the harness sees it; on a loaded machine the harness's wall clock measures the
machine too (a 10 s websocket handshake was passed at load 16–18), so a clean exit can reach it
after more than 2 s.  The harness used to SIGTERM it at 2 s and fail the replay ("not clean").  It now waits
:data:`~electron_stub.machine.HARNESS_WAIT_S` before it escalates, and notes an exit it saw late.
"""
from __future__ import annotations

import asyncio
import sys

from electron_stub import machine as m


async def _machine(tmp_path, after_eof: str) -> m.Machine:
    async def on_request(*_):
        return None

    mc = m.Machine("A", tmp_path / "A", stack_url="http://127.0.0.1:1", seed=1, binary=None,
                   on_notification=lambda *_: None, on_request=on_request)
    mc.proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", f"import sys, time\nsys.stdin.read()\n{after_eof}\n",
        stdin=asyncio.subprocess.PIPE, start_new_session=True)
    return mc


async def test_a_clean_exit_the_machine_slows_past_2_s_is_clean(tmp_path):
    mc = await _machine(tmp_path, f"time.sleep({m.STOP_PROMISE_S + 0.5})")
    ex = await mc.stop()
    assert (ex.how, ex.returncode, ex.clean) == ("stdin-eof", 0, True)
    assert "over the 2 s promise" in ex.note and "exit 0" in ex.note


async def test_a_prompt_clean_exit_has_no_note(tmp_path):
    ex = await (await _machine(tmp_path, "")).stop()
    assert (ex.how, ex.returncode, ex.clean, ex.note) == ("stdin-eof", 0, True, "")


async def test_an_exit_the_watchdog_forced_is_not_clean(tmp_path):
    ex = await (await _machine(tmp_path, "sys.exit(5)")).stop()
    assert (ex.how, ex.returncode, ex.clean) == ("stdin-eof", 5, False)


async def test_a_sidecar_that_never_exits_gets_sigterm_after_the_harness_wait(tmp_path, monkeypatch):
    monkeypatch.setattr(m, "HARNESS_WAIT_S", 0.5)
    ex = await (await _machine(tmp_path, "time.sleep(3600)")).stop()
    assert ex.how == "sigterm" and not ex.clean and "did not exit within 0.5 s of stdin EOF" in ex.note
