"""Logs over the bridge (DESIGN §4): ``logs.subscribe {level}`` / ``logs.unsubscribe``
and the ``log`` notifications, so Electron need not parse the sidecar's stderr.

Rules / theory of operation
---------------------------
1. **Outside the stream.**  A ``log`` notification carries one record
   (:class:`~sidecar.protocol.outbound.LogNote`: the JSON-lines file's fields) and no ``seq``: it
   is never kept, acked nor replayed (:meth:`bridge.session.Session.tell`).  Logs are
   diagnostics, not task state: putting them on the seq'd stream would let a chatty DEBUG
   subscription push task frames out of its capped window (a seq gap: tasks re-read) and would
   replay stale lines after every reconnect.  The file (``sidecar.log.jsonl``) stays the record.
2. **One connection.**  A subscription belongs to the connection that is current when the
   request is handled, and ends with it (closed or replaced: :meth:`Session.on_shutdown`); a
   reconnecting client subscribes again.  ``logs.subscribe`` again changes the level live;
   ``logs.unsubscribe`` ends it.  A subscribe handled after its connection is gone answers
   ``ok: false`` and subscribes nothing.
3. **Cheap when off, never formatted below the level.**  The :class:`LogFeed` handler sits on the
   root logger only while subscribed, at the subscribed level: ``logging`` skips a handler whose
   level a record is below, so such records are not formatted at all.  Records below the
   process's ``--log-level`` are never made (the answer's ``process_level`` says which).
4. **Never blocks, bounded.**  ``emit`` formats the record and appends it to a buffer of
   :data:`BUFFER` records (oldest dropped, counted); on the event loop's thread it sends at once
   (so a record logged before an answer is queued precedes that answer on the wire), from any
   other thread (SQLite's) it asks the loop to (``call_soon_threadsafe``, once per batch).  A
   send is refused — the record dropped, counted — while :data:`ROOM` bytes already wait for the
   connection's writer: a client that does not read loses log lines, never answers, and is not
   cut off for them.  The next record delivered says how many were lost (``dropped``).
5. **No feedback.**  A record logged while a record is being sent (a bridge warning about that
   very send) is not sent; records of the ``websockets`` library — which at DEBUG logs every frame
   it writes, log frames included — are never sent.
"""
from __future__ import annotations

import asyncio
import logging
import threading
from collections import deque

from bridge import BridgeServer
from bridge.session import Session
from sidecar.protocol import inbound as p
from sidecar.protocol.methods import Methods
from sidecar.protocol.outbound import LogNote

__all__ = ["BUFFER", "LEVELS", "LogFeed", "ROOM", "note_of"]

BUFFER = 1000  # records waiting for the event loop's thread at most (oldest dropped beyond)
ROOM = 1 << 20  # bytes of frames waiting for the writer past which a record is dropped, not queued
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")  # logging's names (p.LogLevel)
EXCLUDED = ("websockets",)  # loggers whose records are never sent (rule 5)

_exc_format = logging.Formatter()  # only its formatException (the file's "exc" text)


def level_name(levelno: int) -> str:
    """The standard name of ``levelno``: the highest of :data:`LEVELS` at or below it (a custom
    level between two reads as the lower; below DEBUG as DEBUG)."""
    name = "DEBUG"
    for number, candidate in zip((logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR, logging.CRITICAL), LEVELS):
        if number <= levelno:
            name = candidate
    return name


def note_of(record: logging.LogRecord, dropped: int = 0) -> LogNote:
    """``record`` as the ``log`` notification's params: the fields
    :class:`sidecar.logs.JsonLines` writes (``ts`` unix seconds to the ms, ``level``, ``logger``,
    ``msg``, ``exc`` when the record carries an exception).  Raises what ``getMessage`` raises
    (a format string and args that do not match)."""
    note = LogNote(ts=round(record.created, 3), level=level_name(record.levelno),  # type: ignore[arg-type]
                   logger=record.name, msg=record.getMessage(), dropped=dropped)
    if record.exc_info:
        note.exc = _exc_format.formatException(record.exc_info)
    return note


