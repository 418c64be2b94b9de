"""A damaged database is found at open (DESIGN §3 "A damaged database …").

Rules
-----
* Every opener of ``sidecar.db`` — :meth:`sidecar.store.db.Store.open` (``sidecar serve``, the
  ``groups``/``senders`` changes) and the read-only CLIs (``why``, ``rules``, ``deliveries``,
  ``groups``/``senders`` list) — runs ``PRAGMA quick_check`` first and raises
  :class:`~sidecar.store.errors.DatabaseDamaged` when it reports anything but ``ok``, or when
  SQLite answers SQLITE_CORRUPT / SQLITE_NOTADB ("database disk image is malformed", "file is
  not a database") on the way.  The CLI prints its message as one stderr line and exits
  :data:`EXIT_DAMAGED` (README "Exit codes").
* Cost: quick_check reads every page once but skips the index-vs-table cross-check of
  ``integrity_check``, so it is linear in the file size — measured in ``docs/decisions.md``
  ("quick_check at open").
* **Never written to.**  The check runs on a connection of its own opened ``mode=ro``; with no
  ``-wal`` beside the file (a clean shutdown removed it) it is opened ``immutable=1`` as well, so
  SQLite creates no ``-wal``/``-shm`` either.  With a ``-wal`` (a crash left it) the check must
  read it — the committed transactions are there — and SQLite may rebuild the ``-shm`` (an
  index of the WAL, no data); the database file and the ``-wal`` stay byte for byte the same.
  Store.open runs it under the data-dir lock, so no sidecar writes meanwhile.
"""
from __future__ import annotations

import sqlite3
from pathlib import Path

from .errors import DatabaseDamaged
from .lock import DirLock

EXIT_DAMAGED = 7  # `sidecar serve` and the read-only CLIs on a damaged database (README)
_DAMAGE_CODES = {sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB}


def is_damage(exc: sqlite3.Error) -> bool:
    """True when ``exc`` is SQLite saying the file is damaged (its primary result code)."""
    code = getattr(exc, "sqlite_errorcode", None)
    return code is not None and (code & 0xFF) in _DAMAGE_CODES


def check(conn: sqlite3.Connection, path: Path) -> None:
    """Run ``PRAGMA quick_check`` on ``conn`` (the database at ``path``); raise
    :class:`DatabaseDamaged` naming its first finding.  Other SQLite errors propagate."""
    try:
        found = [r[0] for r in conn.execute("PRAGMA quick_check(3)")]
    except sqlite3.DatabaseError as exc:
        if is_damage(exc):
            raise DatabaseDamaged(path, str(exc)) from exc
        raise
    if found != ["ok"]:
        raise DatabaseDamaged(path, "quick_check: " + "; ".join(found))


def connect_readonly(path: Path) -> sqlite3.Connection:
    """``path`` opened read-only, never written to (module rules): ``immutable`` when no
    ``-wal`` is beside it."""
    uri = path.resolve().as_uri() + "?mode=ro"
    if not path.with_name(path.name + "-wal").exists():
        uri += "&immutable=1"
    return sqlite3.connect(uri, uri=True)


def open_checked(path: Path) -> sqlite3.Connection:
    """``path`` opened for a reader by :func:`connect_readonly`, after :func:`check`; raises
    :class:`DatabaseDamaged` (connection closed).  A running sidecar always has its ``-wal``
    open, so its file is read ``mode=ro`` through the WAL; ``immutable`` only when none is there
    (a sidecar that starts during the read and checkpoints before it ends is the one case that
    read could see torn — a CLI read, run again).  Nothing is created beside a file at rest."""
    conn = connect_readonly(path)
    try:
        conn.execute("PRAGMA busy_timeout = 5000")
        check(conn, path)
    except BaseException:
        conn.close()
        raise
    return conn


def check_file(path: Path) -> None:
    """:func:`check` on ``path`` if it exists and is not empty (a new data dir has nothing to
    check), on a connection of its own that writes nothing (:func:`connect_readonly`)."""
    if not path.is_file() or path.stat().st_size == 0:
        return
    conn = connect_readonly(path)
    try:
        check(conn, path)
    finally:
        conn.close()


def locked_and_checked(path: Path) -> DirLock:
    """The data dir's lock (:class:`~sidecar.store.lock.DirLock` on ``path.with_suffix(".lock")``),
    then :func:`check_file` under it; on :class:`DatabaseDamaged` (or any failure) the lock is
    released again.  What :meth:`sidecar.store.db.Store.open` and ``sidecar repair`` start with."""
    lock = DirLock.acquire(path.with_suffix(".lock"))
    try:
        check_file(path)
    except BaseException:
        lock.release()
        raise
    return lock
