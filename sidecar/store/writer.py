"""The store's commits on the event loop (the wall clock's p99 ``platform.event`` →
``task.created``; :class:`sidecar.store.db.Store` with ``durability="normal"``).

Rule 1.  **Commits on the loop.**  The commit runs on the event loop's thread, on a stdlib ``sqlite3``
         connection of its own (:func:`open_writer`), the store's only writer; aiosqlite's
         connection keeps the readers and the checkpoints, and is ``query_only``
         (:func:`readers_only`) — a write there would take SQLite's write lock from under the loop,
         which would then wait ``busy_timeout`` with everything stopped, so SQLite refuses it
         instead.  The hand-offs to aiosqlite's thread cost more than the SQLite work itself
         (docs/decisions.md "Commits on the event loop").  With ``synchronous=NORMAL`` a WAL commit
         never fsyncs, so it holds the loop only for its SQLite work; ``durability="full"`` (an
         fsync per commit) keeps the commit on aiosqlite's thread.
Rule 2.  **What would fsync on the loop does not run there.**  The loop's connection never
         checkpoints by itself (``wal_autocheckpoint=0``); every :data:`CHECKPOINT_OPS` ops a
         PASSIVE checkpoint (:func:`passive_checkpoint`) runs on aiosqlite's thread in the
         background, neither waiting for nor blocking the writer.
Rule 3.  **The WAL starts over.**  SQLite starts the WAL over only at a commit that finds every
         frame copied, which a steady stream of commits beside a background checkpoint never does
         (its fsyncs outlast the gap to the next commit).  So when a checkpoint leaves more than
         :data:`WAL_RESTART_BYTES` of frames, the next commit first awaits a catch-up checkpoint of
         what is left — on aiosqlite's thread: the loop runs on, only that commit waits — and then
         starts the WAL over.  That wait is bounded by :data:`CATCH_UP_WAIT_S` (an fsync on a busy
         disk can take hundreds of ms).  A catch-up not done by then goes on beside the commit
         (which appends to the WAL, so it does not start over) and, when it ends, asks the next
         commit again; only past :data:`WAL_HARD_BYTES` does a commit wait for it however long it
         takes — disk space bounded before latency.  A cancel during the wait writes nothing (the
         transaction has not begun).
Rule 4.  **Page size.**  Every page a transaction touches is written whole to the WAL, so a new
         database file is created with :data:`PAGE_SIZE` (2 KiB; :func:`sidecar.store.db._setup`),
         which writes less WAL per event than SQLite's default 4 KiB (docs/decisions.md "Commits on
         the event loop").  An existing file keeps its page size (changing it means rewriting the
         file) and works the same.
Rule 5.  **A lock someone else holds is never waited for on the loop.**  Another process (or
         connection) may hold SQLite's write lock — ``BEGIN IMMEDIATE`` in a ``sqlite3`` shell, a
         backup, a ``wal_checkpoint(TRUNCATE)``; waiting for it on the loop would stop reads, acks,
         new connections and signal handlers.  So the loop's connection has a busy timeout of
         :data:`LOOP_BUSY_TIMEOUT_MS` (0: SQLite answers ``SQLITE_BUSY`` at once from ``BEGIN
         IMMEDIATE``, before anything is written), and such a commit is retried — the same plan,
         one transaction, all or nothing — on aiosqlite's thread (:func:`apply_plan_off_loop`),
         which waits up to the store's ``busy_timeout`` while the loop runs on; past it the commit
         fails as a whole (:class:`~sidecar.store.errors.StoreError`), as on the ``"full"`` path.
         The caller awaits the commit either way, so nothing is sent before it and a failed one
         sends nothing.  **Order:** while a retried commit is on aiosqlite's thread, every later
         commit goes there too, behind it (that thread runs its queue in order), so none overtakes
         it — also when the awaiting task is cancelled (the retry still commits or rolls back as a
         whole, and the loop writes again only after it ended).  Readers queue behind a retry on
         that thread, so a read may wait for the lock too, but the loop does not; the checkpoints
         and the catch-up run there already (a PASSIVE checkpoint never waits for a lock), and the
         close of the loop's connection takes no lock.
Rule 6.  A failed transaction rolls back as a whole (:func:`apply_plan`) on either connection and is
         raised as :class:`~sidecar.store.errors.StoreError`: nothing half-written.
Rule 7.  **None and bytes bind through a registered adapter** (:func:`plain_binds`, run at import).
         CPython's ``sqlite3`` binds an ``int``, ``float``, ``str`` or ``bytearray`` directly, but
         sends every other parameter — ``None`` and ``bytes`` included — through its adapter
         protocol, which, finding no adapter, looks ``__adapt__`` up on ``PrepareProtocol`` and
         ``__conform__`` on the value (each a failed attribute lookup) before binding the value
         as it is: ~3,300 instructions a parameter, and an event's rows carry 15 of them.  An
         adapter registered for ``NoneType`` and ``bytes`` that returns its argument is found by
         the first dictionary lookup instead (~1,300).  What is bound is the same object: ``None``
         stays NULL, ``bytes`` a BLOB.  The registry is the ``sqlite3`` module's (process-wide),
         so aiosqlite's connection binds the same way.
"""
from __future__ import annotations

