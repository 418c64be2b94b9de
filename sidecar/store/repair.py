"""``sidecar repair --data-dir DIR``: the way out of a damaged database (DESIGN §3 "A damaged
database …", §9 restore).

Rules
-----
* It runs only on a database :mod:`.integrity` calls damaged (an intact one: "nothing done",
  exit 0) and only under the data dir's lock: while a sidecar runs there it refuses (exit 3).
* The damaged file is moved aside first, untouched, with the UTC instant in its name —
  ``sidecar.db`` → ``sidecar.damaged-20261201T211500Z.db``, its ``-wal`` and ``-shm`` renamed
  alike so SQLite still reads the three together (the WAL holds committed transactions).
* A fresh file is made by the normal migrations (:func:`sidecar.store.db._setup`) up to the
  damaged file's schema version, every table the schema has is copied from the damaged file as
  far as SQLite can read it (below), the later migrations run over the copy (they convert the
  data as at any upgrade), and the file is renamed to ``sidecar.db`` only when complete — a
  crash mid-repair leaves no half file under the real name.
* **Salvage per table** (Python's ``sqlite3``; the ``sqlite3`` shell's ``.recover`` is not on an
  operator's machine): read the table in key order (``rowid``, or the primary key of a
  ``WITHOUT ROWID`` table) until SQLite reports damage, then backwards from the end until damage
  or the rows already read; for a rowid table the gap between is probed for readable runs past
  the damaged pages (seek to ``rowid >= s`` for growing ``s``, bisected back to the first start
  that reads).  A row a constraint refuses is not copied; rows left without their foreign key
  parent are deleted.  The report says per table what was saved and which key range was lost.
* Restore: what is lost is what a new machine restores at login from Stack's startup data
  (markers, task history) and the handed-over deliveries (DESIGN §9); unacknowledged local writes
  in the lost range are lost with it (the report names the ``deliveries`` gap).

Exit codes: 0 repaired (the report names any loss) or nothing to do; 2 no database / bad
argument; 3 a sidecar holds the data dir; :data:`EXIT_NOTHING_SAVED` (8) nothing of the damaged
file could be read — it is still moved aside, the fresh empty file is in place, and the next
start restores from Stack alone.
"""
from __future__ import annotations

import argparse
import os
import sqlite3
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .errors import DatabaseDamaged, DataDirLocked, SchemaTooNew
from .integrity import check_file, connect_readonly
from .lock import DirLock
from .migrations import MIGRATIONS, migrate

EXIT_NOTHING_SAVED = 8
DB_NAME = "sidecar.db"
_SUFFIXES = ("", "-wal", "-shm")


@dataclass(slots=True)
class TableReport:
    """What one table kept: ``saved`` rows copied, ``lost`` key ranges that could not be read
    (text), ``refused`` rows a constraint refused, ``orphans`` rows deleted for a lost parent."""

    table: str
    saved: int = 0
    lost: list[str] = field(default_factory=list)
    refused: int = 0
    orphans: int = 0

    def line(self) -> str:
        out = f"  {self.table:<20} {self.saved:>7} rows saved"
        if self.lost:
            out += "; could not read " + ", ".join(self.lost)
        if self.refused:
            out += f"; {self.refused} unreadable rows left out"
        if self.orphans:
            out += f"; {self.orphans} rows dropped with their lost parent"
        return out


def add_parser(sub: Any) -> None:
    p = sub.add_parser("repair", help="move a damaged database aside and salvage what can be read",
                       description="Move the damaged sidecar.db of DIR aside (sidecar.damaged-<UTC>.db, "
                                   "untouched), copy what SQLite can still read of every table into a "
                                   "fresh sidecar.db, and say per table what was saved and what was not. "
                                   "The next start restores the rest from Stack.",
                       epilog="exit codes: 0 repaired (the report names any loss) or not damaged; "
                              "2 no database there; 3 a running sidecar holds the data dir; "
                              f"{EXIT_NOTHING_SAVED} nothing could be read (moved aside; the next "
                              "start restores from Stack alone)")
    p.add_argument("--data-dir", type=Path, help="the sidecar's data dir (default: per-OS app data)")


