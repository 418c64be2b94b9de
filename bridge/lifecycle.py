"""When the sidecar must stop: signals, stdin EOF, parent death (DESIGN §3).

Rules / theory of operation
---------------------------
:func:`wait_for_shutdown` returns the *first* reason that occurs, as a string, and removes every
hook it installed before returning (so it can be awaited again, e.g. in tests):

* ``"signal:SIGTERM"`` / ``"signal:SIGINT"`` / ``"signal:SIGHUP"`` — handlers are installed on the running loop with
  ``loop.add_signal_handler`` (main thread only; Unix).  After the wait ends the default
  dispositions are restored.  ``signals=False`` leaves the signals alone: ``sidecar serve`` owns
  them for the whole process (``sidecar.cli.stop_guard``), because restoring the defaults opens a
  window in which a second signal kills or hangs a process that is shutting down.
* ``"stdin-eof"`` — Electron spawns the sidecar with a pipe on stdin and never writes to it; when
  Electron dies, however it dies, the kernel closes the pipe and the read returns EOF.  Watched
  only when stdin **is a pipe/FIFO or a socket** (``watch_stdin=None`` decides with ``os.fstat`` +
  ``stat.S_ISFIFO``/``S_ISSOCK``).  Never a TTY (a developer's terminal), ``/dev/null``, a regular
  file, or a closed fd 0: CI runs with no stdin, and that must not stop the process.
  ``watch_stdin=True`` forces watching (it fails with ``OSError`` if fd 0 cannot be polled);
  ``False`` disables it.  Bytes that do arrive on stdin are read and discarded.
* ``"parent-died"`` — polled every ``poll_s`` seconds: ``os.getppid()`` differs from the parent
  at call time (an orphan is re-parented to init or to the nearest sub-reaper, so "changed" is the
  portable test, not "== 1").  If ``parent_pid`` is given, ``os.kill(parent_pid, 0)`` failing with
  ``ProcessLookupError`` counts too (for an owner that is not our direct parent; note a dead but
  un-reaped *direct* parent still "exists" as a zombie — the getppid test covers that case).
  A process whose original parent is already pid 1 has no parent to lose; only an explicit
  ``parent_pid`` is watched then.
"""
from __future__ import annotations

import asyncio
import logging
import os
import signal
import stat

__all__ = ["wait_for_shutdown", "stdin_is_watchable"]

log = logging.getLogger("bridge.lifecycle")

# signals that mean "stop cleanly"; SIGHUP too: a closed terminal or session must not kill the
# sidecar mid-step with the default disposition
_SIGNALS = tuple(getattr(signal, n) for n in ("SIGTERM", "SIGINT", "SIGHUP") if hasattr(signal, n))
_STDIN = 0  # file descriptor watched for EOF


def stdin_is_watchable(fd: int = _STDIN) -> bool:
    """True if ``fd`` is an open pipe/FIFO or socket (the auto-detection of ``watch_stdin``)."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False  # closed
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


async def wait_for_shutdown(
    *, watch_stdin: bool | None = None, parent_pid: int | None = None, poll_s: float = 1.0,
    original_ppid: int | None = None, signals: bool = True,
) -> str:
    """Wait until the process should stop; return why (see the module header).

    ``watch_stdin``: None = auto (pipe/socket only), True = always, False = never.
    ``parent_pid``: an extra process whose death stops us.  ``poll_s``: parent poll period (s).
    ``original_ppid``: our parent as seen at process start (default: now).  Pass it when the
    parent may already have died before this call (e.g. during startup): then the first poll
    reports ``"parent-died"`` instead of watching the new parent forever.
    ``signals``: False = do not touch the stop signals (the caller owns them).
    """
    loop = asyncio.get_running_loop()
    done: asyncio.Future[str] = loop.create_future()

    def finish(reason: str) -> None:
        if not done.done():
            done.set_result(reason)

    installed_signals: list[signal.Signals] = []
    for sig in _SIGNALS if signals else ():
        try:
            loop.add_signal_handler(sig, finish, f"signal:{sig.name}")
            installed_signals.append(sig)
        except (NotImplementedError, RuntimeError, ValueError) as exc:  # not main thread / Windows
            log.warning("cannot watch %s: %s", sig.name, exc)

    reading_stdin = False
    if watch_stdin is None:
        watch_stdin = stdin_is_watchable()
    if watch_stdin:

        def on_stdin() -> None:
            try:
                chunk = os.read(_STDIN, 65536)
            except BlockingIOError:
                return
            except OSError as exc:
                log.warning("stdin read failed (%s); treating as EOF", exc)
                chunk = b""
            if not chunk:
                finish("stdin-eof")

        loop.add_reader(_STDIN, on_stdin)
        reading_stdin = True

    ppid = os.getppid() if original_ppid is None else original_ppid
    poller = asyncio.create_task(_watch_parent(ppid, parent_pid, poll_s, finish),
                                 name="bridge-parent-watch")
    try:
        reason = await done
    finally:
        poller.cancel()
        await asyncio.gather(poller, return_exceptions=True)
        if reading_stdin:
            loop.remove_reader(_STDIN)
        for sig in installed_signals:
            loop.remove_signal_handler(sig)
    log.info("shutdown requested: %s", reason)
    return reason


async def _watch_parent(original_ppid: int, parent_pid: int | None, poll_s: float, finish) -> None:
    """Poll for parent death every ``poll_s`` seconds; call ``finish("parent-died")``."""
    while True:
        await asyncio.sleep(poll_s)  # noqa: TID251 - I/O layer: polls the OS for the parent, no domain time
        if original_ppid != 1 and os.getppid() != original_ppid:
            finish("parent-died")
            return
        if parent_pid is not None:
            try:
                os.kill(parent_pid, 0)
            except ProcessLookupError:
                finish("parent-died")
                return
            except PermissionError:
                pass  # exists, owned by someone else