import asyncio
import logging
import sqlite3
from pathlib import Path
from typing import Any, Awaitable, Callable

from .errors import StoreError
from .ops import Guarded

log = logging.getLogger("sidecar.store")

# ops committed on the loop between two checkpoints on aiosqlite's thread: ~1,000 WAL pages (an
# event's 7 ops write ~28 pages alone, fewer in a group), what SQLite's own automatic checkpoint
# waits for
CHECKPOINT_OPS = 256
# bytes per page of a NEW database file (module rules, "Page size"); an existing file keeps its own
PAGE_SIZE = 2048
# WAL bytes past which a commit waits for a catch-up checkpoint so that the WAL starts over
# (module rules): 64 MiB, about a second of a steady 1,000 events/s
WAL_RESTART_BYTES = 64 << 20
# seconds a commit waits for a catch-up at most (module rules) — unless the WAL passed
# WAL_HARD_BYTES: then it waits until the catch-up is done, however slow the disk
CATCH_UP_WAIT_S = 0.005
WAL_HARD_BYTES = 4 * WAL_RESTART_BYTES

# the loop's connection's busy timeout (module rules, "A lock someone else holds"): the loop never
# waits for a lock; the store's own busy_timeout applies on aiosqlite's thread
LOOP_BUSY_TIMEOUT_MS = 0

Plan = list[tuple[str, list[tuple]]]  # compiled ops (sidecar.store.ops.compile_ops)


def _same(value: Any) -> Any:
    return value


def plain_binds() -> None:
    """Register :func:`_same` as the ``sqlite3`` adapter of ``None`` and ``bytes`` (module rules,
    Rule 7): the values bind exactly as without it, by a dictionary hit instead of two failed
    attribute lookups.  Idempotent; never for ``int``/``float``/``str``/``bytearray`` (an adapter
    for one of those makes ``sqlite3`` adapt every parameter of the process)."""
    sqlite3.register_adapter(type(None), _same)
    sqlite3.register_adapter(bytes, _same)


plain_binds()