class LogFeed(logging.Handler):
    """The log subscription of the bridge's current connection (module rules).  ``bridge``: the
    server whose :attr:`~bridge.server.BridgeServer.session` subscribes; ``root``: the logger
    the handler sits on while subscribed (the root logger)."""

    def __init__(self, bridge: BridgeServer, root: logging.Logger | None = None, *,
                 buffer: int = BUFFER, room: int = ROOM) -> None:
        super().__init__(logging.DEBUG)
        self.bridge = bridge
        self.root = root if root is not None else logging.getLogger()
        self.room = room  # bytes (rule 4)
        self.session: Session | None = None  # the subscribed connection; None: not subscribed
        self._buf: deque[LogNote] = deque(maxlen=buffer)  # formatted, not sent yet
        self.dropped = 0  # records lost since the last one delivered (buffer full, no room)
        self.lost = 0  # records lost in all (a counter for tests and status)
        self._sending = threading.local()  # .on: this thread is sending (rule 5)
        self._loop: asyncio.AbstractEventLoop | None = None  # the loop the session lives on
        self._loop_thread = 0  # its thread's ident
        self._scheduled = False  # a flush is asked of the loop already

    # the bridge methods ---------------------------------------------------------------------
    def attach(self, methods: Methods) -> None:
        """Register ``logs.subscribe`` and ``logs.unsubscribe`` (neither needs the clock)."""
        methods.register("logs.subscribe", p.LogsSubscribe, self._subscribe, needs_clock=False)
        methods.register("logs.unsubscribe", p.LogsUnsubscribe, self._unsubscribe, needs_clock=False)

    async def _subscribe(self, a: p.LogsSubscribe) -> dict:
        ok = self.subscribe(a.level)
        process = level_name(self.root.getEffectiveLevel())
        return {"ok": ok, "level": a.level, "process_level": process}

    async def _unsubscribe(self, a: p.LogsUnsubscribe) -> dict:
        self.unsubscribe()
        return {"ok": True}

    # the subscription -----------------------------------------------------------------------
    def subscribe(self, level: str) -> bool:
        """Send the current connection the records at ``level`` (one of :data:`LEVELS`) or
        above, from now on; False (nothing subscribed) when no connection is current.  Call
        it on the event loop's thread."""
        session = self.bridge.session
        if session is None or session.closed:
            return False
        self.setLevel(level)
        if session is not self.session:
            with self.lock:  # type: ignore[union-attr]  # Handler.createLock made it
                self._buf.clear()
                self.dropped = 0
            self.session = session
            session.on_shutdown(lambda: self._ended(session))
        self._loop, self._loop_thread = asyncio.get_running_loop(), threading.get_ident()
        if self not in self.root.handlers:
            self.root.addHandler(self)
        return True

    def unsubscribe(self) -> None:
        """No more records (idempotent): the handler leaves the root logger."""
        self.root.removeHandler(self)
        self.session = None
        with self.lock:  # type: ignore[union-attr]
            self._buf.clear()
            self.dropped = 0

    def _ended(self, session: Session) -> None:
        if self.session is session:  # not a connection replaced before this one subscribed
            self.unsubscribe()

    # the handler ----------------------------------------------------------------------------
    def emit(self, record: logging.LogRecord) -> None:
        """Buffer ``record`` and send it (rule 4) unless it is feedback (rule 5).  Called with
        the handler's lock held (``logging.Handler.handle``)."""
        if getattr(self._sending, "on", False) or record.name.startswith(EXCLUDED):
            return
        try:
            note = note_of(record)
        except Exception:  # noqa: BLE001 — logging's own policy for a record that does not format
            self.handleError(record)
            return
        buf = self._buf
        if len(buf) == buf.maxlen:
            self._lose(1)  # the oldest goes (deque maxlen)
        buf.append(note)
        if threading.get_ident() == self._loop_thread:
            self.send_buffered()
        elif not self._scheduled and self._loop is not None:
            self._scheduled = True
            try:
                self._loop.call_soon_threadsafe(self.send_buffered)
            except RuntimeError:  # the loop is closed: nobody will read these
                self._scheduled = False

    def send_buffered(self) -> None:
        """Send what is buffered to the subscribed connection, on the event loop's thread
        (rules 4 and 5); records that find no room are dropped and counted.  (Not ``flush``:
        ``logging.shutdown`` calls that at exit, from whatever thread.)"""
        with self.lock:  # type: ignore[union-attr]
            self._scheduled = False
            session, buf = self.session, self._buf
            if not buf:
                return
            if session is None:
                buf.clear()
                return
            self._sending.on = True
            try:
                while buf:
                    note = buf.popleft()
                    if self.dropped:
                        note.dropped, self.dropped = self.dropped, 0
                    if not session.tell("log", note, self.room):
                        self.dropped += note.dropped  # counted in ``lost`` when they were lost
                        self._lose(1 + len(buf))
                        buf.clear()
            finally:
                self._sending.on = False

    def _lose(self, n: int) -> None:
        self.dropped += n
        self.lost += n
