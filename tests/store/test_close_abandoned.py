"""A store close that is abandoned (``sidecar.app.aio.bounded`` gave up on it) can neither keep the
process alive nor lose a commit (the "shut down cleanly, still running 2 s later" flake of
``test_wall_clock``; :mod:`sidecar.store.db` "Closing").

A child process commits, keeps aiosqlite's connection thread busy for good (a checkpoint on a
disk that stopped answering), asks for the close with a bound, and returns from ``asyncio.run``.
aiosqlite ≥ 0.22 runs its connection thread as a non-daemon thread, which the interpreter joins
at exit: the child never ended.  Then the parent reopens the data dir — the child never closed
the connection, so the commits are in the WAL only — and finds every one of them."""
from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from sidecar.store import Store

ROOT = Path(__file__).resolve().parents[2]
STEPS = 25

CHILD = r"""
import asyncio, sys, threading
from sidecar.app.aio import bounded
from sidecar.domain.tasks import Task, TaskType
from sidecar.store import PutMeta, PutTask, Store

async def main(path, durability, steps):
    s = await Store.open(path, durability=durability)
    for i in range(steps):
        t = Task(task_id=f"t-{i}", type=TaskType.UNANSWERED_MESSAGE, project="golden", tu="tu",
                 ru=f"ru{i}", source="socket", created_at=float(i), deadline=i + 120.0)
        await s.commit([PutTask(t), PutMeta("last", str(i))])
    never = threading.Event()
    busy = asyncio.ensure_future(s.read(lambda conn: never.wait()))  # the thread never comes back
    await asyncio.sleep(0)  # the read is queued before the close
    await bounded(s.close(), 0.2, "database close")
    print("returned", flush=True)

asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
"""


@pytest.mark.parametrize("durability", ["normal", "full"])
async def test_an_abandoned_close_neither_holds_the_process_nor_loses_a_commit(tmp_path, durability):
    path = tmp_path / "data" / "sidecar.db"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    try:
        done = subprocess.run([sys.executable, "-c", CHILD, str(path), durability, str(STEPS)], cwd=ROOT,
                              env=env, capture_output=True, text=True, timeout=10)
    except subprocess.TimeoutExpired as exc:  # the interpreter waited for the database thread
        raise AssertionError(f"the process did not end after its database close was abandoned: "
                             f"{exc.stdout!r} {exc.stderr!r}") from None
    assert done.returncode == 0, done.stderr
    assert done.stdout == "returned\n"
    assert "database close did not finish" in done.stderr
    wal = path.with_name(path.name + "-wal")
    assert wal.stat().st_size > 0  # never checkpointed: the commits were in the WAL alone
    store = await Store.open(path)  # the lock died with the child; SQLite recovers the WAL
    try:
        assert await store.meta("last") == str(STEPS - 1)
        assert {t.task_id for t in await store.open_tasks("tu")} == {f"t-{i}" for i in range(STEPS)}
    finally:
        await store.close()
    with sqlite3.connect(path) as c:
        assert c.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