def apply_plan(conn: sqlite3.Connection, plan: Plan) -> None:
    """The whole plan in one transaction on ``conn`` (the loop's connection, or aiosqlite's on
    its thread); any error rolls all of it back and propagates."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        for sql, rows in plan:
            if type(sql) is Guarded:  # its probe, then a plain insert (sidecar.store.ops, Rule 5)
                _guarded(conn, sql, rows)
            elif len(rows) == 1:
                conn.execute(sql, rows[0])
            else:
                conn.executemany(sql, rows)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def _guarded(conn: sqlite3.Connection, sql: Guarded, rows: list[tuple]) -> None:
    """Each row of a guarded insert in order: skipped when its probe finds a row, else inserted
    (an earlier row of the same plan is seen by a later one's probe, as in one statement each)."""
    insert, probe, width, guard = sql.insert, sql.probe, sql.width, sql.guard
    for row in rows:
        key = guard(row)
        if key is not None and conn.execute(probe, key).fetchone() is not None:
            continue
        conn.execute(insert, row[:width])


def apply_plan_off_loop(conn: sqlite3.Connection, plan: Plan) -> None:
    """:func:`apply_plan` on aiosqlite's connection (its thread), which is ``query_only`` while
    the loop commits: a commit the loop found locked by someone else (module rules, "A lock
    someone else holds"), waiting there up to that connection's ``busy_timeout``."""
    conn.execute("PRAGMA query_only = OFF")
    try:
        apply_plan(conn, plan)
    finally:
        conn.execute("PRAGMA query_only = ON")


def is_busy(exc: sqlite3.Error) -> bool:
    """``SQLITE_BUSY`` (any extended code): the lock is someone else's; nothing was written."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF == sqlite3.SQLITE_BUSY
    return "database is locked" in str(exc)


def open_writer(path: Path, synchronous: str) -> sqlite3.Connection:
    """The loop's own connection: the store's pragmas, no automatic checkpoint (its fsyncs would
    hold the loop; :class:`LoopWriter` runs them on aiosqlite's thread), and no waiting for a
    lock (:data:`LOOP_BUSY_TIMEOUT_MS`; module rules, "A lock someone else holds")."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=True, timeout=0)
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(LOOP_BUSY_TIMEOUT_MS)}")
        conn.execute(f"PRAGMA synchronous = {synchronous}")
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("PRAGMA wal_autocheckpoint = 0")
    except BaseException:
        conn.close()
        raise
    return conn


def readers_only(conn: sqlite3.Connection) -> None:
    """aiosqlite's connection once the loop commits: readers and checkpoints only (module rules)."""
    conn.execute("PRAGMA query_only = ON")


def passive_checkpoint(conn: sqlite3.Connection) -> tuple[int, int, int]:
    """``PRAGMA wal_checkpoint(PASSIVE)``: copy what it can of the WAL into the database, never
    waiting for (nor blocking) the loop's writer.  Returns (busy, WAL frames, frames copied)."""
    busy, frames, copied = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    return busy, frames, copied


class LoopWriter:
    """Commits on the loop's connection ``conn`` (module rules).  ``run(fn, *args)`` runs
    ``fn(aiosqlite's connection, *args)`` on aiosqlite's thread (:meth:`Store._run`, raising
    :class:`StoreError`); ``counters`` is the store's (``checkpoints``, ``restarts``,
    ``busy_retries``)."""

    def __init__(self, conn: sqlite3.Connection,
                 run: Callable[..., Awaitable[Any]], counters: Any) -> None:
        self.conn = conn
        self._run = run
        self._counters = counters
        self._since_checkpoint = 0  # ops committed since the last checkpoint began
        self._checkpoint: asyncio.Task | None = None  # the checkpoint on aiosqlite's thread
        self.restart_due = False  # a checkpoint left the WAL long: the next commit catches up
        self._restarts = 0  # catch-ups so far (a checkpoint begun before one does not ask again)
        self._closed = False
        page = conn.execute("PRAGMA page_size").fetchone()[0]
        self._restart_frames = max(1, WAL_RESTART_BYTES // page)  # WAL frames of that many bytes
        self._hard_frames = max(1, WAL_HARD_BYTES // page)
        self._wal_frames = 0  # frames in the WAL at the last checkpoint's end
        self._off_loop = 0  # commits on aiosqlite's thread not yet ended (module rules, "Order")

    async def commit(self, plan: Plan, n_ops: int) -> None:
        """``plan`` in one transaction on the loop (after a catch-up when one is due); raises
        :class:`StoreError` — then nothing of it was written."""
        if self.restart_due:
            await self._catch_up()
        if self._closed:
            raise StoreError("store is closed")
        if self._off_loop:  # behind a retried commit: there too, in order (module rules)
            await self._commit_off_loop(plan)
            return
        try:
            apply_plan(self.conn, plan)
        except sqlite3.Error as exc:
            if not is_busy(exc):
                raise StoreError(f"{type(exc).__name__}: {exc}") from exc
            self._counters.busy_retries += 1
            await self._commit_off_loop(plan)
            return
        self._since_checkpoint += n_ops
        if self._since_checkpoint >= CHECKPOINT_OPS and self._checkpoint is None:
            self._since_checkpoint = 0
            self._counters.checkpoints += 1
            self._checkpoint = asyncio.get_running_loop().create_task(
                self._checkpoint_wal(self._restarts), name="sqlite-checkpoint")

    async def _commit_off_loop(self, plan: Plan) -> None:
        """``plan`` on aiosqlite's thread (:func:`apply_plan_off_loop`), which may wait for the
        lock up to the store's ``busy_timeout``; the loop writes again only once it ended — also
        when the awaiting task is cancelled (module rules, "Order").  Raises StoreError."""
        self._off_loop += 1
        done = asyncio.ensure_future(self._run(apply_plan_off_loop, plan))

        def ended(fut: asyncio.Future) -> None:
            self._off_loop -= 1
            if not fut.cancelled():
                fut.exception()  # retrieved: the awaiting task may have been cancelled

        done.add_done_callback(ended)
        await asyncio.shield(done)

    def close(self) -> None:
        """Close the loop's connection (at once: it is never the last one, so it does not
        checkpoint); a checkpoint in flight finishes on aiosqlite's thread before its close."""
        self._closed = True
        self.conn.close()

    async def _checkpoint_wal(self, restarts: int) -> None:
        """A checkpoint on aiosqlite's thread; when it leaves more than :data:`WAL_RESTART_BYTES`,
        the next commit catches up first (unless one did since this began).  A failure is
        logged — the next one, or the close, checkpoints what it left."""
        try:
            _, frames, _ = await self._run(passive_checkpoint)
            self._wal_frames = frames
            if frames >= self._restart_frames and restarts == self._restarts:
                self.restart_due = True
        except StoreError as exc:
            if not self._closed:
                log.warning("WAL checkpoint failed (the next one retries): %s", exc)
        finally:
            self._checkpoint = None

    async def _catch_up(self) -> None:
        """A checkpoint of what the last background one left, so that the commit which follows
        finds every frame copied and starts the WAL over — awaited at most
        :data:`CATCH_UP_WAIT_S` while the WAL is under :data:`WAL_HARD_BYTES` (module rules);
        one not done by then goes on beside the commit and asks again when it ends."""
        self.restart_due = False
        self._restarts += 1
        self._counters.restarts += 1
        task = self._checkpoint
        if task is None:  # (none in flight, as a finished one asked for this)
            self._counters.checkpoints += 1
            task = self._checkpoint = asyncio.get_running_loop().create_task(
                self._checkpoint_wal(self._restarts), name="sqlite-checkpoint")
        hard = self._wal_frames >= self._hard_frames
        done, _ = await asyncio.wait({task}, timeout=None if hard else CATCH_UP_WAIT_S)
        if done:  # every frame copied before this commit: it starts the WAL over, ask no more
            self.restart_due = False
        else:
            self._counters.catch_up_timeouts += 1


__all__ = ["CATCH_UP_WAIT_S", "CHECKPOINT_OPS", "LOOP_BUSY_TIMEOUT_MS", "PAGE_SIZE", "WAL_HARD_BYTES",
           "WAL_RESTART_BYTES", "LoopWriter", "apply_plan", "apply_plan_off_loop", "is_busy", "plain_binds",
           "open_writer", "passive_checkpoint", "readers_only"]
