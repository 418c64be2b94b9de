"""The SQLite store (DESIGN §3 lock, §9 persistence; architecture "Store API").

Rule 1.  One ``Store`` per data dir and machine: :meth:`Store.open` takes an exclusive OS lock on
         ``path.with_suffix(".lock")`` first (:mod:`.lock`) and raises :class:`DataDirLocked` when
         another process — or another ``Store`` in this process — holds it.  :meth:`close` releases
         it; the OS releases it when the process dies, SIGKILL included.
Rule 2.  The database runs in WAL mode with ``foreign_keys=ON`` and a ``busy_timeout``.  Durability:
         ``"normal"`` (default) = ``synchronous=NORMAL``: a committed transaction survives a crash
         or SIGKILL of the sidecar (the WAL is written before COMMIT returns; only the fsync is
         deferred to checkpoints), which is the failure the sidecar must survive and the one the
         crash test proves.  A power loss or OS crash may lose the last few commits (never corrupt
         the file); deployments that need power-loss durability open with ``"full"``
         (``synchronous=FULL``, an fsync per commit, several times slower).  DESIGN §9 asks for FULL
         "or a documented and tested equivalent": this is that equivalent for process crashes.
         Migrations (:mod:`.migrations`) are applied on open, each in its own transaction; a file
         newer than this code raises :class:`SchemaTooNew` before anything is written to it.
Rule 3.  :meth:`commit` applies a list of ops (:mod:`.ops`) in ONE ``BEGIN IMMEDIATE … COMMIT``; any
         error rolls the whole batch back and raises :class:`StoreError` — nothing half-written.
         The batch is compiled to SQL first, so an unencodable op fails before the transaction
         begins; the runtime commits the steps of one advance or batch together (group commit,
         :mod:`sidecar.runtime.executor`).  :attr:`Store.counters` counts the thread hops, commits
         and ops.  Cancelling the awaiting task does not cancel the transaction: it still commits or
         rolls back as a whole.  **Commits on the loop** (default with ``durability="normal"``): the
         commit runs on the event loop's thread, on a stdlib ``sqlite3`` connection of its own, the
         store's only writer; its checkpoints run on aiosqlite's thread; a new file's page size is
         :data:`~sidecar.store.writer.PAGE_SIZE` — why and how in :mod:`sidecar.store.writer`.
         ``durability="full"`` fsyncs every commit, so there the commit stays on aiosqlite's thread
         (one hop per commit, not one per statement).  The loop never waits for a write lock another
         process holds: such a commit is retried on aiosqlite's thread, which waits ``busy_timeout``
         (:mod:`sidecar.store.writer`, "A lock someone else holds").
Rule 4.  Readers run as one function on aiosqlite's connection thread, each in its own read
         transaction, so a reader never sees half of a batch; once the loop commits, that connection
         is ``query_only`` — a write there would take SQLite's write lock from under the loop (which
         would then wait ``busy_timeout`` with the loop stopped), so SQLite refuses it instead.
         Times are unix seconds (UTC) floats passed in by the caller; this module never reads a
         clock.
Rule 5.  **Closing, and a close that is abandoned.**  The loop's connection closes first, at once
         (it is never the last one, so it does not checkpoint).  :meth:`close` queues the close on
         aiosqlite's connection thread behind whatever runs there (a commit, a checkpoint on a slow
         disk), so ``sidecar serve``'s 0.3 s bound on it may give up
         (:func:`sidecar.app.aio.bounded`).  Abandoning it loses nothing that was committed: in WAL
         mode a transaction is committed once its commit frame is in ``sidecar.db-wal`` — before
         COMMIT returns, on the OS's page cache with ``synchronous=NORMAL`` (survives the process
         ending, as here, or crashing) and fsynced with ``FULL`` (survives a power loss too) — and
         closing only checkpoints the WAL into the main file; the next open replays it.  A
         transaction still in flight is rolled back as a whole.  Hence the connection thread is a
         *daemon* thread (:func:`_daemon_thread`): aiosqlite ≥ 0.22 makes it a non-daemon thread,
         which the interpreter joins at exit, so an abandoned close kept the process alive until the
         thread's work ended — past the 2 s exit promise (the "shut down cleanly, still running"
         flake; ``tests/store/test_close_abandoned.py`` proves both halves).  ``sidecar serve`` also
         never closes its event loop under an abandoned close (:mod:`sidecar.app.aio`).
"""
from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote
from typing import Any, Callable, TypeVar

