"""The process-wide stop guard of ``sidecar serve``: stop signals and the shutdown watchdog
(DESIGN §3).

Rules / theory of operation
---------------------------
* :meth:`StopGuard.install` runs once, before the database opens and long before ``ready`` is
  printed.  From then on SIGTERM, SIGINT and SIGHUP are handled by *our* Python-level handler
  for the rest of the process's life: there is no instant at which a stop signal is ignored or
  takes its default action (the old design removed the asyncio handlers when the first signal
  arrived and armed the second-signal handler only later, in a ``finally`` — a SIGINT in
  between raised ``KeyboardInterrupt`` inside asyncio's internals and hung the process).
* The handler runs in the main thread between two bytecodes, even while the event loop is busy
  (a far-future ``clock.advance_to``).  It only does lock-free, async-signal-safe work: a flag,
  one ``os.write`` to the watchdog's pipe and ``loop.call_soon_threadsafe`` (a deque append and
  a self-pipe write).  The first stop request (signal, stdin EOF, parent death, a failed step or
  an error — :meth:`StopGuard.request`) wakes the watchdog thread, which is already running.
* Any stop signal after the first request ends the process at once with 128 + N: one line is
  written to stderr with ``os.write`` (no lock), the log handlers get a best-effort line (their
  lock is tried with a timeout, never waited for), then ``os._exit``.
* The watchdog thread ends the process with exit code 5 when the orderly close has not finished
  :data:`SHUTDOWN_DEADLINE_S` seconds after the first request (a thread, because a stuck event
  loop could not run a timer of its own).
"""
from __future__ import annotations

import asyncio
import logging
import os
import select
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import NoReturn

__all__ = ["StopGuard", "SHUTDOWN_DEADLINE_S", "EXIT_FORCED", "STOP_SIGNALS", "hard_exit", "exit_now"]

log = logging.getLogger("sidecar")

SHUTDOWN_DEADLINE_S = 1.5  # the process is gone within 2 s of the request, whatever hangs
EXIT_FORCED = 5
STOP_SIGNALS = tuple(getattr(signal, n) for n in ("SIGTERM", "SIGINT", "SIGHUP") if hasattr(signal, n))


def _flush_logs(record: logging.LogRecord | None = None) -> None:
    """Emit ``record`` (if any) to every log handler and flush them; a handler whose lock is held
    (by the code a signal interrupted, by a thread left behind) is skipped, never waited for."""
    try:
        for h in logging.getLogger().handlers + log.handlers:
            lock = getattr(h, "lock", None)
            if lock is None or not lock.acquire(timeout=0.05):
                continue
            try:
                if record is not None:
                    h.emit(record)
                h.flush()
            finally:
                lock.release()
    except BaseException:  # noqa: BLE001,S110 - exiting anyway; a logging failure must not stop it
        pass


def hard_exit(code: int, why: str) -> NoReturn:
    """``os._exit(code)`` after a best-effort line on stderr and in the logs; never blocks on a
    lock (it may run inside a signal handler that interrupted a logging call)."""
    try:
        os.write(2, f"sidecar: {why}\n".encode(errors="replace"))
    except OSError:
        pass
    try:
        record: logging.LogRecord | None = log.makeRecord(log.name, logging.ERROR, __file__, 0, "%s", (why,), None)
    except BaseException:  # noqa: BLE001 - exiting anyway
        record = None
    _flush_logs(record)
    os._exit(code)


def exit_now(code: int) -> NoReturn:
    """End the process with ``code`` at once — no event-loop close, no join of the threads left
    (``sidecar serve`` after a close stage was abandoned, :mod:`sidecar.app.aio`) — once stdout,
    stderr and the log handlers are flushed (a held handler lock is not waited for).  The OS
    releases the data-dir lock; SQLite's WAL holds every commit (:mod:`sidecar.store.db`)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a reader gone, a stream closed: nothing more to say there
            pass
    _flush_logs()
    os._exit(code)


class StopGuard:
    """Stop signals and the watchdog for one process (see the module header)."""

    def __init__(self, deadline_s: float = SHUTDOWN_DEADLINE_S) -> None:
        self.deadline_s = deadline_s
        self.reason: str | None = None  # the first stop request's reason
        self._loop: asyncio.AbstractEventLoop | None = None
        self._on_stop: Callable[[str], None] | None = None
        self._r, self._w = os.pipe()
        self._thread = threading.Thread(target=self._watch, name="shutdown-watchdog", daemon=True)

    def install(self) -> "StopGuard":
        """Start the watchdog thread (idle until a stop request) and take the stop signals.
        Main thread only (signals); idempotent handlers for the rest of the process."""
        self._thread.start()
        if threading.current_thread() is threading.main_thread():
            for sig in STOP_SIGNALS:
                signal.signal(sig, self._on_signal)
        return self

    def attach(self, loop: asyncio.AbstractEventLoop, on_stop: Callable[[str], None]) -> None:
        """Tell ``on_stop(reason)`` (called in ``loop``) about the first stop request; at once
        (soon) if it already came."""
        self._loop, self._on_stop = loop, on_stop
        if self.reason is not None:
            loop.call_soon_threadsafe(on_stop, self.reason)

    @property
    def requested(self) -> bool:
        return self.reason is not None

    def request(self, reason: str) -> None:
        """The first stop request starts the watchdog's deadline; later ones change nothing."""
        if self.reason is not None:
            return
        self.reason = reason  # set first: a signal landing during the rest sees "second"
        try:
            os.write(self._w, b"\0")
        except OSError:
            pass
        loop, on_stop = self._loop, self._on_stop
        if loop is not None and on_stop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(on_stop, reason)

    def _on_signal(self, signum: int, frame: object) -> None:
        if self.reason is not None:
            hard_exit(128 + signum, f"second {signal.Signals(signum).name} during shutdown: exiting now")
        self.request(f"signal:{signal.Signals(signum).name}")

    def _watch(self) -> None:
        select.select([self._r], [], [])  # idle until the first request (no deadline before it)
        end = time.monotonic() + self.deadline_s  # noqa: TID251 - process watchdog, not domain time
        while (left := end - time.monotonic()) > 0:  # noqa: TID251
            select.select([], [], [], left)
        hard_exit(EXIT_FORCED, f"shutdown took over {self.deadline_s:g} s: exiting now "
                               "(unsent Stack writes stay queued for the next start)")
