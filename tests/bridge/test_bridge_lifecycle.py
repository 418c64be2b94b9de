"""bridge.lifecycle: SIGTERM, stdin EOF and parent death end wait_for_shutdown with the reason."""
import asyncio
import os
import pty
import select
import signal
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

from bridge.lifecycle import stdin_is_watchable, wait_for_shutdown

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}

# Prints "ready" once the hooks are installed, then the reason.
WAITER = textwrap.dedent(
    """
    import asyncio, os
    from bridge.lifecycle import wait_for_shutdown

    async def main():
        waiting = asyncio.create_task(wait_for_shutdown(poll_s=0.05))
        await asyncio.sleep(0)
        print("ready", os.getpid(), flush=True)
        print(await waiting, flush=True)

    asyncio.run(main())
    """
)


def spawn(code: str, **kwargs) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", code], env=ENV, text=True, **kwargs)


def readline(stream, timeout: float = 5.0) -> str:
    """One line, or fail instead of hanging the suite if the process never writes it."""
    ready, _, _ = select.select([stream], [], [], timeout)
    assert ready, f"no output within {timeout} s"
    return stream.readline()


def read_ready(stream) -> int:
    """Read the waiter's "ready <pid>" line; return the pid."""
    word, pid = readline(stream).split()
    assert word == "ready"
    return int(pid)


def kill_quietly(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def test_stdin_is_watchable_only_for_pipes_and_sockets():
    read_end, write_end = os.pipe()
    left, right = socket.socketpair()
    primary, secondary = pty.openpty()
    devnull = os.open(os.devnull, os.O_RDONLY)
    try:
        assert stdin_is_watchable(read_end) is True
        assert stdin_is_watchable(left.fileno()) is True
        assert stdin_is_watchable(secondary) is False  # a TTY
        assert stdin_is_watchable(devnull) is False
        closed = os.dup(devnull)
        os.close(closed)
        assert stdin_is_watchable(closed) is False
    finally:
        for fd in (read_end, write_end, primary, secondary, devnull):
            os.close(fd)
        left.close()
        right.close()


def test_stdin_eof_on_a_pipe():
    with spawn(WAITER, stdin=subprocess.PIPE, stdout=subprocess.PIPE) as proc:
        try:
            assert read_ready(proc.stdout) == proc.pid
            proc.stdin.write("ignored bytes\n")
            proc.stdin.flush()
            proc.stdin.close()
            assert readline(proc.stdout) == "stdin-eof\n"
            assert proc.wait(timeout=5) == 0
        finally:
            proc.kill()


def test_devnull_stdin_is_not_eof_and_sigterm_is_the_reason():
    with spawn(WAITER, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE) as proc:
        try:
            assert read_ready(proc.stdout) == proc.pid
            try:
                proc.wait(timeout=0.3)  # /dev/null reads EOF at once; it must not stop the process
            except subprocess.TimeoutExpired:
                pass
            assert proc.poll() is None
            proc.send_signal(signal.SIGTERM)
            assert readline(proc.stdout) == "signal:SIGTERM\n"
            assert proc.wait(timeout=5) == 0
        finally:
            proc.kill()


def test_parent_death_is_noticed():
    # PARENT starts the WAITER child, which inherits PARENT's stdout (our pipe) but not its stdin,
    # and exits when we close its stdin; the orphaned child must notice and say so.
    parent_code = textwrap.dedent(
        f"""
        import subprocess, sys
        subprocess.Popen([sys.executable, "-c", {WAITER!r}], stdin=subprocess.DEVNULL)
        sys.stdin.read()
        """
    )
    child = None
    with spawn(parent_code, stdin=subprocess.PIPE, stdout=subprocess.PIPE) as parent:
        try:
            child = read_ready(parent.stdout)  # from the child, through the shared pipe
            assert child != parent.pid
            parent.stdin.close()
            assert parent.wait(timeout=5) == 0
            assert readline(parent.stdout) == "parent-died\n"
        finally:
            parent.kill()
            if child is not None:
                kill_quietly(child)


async def test_sigterm_in_process_and_hooks_removed():
    waiting = asyncio.create_task(wait_for_shutdown(watch_stdin=False, poll_s=10))
    await asyncio.sleep(0)
    os.kill(os.getpid(), signal.SIGTERM)
    assert await asyncio.wait_for(waiting, 2) == "signal:SIGTERM"
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL


async def test_explicit_parent_pid_dying():
    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"]) as owner:
        waiting = asyncio.create_task(wait_for_shutdown(watch_stdin=False, parent_pid=owner.pid, poll_s=0.02))
        await asyncio.sleep(0.05)
        assert not waiting.done()
        owner.kill()
        owner.wait()  # reaped: the pid no longer exists
        assert await asyncio.wait_for(waiting, 2) == "parent-died"