import aiosqlite
import msgspec

from sidecar.domain.favorites import Favorite
from sidecar.domain.tasks import Task

from .decisions import read_decisions
from .errors import SchemaTooNew, StoreError
from .integrity import locked_and_checked
from .lock import DirLock
from .migrations import MIGRATIONS, migrate, user_version
from . import writer as _w
from .ops import Op, compile_ops
from .rows import TASK_COLUMNS, SessionRow, decode_json, task_from_row

T = TypeVar("T")

log = logging.getLogger("sidecar.store")
_FAVORITE = msgspec.json.Decoder(Favorite)  # a favorites.data row, decoded once
_SYNCHRONOUS = {"normal": "NORMAL", "full": "FULL"}
def _daemon_thread(db: aiosqlite.Connection) -> None:
    """Make the not yet started connection thread of ``db`` a daemon thread (module rules,
    "Closing").  aiosqlite ≥ 0.22 keeps it in ``db._thread``; before, ``db`` was the thread."""
    thread = getattr(db, "_thread", db)
    if isinstance(thread, threading.Thread):
        thread.daemon = True
    else:  # a newer aiosqlite: an abandoned close may hold a process other than serve at exit
        log.warning("aiosqlite %s: no connection thread to make a daemon; an abandoned close "
                    "may delay this process's exit", getattr(aiosqlite, "__version__", "?"))


def _setup(conn: sqlite3.Connection, synchronous: str, busy_timeout_ms: int,
           migrations: Sequence[str]) -> tuple[int, int]:
    """Run on the connection thread: pragmas, then migrations."""
    conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
    found = user_version(conn)
    if found > len(migrations):  # check before WAL: a newer file is left untouched
        raise SchemaTooNew(found, len(migrations))
    if conn.execute("PRAGMA page_count").fetchone()[0] == 0:  # a new file: before WAL (rules)
        conn.execute(f"PRAGMA page_size = {int(_w.PAGE_SIZE)}")
    mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
    if str(mode).lower() != "wal":
        raise StoreError(f"could not switch the database to WAL (journal_mode={mode})")
    conn.execute(f"PRAGMA synchronous = {synchronous}")
    conn.execute("PRAGMA foreign_keys = ON")
    return migrate(conn, migrations)


@dataclass(slots=True)
class StoreCounters:
    """What a store did since it was opened: ``hops`` (functions run on aiosqlite's connection
    thread — each one thread hop of the event loop), ``commits`` (:meth:`Store.commit` calls
    that reached SQLite), the ``ops`` they carried — read by ``status`` (:meth:`as_dict`) and
    the benchmarks — and ``checkpoints`` / ``restarts``, the background WAL checkpoints begun and
    the commits that waited for a catch-up one (:mod:`sidecar.store.writer`; tests)."""

    hops: int = 0
    commits: int = 0
    ops: int = 0
    checkpoints: int = 0
    restarts: int = 0  # commits that waited for a catch-up checkpoint (sidecar.store.writer)
    catch_up_timeouts: int = 0  # ... and went on before it was done
    busy_retries: int = 0  # loop commits that found the lock taken, retried off the loop

    def as_dict(self) -> dict[str, int]:
        return {"hops": self.hops, "commits": self.commits, "ops": self.ops}


