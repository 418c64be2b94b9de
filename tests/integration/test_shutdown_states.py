"""Shutdown is bounded in every state (issue 7 item 1): with Stack hanging, mid-step (a platform
request nobody answers), and as a last resort the watchdog (exit 5) and a second signal (exit at
once).  ``SidecarProcess.stop`` fails any test whose process outlives 2 s."""
from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from bridge.client import BridgeClient
from bridge.errors import RemoteError
from tests.integration.sidecar_proc import ROOT, SidecarProcess, send_event, answer_no_dialogs as _answer
from tests.stack.fake_stack import StackServer
from tests.waits import EXIT_S

T0 = 1796025600.0


@pytest.mark.parametrize("how", ["SIGTERM", "stdin"])
async def test_exit_within_2_s_while_stack_writes_hang(tmp_path, how):
    stack = StackServer()
    stack.start()
    stack.fail("delay", path_contains="/tasks", seconds=30.0)
    try:
        async with SidecarProcess(tmp_path, clock="wall", extra=("--stack-url", stack.url)) as sc:
            c = await BridgeClient.connect(sc.port, sc.token, on_request=_answer)
            await c.call("session.login", {"tu": "c-tu-1", "project": "chathouse"})
            for i in range(3):
                await c.call("platform.event", send_event(i, time.time()))
            async with asyncio.timeout(10):  # until a task write is in flight and Stack sits on it
                while not any("/tasks" in r.path for r in list(stack.requests)):
                    await asyncio.sleep(0.01)
            assert await sc.stop(how) == 0
            await c.close()
            err = await sc.stderr_text()
        # the write Stack sits on was left behind, and the exit log says so (not "cleanly")
        last = err.strip().splitlines()[-1]
        assert "shut down, abandoned:" in last and "delivery flush at exit" in last, err
        assert "shut down cleanly" not in err and "Traceback" not in err, err
    finally:
        stack.stop()


async def test_exit_within_2_s_mid_step_awaiting_an_unanswered_platform_request(tmp_path):
    """Virtual clock: the login's passes are awaited inside the step; the client never answers."""
    asked = asyncio.Event()

    async def never(method, params):
        asked.set()
        await asyncio.sleep(3600)

    async with SidecarProcess(tmp_path, clock="virtual") as sc:
        c = await BridgeClient.connect(sc.port, sc.token, on_request=never)
        await c.call("clock.advance_to", {"t": T0})
        await c.notify("session.login", {"tu": "c-tu-1", "project": "chathouse"})
        async with asyncio.timeout(10):
            await asked.wait()  # the worker is inside the login step, awaiting our answer
        assert await sc.stop("SIGTERM") == 0
        await c.close()


_CHILDREN: list[subprocess.Popen] = []  # killed after each test: a watchdog that regressed leaves one spinning


@pytest.fixture(autouse=True)
def _no_child_left():
    yield
    while _CHILDREN:
        p = _CHILDREN.pop()
        if p.poll() is None:
            p.kill()
            p.wait()
        for stream in (p.stdout, p.stderr):
            stream.close()


def _guarded_child(deadline_s: float, then: str) -> subprocess.Popen:
    code = textwrap.dedent(f"""
        import os, signal, sys, time
        from sidecar.cli.main import arm_shutdown_guard
        arm_shutdown_guard({deadline_s})
        print("armed", flush=True)
        {then}
        while True:
            time.sleep(0.05)  # a shutdown stuck for good
    """)
    p = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    _CHILDREN.append(p)
    return p


def test_a_stuck_shutdown_is_forced_with_exit_5_by_the_watchdog():
    p = _guarded_child(0.5, "")
    assert p.stdout.readline().strip() == "armed"
    # the watchdog's own clock says when it fired; the parent's would measure the machine too
    assert p.wait(timeout=EXIT_S) == 5
    assert "shutdown took over 0.5 s" in p.stderr.read()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_second_signal_during_shutdown_exits_at_once(sig):
    p = _guarded_child(60, "")
    assert p.stdout.readline().strip() == "armed"
    p.send_signal(sig)
    # 128 + N is the second signal's exit: the 60 s watchdog would have exited with 5
    assert p.wait(timeout=EXIT_S) == 128 + sig
    assert f"second {sig.name} during shutdown" in p.stderr.read()


