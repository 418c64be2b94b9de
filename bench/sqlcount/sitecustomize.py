"""Loaded by every sidecar a :mod:`bench.shift_cost` replay starts (this folder is on their
``PYTHONPATH``; never on a production path): counts the SQLite statements each connection of the
process runs, by ``sqlite3.Connection.set_trace_callback`` (called once per statement execution,
so an ``executemany`` of n rows counts n), and keeps the totals in
``$BENCH_SQL_COUNT_DIR/<pid>.json`` — rewritten every :data:`EVERY` statements and at exit, so a
sidecar the scenario kills (a crash) loses at most that many.

Counted: ``statements`` (all), ``begins`` (``BEGIN …``: the write transactions — reads run in
autocommit and are no transaction of their own here), ``commits``, ``rollbacks``, ``writes``
(INSERT / UPDATE / DELETE / REPLACE executions), ``reads`` (SELECT), ``pragmas``.
``BENCH_SQL_DETAIL=1`` adds ``by_sql`` (executions per statement text, its first 70 characters)
and ``begin_callers`` (write transactions per chain of the project's functions that began them:
where the commits come from).
"""
from __future__ import annotations

import atexit
import json
import os
import sqlite3
import sys
from collections import Counter

EVERY = 500
_dir = os.environ.get("BENCH_SQL_COUNT_DIR")
_detail = os.environ.get("BENCH_SQL_DETAIL") == "1"
by_sql: Counter = Counter()
begin_callers: Counter = Counter()
counts: dict = {"statements": 0, "begins": 0, "commits": 0, "rollbacks": 0, "writes": 0, "reads": 0,
          "pragmas": 0}


def _save() -> None:
    if _dir:
        path = os.path.join(_dir, f"{os.getpid()}.json")
        out = dict(counts)
        if _detail:
            out["by_sql"] = dict(by_sql)
            out["begin_callers"] = dict(begin_callers)
        with open(path + ".tmp", "w") as f:
            json.dump(out, f)
        os.replace(path + ".tmp", path)


def _callers() -> str:
    """The project's functions on the stack (innermost first, at most 7), as one key."""
    names = []
    f = sys._getframe(2)
    while f is not None and len(names) < 7:
        fn = f.f_code.co_filename
        if "/sidecar/" in fn and "/store/" not in fn:
            names.append(f.f_code.co_name)
        f = f.f_back
    return " < ".join(names)


def _trace(sql: str) -> None:
    counts["statements"] += 1
    head = sql.lstrip()[:8].upper()
    if _detail:
        by_sql[" ".join(sql.split())[:70]] += 1
    if head.startswith("BEGIN"):
        counts["begins"] += 1
        if _detail:
            begin_callers[_callers()] += 1
    elif head.startswith("COMMIT") or head.startswith("END"):
        counts["commits"] += 1
    elif head.startswith("ROLLBACK"):
        counts["rollbacks"] += 1
    elif head.startswith(("INSERT", "UPDATE", "DELETE", "REPLACE")):
        counts["writes"] += 1
    elif head.startswith(("SELECT", "WITH")):
        counts["reads"] += 1
    elif head.startswith("PRAGMA"):
        counts["pragmas"] += 1
    if counts["statements"] % EVERY == 0:
        _save()


if _dir:
    _connect = sqlite3.connect

    def connect(*args, **kwargs):  # type: ignore[no-untyped-def]
        conn = _connect(*args, **kwargs)
        conn.set_trace_callback(_trace)
        return conn

    sqlite3.connect = connect  # type: ignore[assignment]
    atexit.register(_save)

# ``BENCH_PROFILE_DIR``: each sidecar runs under cProfile and dumps ``<pid>.prof`` there at exit
# (a killed one leaves none) — where the CPU goes, for the bench's own notes
_prof_dir = os.environ.get("BENCH_PROFILE_DIR")
if _prof_dir:
    import cProfile

    _prof = cProfile.Profile()
    _prof.enable()

    def _dump() -> None:
        _prof.disable()
        _prof.dump_stats(os.path.join(_prof_dir, f"{os.getpid()}.prof"))

    atexit.register(_dump)