class Store:
    """An open store.  Use :meth:`open` (or ``async with await Store.open(...)``)."""

    def __init__(self, path: Path, db: aiosqlite.Connection, lock: DirLock, durability: str,
                 schema_version: int, writer: sqlite3.Connection | None = None) -> None:
        self.path = path  # the database file
        self.durability = durability  # "normal" | "full"
        self.schema_version = schema_version  # PRAGMA user_version after migrations
        self._db: aiosqlite.Connection | None = db
        self.counters = StoreCounters()  # thread hops, commits, ops (status, benchmarks, tests)
        # the loop's own connection, every commit made on it (module rules, "Commits on the
        # loop"); None: commits hop onto aiosqlite's thread like the readers
        self._writer = _w.LoopWriter(writer, self._run, self.counters) if writer is not None else None
        self.commits_on_loop = writer is not None  # module rules, "Commits on the loop"
        self._lock = lock

    # ------------------------------------------------------------------ lifecycle
    @classmethod
    async def open(cls, path: Path | str, *, durability: str = "normal",
                   busy_timeout_ms: int = 5000,
                   migrations: Sequence[str] = MIGRATIONS,
                   commit_on_loop: bool | None = None) -> "Store":
        """Open (creating folder and file) and migrate the store at ``path``.

        ``commit_on_loop``: commit on the event loop's thread (module rules, "Commits on the
        loop"); None (default) does so with ``durability="normal"`` only — ``"full"`` fsyncs
        every commit, which must not hold the loop.

        Raises ``ValueError`` for an unknown ``durability``, :class:`DataDirLocked`, :class:`DatabaseDamaged`
        (``quick_check``, nothing written: :mod:`.integrity`), :class:`SchemaTooNew`, :class:`MigrationError`,
        or :class:`StoreError` (cause attached) for any other SQLite failure.  On failure nothing stays open and the lock is released.
        """
        if durability not in _SYNCHRONOUS:
            raise ValueError(f"durability must be 'normal' or 'full', not {durability!r}")
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        lock = locked_and_checked(path)  # before any connection that may write
        if commit_on_loop is None:
            commit_on_loop = durability == "normal"
        db: aiosqlite.Connection | None = None
        writer: sqlite3.Connection | None = None
        try:
            db = aiosqlite.connect(path, isolation_level=None)  # its thread starts when awaited
            _daemon_thread(db)
            await db
            _, version = await db._execute(_setup, db._conn, _SYNCHRONOUS[durability],
                                           busy_timeout_ms, migrations)
            if commit_on_loop:
                writer = _w.open_writer(path, _SYNCHRONOUS[durability])
                await db._execute(_w.readers_only, db._conn)
        except BaseException as exc:
            if writer is not None:
                writer.close()
            if db is not None:
                await db.close()
            lock.release()
            if isinstance(exc, sqlite3.Error):
                raise StoreError(f"cannot open store {path}: {exc}") from exc
            raise
        return cls(path, db, lock, durability, version, writer)

    async def close(self) -> None:
        """Close the connections and release the lock (idempotent).  The loop's connection
        closes first (at once: it is never the last one, so it does not checkpoint); the close of
        aiosqlite's connection — the last one, which checkpoints the WAL — queues behind a
        checkpoint in flight (module rules, "Closing")."""
        db, self._db = self._db, None
        writer, self._writer = self._writer, None
        try:
            if writer is not None:
                writer.close()
            if db is not None:
                await db.close()
        finally:
            self._lock.release()

    @property
    def closed(self) -> bool:
        return self._db is None

    async def __aenter__(self) -> "Store":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(sqlite3_connection, *args)`` on the connection thread."""
        db = self._db
        if db is None:
            raise StoreError("store is closed")
        self.counters.hops += 1
        try:
            return await db._execute(fn, db._conn, *args)
        except sqlite3.Error as exc:
            raise StoreError(f"{type(exc).__name__}: {exc}") from exc
        except ValueError as exc:  # aiosqlite: "Connection closed"
            if self._db is None or not db._running:
                raise StoreError("store is closed") from exc
            raise

    async def read(self, fn: Callable[..., T], *args: Any) -> T:
        """Run a reader ``fn(sqlite3.Connection, *args)`` of a process-wide component (its own
        tables, e.g. :mod:`sidecar.router.io.storage`) on the connection thread; errors as above."""
        return await self._run(fn, *args)

    # ------------------------------------------------------------------ writes
    async def commit(self, ops: list[Op]) -> None:
        """Apply ``ops`` (see :mod:`.ops`) in one transaction; all or nothing.

        Raises :class:`StoreError` (cause attached) when an op cannot be encoded or SQLite
        refuses one; then nothing of the batch is written.  An empty list is a no-op.
        """
        if not ops:
            return
        try:
            plan = compile_ops(ops)
        except (TypeError, ValueError, msgspec.EncodeError) as exc:
            raise StoreError(f"cannot encode op: {exc}") from exc
        self.counters.commits += 1
        self.counters.ops += len(ops)
        writer = self._writer
        if writer is None:
            await self._run(_w.apply_plan, plan)
            return
        if self._db is None:
            raise StoreError("store is closed")
        await writer.commit(plan, len(ops))

    # ------------------------------------------------------------------ readers: tasks
    async def open_tasks(self, tu: str | None = None) -> list[Task]:
        """Open tasks (of ``tu``, or of every TU), by (deadline, created_at, task_id)."""
        sql = f"SELECT {TASK_COLUMNS} FROM tasks WHERE closed_at IS NULL"
        args: tuple = ()
        if tu is not None:
            sql += " AND tu = ?"
            args = (tu,)
        sql += " ORDER BY deadline, created_at, task_id"
        return await self._run(lambda c: [task_from_row(r) for r in c.execute(sql, args)])

    async def task(self, task_id: str) -> Task | None:
        sql = f"SELECT {TASK_COLUMNS} FROM tasks WHERE task_id = ?"

        def read(c: sqlite3.Connection) -> Task | None:
            r = c.execute(sql, (task_id,)).fetchone()
            return None if r is None else task_from_row(r)

        return await self._run(read)

    async def tasks_for(self, tu: str, since: float, *, ru: str | None = None,
                        type: str | None = None) -> list[Task]:
        """History of ``tu``: every task still open or closed at/after ``since`` (unix seconds),
        optionally of one ``ru`` and/or ``type``; by (created_at, task_id)."""
        sql = f"SELECT {TASK_COLUMNS} FROM tasks WHERE tu = ?"
        args: list = [tu]
        if ru is not None:
            sql += " AND ru = ?"
            args.append(ru)
        if type is not None:
            sql += " AND type = ?"
            args.append(getattr(type, "value", type))
        sql += " AND (closed_at IS NULL OR closed_at >= ?) ORDER BY created_at, task_id"
        args.append(since)
        return await self._run(lambda c: [task_from_row(r) for r in c.execute(sql, args)])

    # ------------------------------------------------------------------ readers: state
    async def favorites(self, tu: str) -> dict[str, Favorite]:
        """``{ru: Favorite (incl. markers)}`` of ``tu``, each row decoded once, straight into the
        frozen value.  A row that is not one (written by hand, or by a future version) is logged
        and left out: the login still succeeds and Stack's startup data lists the favorite."""
        sql = "SELECT ru, data FROM favorites WHERE tu = ? ORDER BY ru"

        def read(c: sqlite3.Connection) -> dict[str, Favorite]:
            out: dict[str, Favorite] = {}
            for ru, data in c.execute(sql, (tu,)):
                try:
                    out[ru] = _FAVORITE.decode(data)
                except (msgspec.ValidationError, msgspec.DecodeError) as exc:
                    log.warning("favorite row %s/%s is unreadable, left out: %s", tu, ru, exc)
            return out

        return await self._run(read)

    async def states(self, tu: str, scope: str) -> dict[str, Any]:
        """``{key: value}`` of ``(tu, scope)`` in :class:`PutState`."""
        sql = "SELECT key, value FROM service_state WHERE tu = ? AND scope = ? ORDER BY key"
        return await self._run(
            lambda c: {k: decode_json(v) for k, v in c.execute(sql, (tu, scope))})

    async def all_states(self, tu: str) -> dict[str, dict[str, Any]]:
        """``{scope: {key: value}}`` of every service-state scope of ``tu`` — what a login loads,
        so a service's new scope is restored without a list to keep in step."""
        sql = "SELECT scope, key, value FROM service_state WHERE tu = ? ORDER BY scope, key"

        def read(c: sqlite3.Connection) -> dict[str, dict[str, Any]]:
            out: dict[str, dict[str, Any]] = {}
            for scope, key, value in c.execute(sql, (tu,)):
                out.setdefault(scope, {})[key] = decode_json(value)
            return out

        return await self._run(read)

    async def state(self, tu: str, scope: str, key: str, default: Any = None) -> Any:
        sql = "SELECT value FROM service_state WHERE tu = ? AND scope = ? AND key = ?"

        def read(c: sqlite3.Connection) -> Any:
            r = c.execute(sql, (tu, scope, key)).fetchone()
            return default if r is None else decode_json(r[0])

        return await self._run(read)

    async def sessions(self) -> list[SessionRow]:
        """Logged-in TUs, by tu."""
        sql = "SELECT tu, project, operator, logged_in_at FROM sessions ORDER BY tu"
        return await self._run(lambda c: [
            SessionRow(tu=r[0], project=r[1], operator=r[2], logged_in_at=r[3])
            for r in c.execute(sql)])

    async def meta(self, key: str) -> str | None:
        def read(c: sqlite3.Connection) -> str | None:
            r = c.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
            return None if r is None else r[0]

        return await self._run(read)

    # ------------------------------------------------------------------ readers: decision log
    async def decisions(self, tu: str, ru: str, since: float | None = None, *,
                        after_id: int | None = None, limit: int = -1) -> list[dict]:
        """The pair's decision-log rows at or after ``since`` (unix seconds) with an id after
        ``after_id``, at most ``limit`` (-1: all), in order
        (:func:`sidecar.store.decisions.read_decisions`)."""
        return await self._run(lambda c: read_decisions(c, tu, ru, since, after_id=after_id, limit=limit))

    # ------------------------------------------------------------------ readers: Stack writes
    async def pending_markers(self, tu: str) -> dict[tuple[str, str], Any]:
        """``tu``'s unacknowledged marker writes, newest per (ru, marker name) → value (``None``
        = cleared) — DESIGN §9: they win over Stack's startup data at login.  They are the
        pending deliveries of the router's ``stack`` channel, read by their structured
        columns (``tu``, ``ru``, the marker's name as ``subject``).  (The legacy outbox table is
        emptied into them by schema v6.)  A row queued before schema v5 whose ids needed quoting
        has no columns; it is read from its request path, the only place that knew them then."""
        routed = ("SELECT ru, subject, message, path FROM deliveries WHERE status = 'pending'"
                  " AND channel = 'stack' AND source = 'markers' AND (tu = ? OR tu IS NULL)"
                  " ORDER BY seq")

        def read(c: Any) -> dict[tuple[str, str], Any]:
            out: dict[tuple[str, str], Any] = {}
            for ru, name, body, path in c.execute(routed, (tu,)):
                if ru is None or name is None:
                    parsed = _legacy_marker_path(path or "")
                    if parsed is None or parsed[0] != tu:
                        continue
                    _, ru, name = parsed
                out[(ru, name)] = msgspec.json.decode(bytes(body)).get("value")
            return out

        return await self._run(read)


def _legacy_marker_path(path: str) -> tuple[str, str, str] | None:
    """``(tu, ru, name)`` of a pre-v5 marker row's path ``/v1/tus/{tu}/favorites/{ru}/markers/{name}``."""
    if not path.startswith("/v1/tus/"):
        return None
    tu, sep, rest = path[len("/v1/tus/"):].partition("/favorites/")
    ru, sep2, name = rest.partition("/markers/")
    if not (sep and sep2):
        return None
    return unquote(tu), unquote(ru), unquote(name)