def test_parent_death_ends_the_sidecar_within_2_s(tmp_path):
    """Electron dies without closing our stdin (here: stdin is /dev/null, so only the parent
    watch can notice): the sidecar ends within 2 s of its parent — its parent watch notices and
    the orderly close finishes before its own watchdog would force it (the log says which; the
    parent's stopwatch would measure the machine too)."""
    wrapper = textwrap.dedent(f"""
        import os, subprocess, sys
        p = subprocess.Popen([sys.executable, "-m", "sidecar", "serve", "--port", "0", "--clock", "wall",
                              "--data-dir", {str(tmp_path)!r}], stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, env=dict(os.environ, SIDECAR_TOKEN="t"))
        print(p.pid, p.stdout.readline().decode().strip(), flush=True)
        os._exit(0)  # the parent dies; the sidecar is re-parented
    """)
    r = subprocess.run([sys.executable, "-c", wrapper], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                       text=True, timeout=60)
    t0 = time.monotonic()
    pid_s, ready = r.stdout.split(" ", 1)
    assert '"ready"' in ready, r.stdout + r.stderr
    pid = int(pid_s)
    while time.monotonic() - t0 < EXIT_S and _alive(pid):
        time.sleep(0.02)
    if _alive(pid):
        os.kill(pid, signal.SIGKILL)
        raise AssertionError(f"the sidecar outlived its parent by {EXIT_S:g} s")
    log = (tmp_path / "sidecar.log.jsonl").read_text()
    assert "shutting down: parent-died" in log
    assert "shutdown took over" not in log  # not forced by the watchdog: closed in time


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for its new parent to reap it has exited)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        stat = open(f"/proc/{pid}/stat").read()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


# ---- every request sent before the close is answered (s15 "Noted, not changed") --------------


async def test_a_request_in_flight_at_sigterm_that_cannot_finish_is_answered_shutting_down(tmp_path):
    """A login held by a Stack startup read that hangs: SIGTERM answers it -32003 "shutting
    down" (it used to get nothing, only the 1001 close), and the exit stays 0 within 2 s; a
    request queued behind it is answered too ("nothing was done")."""
    stack = StackServer()
    stack.start()
    stack.fail("delay", path_contains="/startup", seconds=30.0)
    try:
        async with SidecarProcess(tmp_path, clock="virtual", extra=("--stack-url", stack.url)) as sc:
            c = await BridgeClient.connect(sc.port, sc.token, on_request=_answer)
            await c.call("clock.advance_to", {"t": T0})
            login = asyncio.create_task(c.call("session.login", {"tu": "g-tu-1", "project": "golden"}))
            async with asyncio.timeout(10):  # until the login is inside the startup read
                while not any(r.path.endswith("/startup") for r in list(stack.requests)):
                    await asyncio.sleep(0.01)
            behind = asyncio.create_task(c.call("tasks.list", {}))
            await asyncio.sleep(0.05)
            assert await sc.stop("SIGTERM") == 0
            for call, words, code in ((login, "did not finish", -32003), (behind, "nothing was done", -32002)):
                with pytest.raises(RemoteError) as info:
                    await call
                assert info.value.code == code and "shutting down" in info.value.message
                assert words in info.value.message
            async with asyncio.timeout(2):
                await c.wait_closed()
            assert c.close_code == 1001
            await c.close()
    finally:
        stack.stop()