def run(args: argparse.Namespace) -> int:
    """The ``sidecar repair`` command; its exit code (module docstring)."""
    from sidecar.config import default_data_dir
    from sidecar.core.clock import WallClock

    db = Path(args.data_dir or default_data_dir()) / DB_NAME
    if not db.is_file():
        print(f"sidecar repair: bad argument --data-dir: no sidecar database at {db}", file=sys.stderr)
        return 2
    try:
        lock = DirLock.acquire(db.with_suffix(".lock"))
    except DataDirLocked as exc:
        print(f"sidecar repair: {exc}; stop that sidecar first", file=sys.stderr)
        return 3
    try:
        try:
            check_file(db)
        except DatabaseDamaged as exc:
            print(f"sidecar repair: {db} is damaged ({exc.detail})")
        else:
            print(f"sidecar repair: {db} is not damaged (quick_check ok); nothing done")
            return 0
        try:
            aside, reports = repair(db, WallClock().now())
        except SchemaTooNew as exc:
            print(f"sidecar repair: {exc}", file=sys.stderr)
            return 2
    finally:
        lock.release()
    print(f"sidecar repair: moved it aside to {aside.name} (with its -wal/-shm, if any); salvaged into a fresh {db.name}:")
    for r in reports:
        print(r.line())
    saved = sum(r.saved for r in reports)
    lost = [f"{r.table} {', '.join(r.lost)}" for r in reports if r.lost]
    print(f"sidecar repair: {saved} rows saved; " + (
        "could not save: " + "; ".join(lost) if lost else "nothing lost") +
        ". The next start restores markers and task history from Stack.")
    # 8 means nothing could be READ: a table read whole but empty is saved, not lost
    return 0 if saved or any(not r.lost for r in reports) else EXIT_NOTHING_SAVED


def move_aside(db: Path, now: float) -> Path:
    """Rename ``db`` and its ``-wal``/``-shm`` to ``<stem>.damaged-<UTC>.db…``; the new path."""
    stamp = datetime.fromtimestamp(now, UTC).strftime("%Y%m%dT%H%M%SZ")
    n, aside = 1, db.with_name(f"{db.stem}.damaged-{stamp}{db.suffix}")
    while any(aside.with_name(aside.name + s).exists() for s in _SUFFIXES):
        n += 1
        aside = db.with_name(f"{db.stem}.damaged-{stamp}-{n}{db.suffix}")
    # under the lock no sidecar opens it meanwhile; the file itself last, so a crash mid-move
    # leaves a sidecar.db that quick_check still refuses, never a moved file without its WAL
    for s in ("-wal", "-shm", ""):
        src = db.with_name(db.name + s)
        if src.exists():
            os.replace(src, aside.with_name(aside.name + s))
    return aside


