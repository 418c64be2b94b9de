"""Spawn a real ``sidecar serve`` process as Electron does (tests only).

1. A process that outlives its wait after a stop request is a failure, never quietly killed:
   ``stop`` and ``__aexit__`` kill it (so no process is left behind) and then raise
   :class:`Overran` with the tail of its stderr — the operator would have had a sidecar that never
   exits (issue 7).
2. The shutdown promise (gone within :data:`EXIT_DEADLINE_S` of the request) is judged by the exit
   code, not by the wall clock: the process's own watchdog ends a shutdown still running 1.5 s
   after the request with code 5 (``sidecar/cli/stop_guard.py``), so code 0 is an orderly close
   inside the promise.  The wait for the exit (:data:`tests.waits.EXIT_S`) only tells a hang from a
   loaded machine that reaps the process late; ``exit_s`` records how long the exit took.
"""
from __future__ import annotations

import asyncio
import json
import os
import secrets
import signal
import sys
import time
from pathlib import Path

from tests.waits import EXIT_S, HANDSHAKE_S

ROOT = Path(__file__).resolve().parents[2]
EXIT_DEADLINE_S = 2.0  # DESIGN §3 / issue 7: every shutdown path ends the process within this (rule 2)


class Overran(AssertionError):
    """The process did not exit within its wait (it was killed afterwards): a hang."""


class SidecarProcess:
    def __init__(self, data_dir: Path, *, clock: str = "virtual", binary: str | None = None,
                 extra: tuple[str, ...] = (), wait_s: float = EXIT_S,
                 prelude: str | None = None) -> None:
        self.data_dir = data_dir
        # Python run in the child before ``sidecar.cli.main.main()`` (it patches a fault in; a test's own)
        self.prelude = prelude
        self.clock = clock
        self.binary = binary
        self.extra = extra
        self.wait_s = wait_s  # seconds to wait for the exit after a stop request (rule 2)
        self.token = secrets.token_urlsafe(16)
        self.proc: asyncio.subprocess.Process | None = None
        self.port = 0
        self.exit_s: float | None = None  # seconds from the stop request to the exit
        self._stderr_seen = b""  # stderr read by wait_for_stderr (stderr_text returns it too)

    async def __aenter__(self) -> "SidecarProcess":
        if self.binary:
            launch = [self.binary]
        elif self.prelude is not None:
            launch = [sys.executable, "-c", f"{self.prelude}\nimport sys\nfrom sidecar.cli.main import main\nsys.exit(main())\n"]
        else:
            launch = [sys.executable, "-m", "sidecar"]
        cmd = launch + [
            "serve", "--port", "0", "--data-dir", str(self.data_dir), "--clock", self.clock, *self.extra]
        self.proc = await asyncio.create_subprocess_exec(
            *cmd, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, env=self._env(), cwd=ROOT)
        try:
            async with asyncio.timeout(60):
                line = await self.proc.stdout.readline()
        except TimeoutError:
            await self._kill()
            raise AssertionError("sidecar printed no ready line within 60 s") from None
        if not line:
            err = (await self.proc.stderr.read()).decode(errors="replace")
            await self.proc.wait()
            raise AssertionError(f"sidecar exited {self.proc.returncode} before ready: {err[-2000:]}")
        ready = json.loads(line)
        assert ready["event"] == "ready" and ready["protocol"] == 1
        self.port = ready["port"]
        return self

    def _env(self) -> dict[str, str]:
        """The test's environment, the token, and a handshake wait a loaded machine cannot reach
        (``tests/waits.py``) unless the test sets its own."""
        env = dict(os.environ, SIDECAR_TOKEN=self.token)
        env.setdefault("SIDECAR_HANDSHAKE_TIMEOUT_S", str(HANDSHAKE_S))
        return env

    async def stop(self, how: str = "stdin", *, wait_s: float | None = None) -> int:
        """Ask the process to stop — ``how``: ``stdin`` (EOF, Electron died), ``SIGTERM``,
        ``SIGINT`` or ``SIGHUP`` — and return its exit code (0: an orderly close inside the
        promise, 5: forced by its watchdog; rule 2).  Raises :class:`Overran` (after killing it)
        when it is still running ``wait_s`` seconds later (default: the instance's)."""
        assert self.proc is not None
        if how == "stdin":
            self.proc.stdin.close()
        else:
            self.proc.send_signal(getattr(signal, how))
        return await self.wait_exit(wait_s, what=how)

    async def wait_exit(self, wait_s: float | None = None, *, what: str = "stop") -> int:
        """Wait for the exit that was asked for and return its code; :class:`Overran` past
        ``wait_s`` seconds (default: the instance's)."""
        assert self.proc is not None
        limit = self.wait_s if wait_s is None else wait_s
        t0 = time.monotonic()
        try:
            async with asyncio.timeout(limit):
                code = await self.proc.wait()
        except TimeoutError:
            err = await self._kill()
            raise Overran(f"sidecar pid {self.proc.pid} still running {limit:g} s after {what}; "
                          f"killed. stderr tail:\n{err[-3000:]}") from None
        self.exit_s = time.monotonic() - t0
        return code

    async def stderr_text(self) -> str:
        """All stderr (after the process exited)."""
        assert self.proc is not None and self.proc.returncode is not None
        return (self._stderr_seen + await self.proc.stderr.read()).decode(errors="replace")

    async def wait_for_stderr(self, text: str, within_s: float = 10.0) -> str:
        """Read stderr (while the process runs) up to the first line holding ``text``; return
        that line.  The evidence that the process got somewhere — use it instead of a sleep.
        AssertionError when the line does not come within ``within_s`` s or stderr ends first."""
        assert self.proc is not None
        try:
            async with asyncio.timeout(within_s):
                while True:
                    line = await self.proc.stderr.readline()
                    self._stderr_seen += line
                    if not line:
                        break
                    if text.encode() in line:
                        return line.decode(errors="replace")
        except TimeoutError:
            pass
        raise AssertionError(f"no stderr line with {text!r} within {within_s:g} s; stderr so far:\n"
                             f"{self._stderr_seen.decode(errors='replace')[-2000:]}")

    async def _kill(self) -> str:
        if self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()
        try:
            async with asyncio.timeout(2):
                return (self._stderr_seen + await self.proc.stderr.read()).decode(errors="replace")
        except TimeoutError:
            return self._stderr_seen.decode(errors="replace")

    async def __aexit__(self, exc_type, exc, tb) -> None:
        if self.proc.returncode is not None:
            return
        if exc_type is not None:  # the test failed already: do not mask its error
            await self._kill()
            return
        await self.stop()


def send_event(i: int, at: float) -> dict:
    """A Chathouse ``Send`` (RU ``c-ru-<i>`` writes to ``c-tu-1`` at ``at``): one Unanswered message."""
    return {"project": "chathouse", "tu": "c-tu-1", "name": "Send",
            "data": {"id": f"m{i}", "type": "message", "from": f"c-ru-{i}", "to": "c-tu-1",
                     "at": at, "body": "hi"}}


async def answer_no_dialogs(method: str, params: dict) -> dict:
    """A platform that answers every poll with no dialogs."""
    return {"dialogs": []}