async def test_a_request_in_flight_at_sigterm_that_finishes_in_time_gets_its_result(tmp_path):
    """Virtual clock: a login whose step awaits the client's answer to a platform request when
    SIGTERM comes; the client answers once the sidecar says it is shutting down.  The
    connection stays open for that answer, the step (committed before it asked) keeps its
    result, and the result is the login's answer, before the 1001 close."""
    asked, release = asyncio.Event(), asyncio.Event()

    async def held(method, params):
        asked.set()
        await release.wait()
        return await _answer(method, params)

    async with SidecarProcess(tmp_path, clock="virtual") as sc:
        c = await BridgeClient.connect(sc.port, sc.token, on_request=held)
        await c.call("clock.advance_to", {"t": T0})
        login = asyncio.create_task(c.call("session.login", {"tu": "c-tu-1", "project": "chathouse"}))
        async with asyncio.timeout(10):
            await asked.wait()  # the worker is inside the login step, awaiting our answer
        sc.proc.send_signal(signal.SIGTERM)
        await sc.wait_for_stderr("shutting down: signal:SIGTERM")
        release.set()
        assert await sc.wait_exit() == 0
        answer = await login
        assert isinstance(answer, dict) and answer.get("ok") is True, answer
        async with asyncio.timeout(2):
            await c.wait_closed()
        assert c.close_code == 1001
        await c.close()


async def test_an_advance_cut_short_at_sigterm_says_how_far_it_got(tmp_path):
    """An advance under way at SIGTERM stops at its next timer: its answer is -32003 and says
    the instant it reached (the timers before it ran and are kept) — not "nothing was done"."""
    asked = [0]

    async def counted(method, params):
        asked[0] += 1
        return await _answer(method, params)

    async with SidecarProcess(tmp_path, clock="virtual") as sc:
        c = await BridgeClient.connect(sc.port, sc.token, on_request=counted)
        await c.call("clock.advance_to", {"t": T0})
        await c.call("session.login", {"tu": "g-tu-1", "project": "golden"})
        before = asked[0]
        far = asyncio.create_task(c.call("clock.advance_to", {"t": T0 + 86400 * 365}))
        async with asyncio.timeout(10):  # inside the advance: its poll timers ask the platform
            while asked[0] < before + 5:
                await asyncio.sleep(0.005)
        assert await sc.stop("SIGTERM") in (0, 5)
        with pytest.raises(RemoteError) as info:
            await far
        assert info.value.code == -32003 and "shutting down" in info.value.message, info.value
        assert "nothing was done" not in info.value.message
        assert T0 < info.value.data["now"] < T0 + 86400 * 365
        assert "stopped at" in info.value.message
        await c.close()


@pytest.mark.parametrize("method", ["clock.advance_to", "platform.events"])
async def test_an_advance_or_batch_cut_short_at_sigterm_says_what_was_kept(tmp_path, method):
    """F4 (breaker 16): a ``clock.advance_to`` / ``platform.events`` whose step awaits a platform
    answer that never comes is cut short after the grace; its -32003 still says what was kept —
    ``data.now`` (the instant it reached), and for ``platform.events`` ``data.taken`` (the
    events it took) — as the late path always did."""
    hold, asked = asyncio.Event(), asyncio.Event()

    async def answer(m: str, params: dict) -> dict:
        if hold.is_set():
            asked.set()
            await asyncio.Event().wait()  # never answered
        return {"dialogs": []}

    async with SidecarProcess(tmp_path, clock="virtual") as sc:
        c = await BridgeClient.connect(sc.port, sc.token, on_request=answer)
        await c.call("clock.advance_to", {"t": T0})
        await c.call("session.login", {"tu": "c-tu-1", "project": "chathouse"})
        hold.set()
        if method == "clock.advance_to":
            call = asyncio.create_task(c.call(method, {"t": T0 + 3600}))
        else:
            call = asyncio.create_task(c.call(method, {"events": [
                dict(send_event(1, T0 + 10), received_at=T0 + 10),
                dict(send_event(2, T0 + 3600), received_at=T0 + 3600)]}))
        async with asyncio.timeout(10):
            await asked.wait()
        assert await sc.stop("SIGTERM") == 0
        with pytest.raises(RemoteError) as info:
            await call
        assert info.value.code == -32003 and "shutting down" in info.value.message
        data = info.value.data
        assert isinstance(data, dict) and T0 <= data["now"] < T0 + 3600
        if method == "platform.events":
            assert data["taken"] in (0, 1)
        await c.close()