def repair(db: Path, now: float) -> tuple[Path, list[TableReport]]:
    """Move ``db`` aside (at ``now``, unix seconds) and salvage it into a fresh ``db``; the
    moved-aside path and a report per table.  The caller holds the data dir's lock.  Raises
    :class:`SchemaTooNew` (before anything moved) for a file of a newer sidecar."""
    from .db import _setup

    probe = connect_readonly(db)
    try:
        version = probe.execute("PRAGMA user_version").fetchone()[0]
    except sqlite3.DatabaseError:
        version = len(MIGRATIONS)  # the header page is unreadable: salvage into today's schema
    finally:
        probe.close()
    if version > len(MIGRATIONS):
        raise SchemaTooNew(version, len(MIGRATIONS))
    version = version or len(MIGRATIONS)
    aside = move_aside(db, now)
    tmp = db.with_name(db.name + ".repairing")
    for s in _SUFFIXES:
        tmp.with_name(tmp.name + s).unlink(missing_ok=True)  # an earlier repair that crashed
    old = connect_readonly(aside)
    new = sqlite3.connect(tmp, isolation_level=None)
    try:
        _setup(new, "FULL", 5000, MIGRATIONS[:version])
        new.execute("PRAGMA foreign_keys = OFF")  # parents and children in any order; checked below
        tables = [r[0] for r in new.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")]
        new.execute("BEGIN")
        reports = [_salvage(old, new, t) for t in tables]
        for r in reports:
            _drop_orphans(new, r)
        new.execute("COMMIT")
        new.execute("PRAGMA foreign_keys = ON")
        migrate(new, MIGRATIONS)
    finally:
        old.close()
        new.close()
    os.replace(tmp, db)
    return aside, reports


def _drop_orphans(new: sqlite3.Connection, rep: TableReport) -> None:
    """Delete ``rep.table``'s rows whose foreign-key parent row was lost (a rowid table or not)."""
    t = _q(rep.table)
    for fk in new.execute(f"PRAGMA foreign_key_list({t})").fetchall():
        parent, child_col, parent_col = _q(fk[2]), _q(fk[3]), _q(fk[4])
        n = new.execute(f"DELETE FROM {t} WHERE {child_col} IS NOT NULL AND NOT EXISTS "
                        f"(SELECT 1 FROM {parent} p WHERE p.{parent_col} = {t}.{child_col})").rowcount
        rep.orphans += n
        rep.saved -= n


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _salvage(old: sqlite3.Connection, new: sqlite3.Connection, table: str) -> TableReport:
    """Copy what ``old`` can still read of ``table`` into ``new`` (module rules)."""
    rep = TableReport(table)
    try:
        info = old.execute(f"PRAGMA table_info({_q(table)})").fetchall()
    except sqlite3.DatabaseError as exc:
        rep.lost.append(f"the whole table ({exc})")
        return rep
    if not info:
        rep.lost.append("the whole table (not in the damaged file's schema)")
        return rep
    have = {r[1] for r in info}
    cols = [r[1] for r in new.execute(f"PRAGMA table_info({_q(table)})") if r[1] in have]
    try:
        old.execute(f"SELECT rowid FROM {_q(table)} LIMIT 0")
        key = ["rowid"]
    except sqlite3.OperationalError:  # WITHOUT ROWID: its primary key orders it
        key = [r[1] for r in sorted((r for r in info if r[5] > 0), key=lambda r: r[5])]
    reader = _Reader(old, table, key, cols)
    rows, broke = reader.forward(None)
    if broke:
        if rows:
            reader.creep(max(rows), rows)
        tail = reader.backward(rows)
        if tail:
            reader.creep(min(tail), tail, stop=rows, desc=True)
        if key == ["rowid"] and rows and tail:
            rows.update(reader.islands(max(rows), min(tail), rep))
        elif rows or tail:
            rep.lost.append(f"the rows between key {max(rows) if rows else 'start'} and "
                            f"{min(tail) if tail else 'end'}")
        else:
            rep.lost.append("every row (no page of the table could be read)")
        rows.update(tail)
    sql = (f"INSERT OR REPLACE INTO {_q(table)} ({', '.join(map(_q, cols))}) "
           f"VALUES ({', '.join('?' * len(cols))})")
    for k in sorted(rows):
        try:
            new.execute(sql, rows[k])
            rep.saved += 1
        except sqlite3.Error:
            rep.refused += 1
    return rep


class _Reader:
    """Reads of one table of the damaged file in key order, each stopped by the first damage
    SQLite reports.  Rows are ``{key tuple: column values}``."""

    def __init__(self, conn: sqlite3.Connection, table: str, key: list[str], cols: list[str]) -> None:
        self.conn, self.key, self.n = conn, key, len(key)
        self.select = f"SELECT {', '.join(map(_q, key) if key != ['rowid'] else key)}, " \
                      f"{', '.join(map(_q, cols))} FROM {_q(table)}"
        self.order = ", ".join(key if key == ["rowid"] else map(_q, key))

    def _read(self, sql: str, args: tuple, into: dict, stop: dict | None = None) -> bool:
        """Rows of ``sql`` into ``into`` until one in ``stop``; False when damage cut it short."""
        try:
            for r in self.conn.execute(sql, args):
                k = tuple(r[:self.n])
                if stop is not None and k in stop:
                    return True
                into[k] = r[self.n:]
        except sqlite3.DatabaseError:
            return False
        return True

    def forward(self, start: int | None, upto: int | None = None) -> tuple[dict, bool]:
        """The rows from rowid ``start`` (None: the first row) below ``upto``, and whether
        damage cut the read short."""
        where = "" if start is None else f" WHERE rowid >= {int(start)}" + (
            "" if upto is None else f" AND rowid < {int(upto)}")
        out: dict = {}
        ok = self._read(f"{self.select}{where} ORDER BY {self.order}", (), out)
        return out, not ok

    def backward(self, seen: dict) -> dict:
        desc = ", ".join(f"{c} DESC" for c in self.order.split(", "))
        out: dict = {}
        self._read(f"{self.select} ORDER BY {desc}", (), out, seen)
        return out

    def creep(self, key: tuple, into: dict, stop: dict | None = None, desc: bool = False) -> None:
        """Rows after ``key`` (before it: ``desc``) one seek each, until damage, the end or a
        row in ``stop``.  Why: ``sqlite3`` steps one row ahead, so a scan that meets damage loses
        the last row it had read; a ``LIMIT 1`` seek reads it (and any after it that read)."""
        cols = "(" + ", ".join(self.order.split(", ")) + ")"
        order = ", ".join(f"{c} DESC" for c in self.order.split(", ")) if desc else self.order
        sql = f"{self.select} WHERE {cols} {'<' if desc else '>'} ({', '.join('?' * self.n)}) ORDER BY {order} LIMIT 1"
        while True:
            try:
                r = self.conn.execute(sql, key).fetchone()
            except sqlite3.DatabaseError:
                return
            if r is None or (stop is not None and tuple(r[:self.n]) in stop):
                return
            key = tuple(r[:self.n])
            into[key] = r[self.n:]

    def _first_from(self, s: int, upto: int) -> tuple | None:
        """The first row a seek to ``rowid >= s`` reads below ``upto``; None on damage or none
        (a garbage page may read as empty: only a row read proves the start good)."""
        try:
            return self.conn.execute(f"{self.select} WHERE rowid >= ? AND rowid < ? ORDER BY rowid LIMIT 1",
                                     (s, upto)).fetchone()
        except sqlite3.DatabaseError:
            return None

    def islands(self, lo: tuple, hi: tuple, rep: TableReport) -> dict:
        """Readable runs of rowids strictly between ``lo`` and ``hi`` (each a 1-tuple): probe
        starts ``lo + 2**k`` until one reads a row, bisect back to the first start that does, read
        on from that row; each unreadable stretch goes into ``rep.lost``."""
        out: dict = {}
        a, b = lo[0], hi[0]
        while a + 1 < b:
            bad, step, first = a, 1, None
            while a + step < b and (first := self._first_from(a + step, b)) is None:
                bad, step = a + step, step * 2
            good = min(a + step, b)
            while first is not None and bad + 1 < good:  # an earlier start that reads a row
                mid = (bad + good) // 2
                f = self._first_from(mid, b)
                if f is None:
                    bad = mid
                else:
                    good, first = mid, f
            end = b if first is None else int(first[0])  # rowids a+1 .. end-1 were not read
            if end - 1 > a:
                rep.lost.append(f"rowids {a + 1}–{end - 1} (at most {end - 1 - a} rows)"
                                if end - 1 > a + 1 else f"rowid {a + 1}")
            if first is None:
                break
            out[(end,)] = first[self.n:]
            run, broke = self.forward(end + 1, b)
            out.update(run)
            if not broke:  # read through to `hi`
                break
            a = max(run)[0] if run else end
            self.creep((a,), out, stop={hi: None})
            a = max(a, *(k[0] for k in out if k[0] < b))
        return out
