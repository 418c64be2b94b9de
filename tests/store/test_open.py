"""Store.open: folder, pragmas, migrations, SchemaTooNew, the data-dir lock (DESIGN §3, §9)."""
from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from sidecar.store import DataDirLocked, MigrationError, PutMeta, SchemaTooNew, Store
from sidecar.store.migrations import MIGRATIONS, V1

ROOT = Path(__file__).resolve().parents[2]
TABLES = {"tasks", "favorites", "service_state", "sessions", "outbox", "meta", "decisions",  # v1, v2
          # v3: the router (sidecar.router.io.storage)
          "router_rules", "deliveries", "router_dedup", "router_throttle", "router_journal"}
SENDER_TABLES = {"sender_state", "sender_history", "sender_groups", "sender_assignments"}  # v4
TABLES |= SENDER_TABLES  # every table the released schema has
TABLES |= {"router_handovers"}  # v10: handed-over deliveries (sidecar.router.handover)


def tables(path: Path) -> set[str]:
    with sqlite3.connect(path) as c:
        return {r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type='table'")
                if not r[0].startswith("sqlite_")}


def run_py(code: str, *args: str, **kw) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-c", code, *args], env=env, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, **kw)


async def pragma(store: Store, name: str):
    return await store._run(lambda c: c.execute(f"PRAGMA {name}").fetchone()[0])


async def test_open_empty_creates_folder_schema_and_pragmas(tmp_path):
    path = tmp_path / "a" / "b" / "sidecar.db"
    async with await Store.open(path) as s:
        assert s.schema_version == len(MIGRATIONS) >= 3
        assert await pragma(s, "user_version") == len(MIGRATIONS)
        assert await pragma(s, "journal_mode") == "wal"
        assert await pragma(s, "synchronous") == 1  # NORMAL
        assert await pragma(s, "foreign_keys") == 1
        assert await pragma(s, "busy_timeout") == 5000
        assert path.with_suffix(".lock").read_text() == f"pid={os.getpid()}\n"
    assert tables(path) == TABLES | SENDER_TABLES


async def test_full_durability_and_bad_value(tmp_path):
    async with await Store.open(tmp_path / "s.db", durability="full") as s:
        assert await pragma(s, "synchronous") == 2  # FULL
        assert s.durability == "full"
    with pytest.raises(ValueError):
        await Store.open(tmp_path / "s.db", durability="extra")


async def test_reopen_keeps_data_and_migrates_nothing(tmp_path):
    path = tmp_path / "s.db"
    async with await Store.open(path) as s:
        await s.commit([PutMeta("owner", "op-1")])
    async with await Store.open(path) as s:
        assert s.schema_version == len(MIGRATIONS)
        assert await s.meta("owner") == "op-1"


async def test_schema_too_new_leaves_file_untouched_and_unlocked(tmp_path):
    path = tmp_path / "s.db"
    with sqlite3.connect(path) as c:
        c.execute("PRAGMA user_version = 99")  # far past any schema this code knows
    with pytest.raises(SchemaTooNew) as ei:
        await Store.open(path)
    assert (ei.value.found, ei.value.known) == (99, len(MIGRATIONS))
    with sqlite3.connect(path) as c:
        assert c.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
        assert c.execute("PRAGMA user_version").fetchone()[0] == 99
    with pytest.raises(SchemaTooNew):  # the lock was released: the same error, not DataDirLocked
        await Store.open(path)


async def test_migrations_run_one_transaction_each(tmp_path):
    path = tmp_path / "s.db"
    broken = (*MIGRATIONS, "CREATE TABLE extra (x INTEGER); CREATE TABLE broken (")
    n = len(MIGRATIONS)
    with pytest.raises(MigrationError) as ei:
        await Store.open(path, migrations=broken)
    assert ei.value.version == n + 1
    with sqlite3.connect(path) as c:  # the released ones committed, the broken one rolled back
        assert c.execute("PRAGMA user_version").fetchone()[0] == n
    assert tables(path) == TABLES
    async with await Store.open(path, migrations=(*MIGRATIONS, "CREATE TABLE extra (x INTEGER);")) as s:
        assert s.schema_version == n + 1
    assert tables(path) == TABLES | {"extra"}
    with pytest.raises(SchemaTooNew):  # the released code refuses the newer file
        await Store.open(path)


async def test_v1_file_is_upgraded_to_the_decision_log(tmp_path):
    path = tmp_path / "s.db"
    async with await Store.open(path, migrations=(V1,)) as s:
        await s.commit([PutMeta("owner", "op-1")])
    async with await Store.open(path) as s:
        assert s.schema_version == len(MIGRATIONS)
        assert await s.meta("owner") == "op-1"
        assert await s.decisions("tu", "ru") == []
    assert "decisions" in tables(path)


async def test_second_store_in_same_process_is_refused(tmp_path):
    path = tmp_path / "s.db"
    first = await Store.open(path)
    with pytest.raises(DataDirLocked) as ei:
        await Store.open(path)
    assert ei.value.lock_path == tmp_path / "s.lock"
    assert ei.value.holder == f"pid={os.getpid()}"
    await first.close()
    await first.close()  # idempotent
    async with await Store.open(path):
        pass


OPEN_AND_REPORT = """
import asyncio, sys
from sidecar.store import Store, DataDirLocked
async def main():
    try:
        s = await Store.open(sys.argv[1])
    except DataDirLocked as e:
        print("LOCKED", e.holder, flush=True); return
    print("OPEN", flush=True)
    if len(sys.argv) > 2:
        sys.stdin.readline()
    await s.close()
asyncio.run(main())
"""


async def test_second_process_is_refused(tmp_path):
    path = tmp_path / "s.db"
    async with await Store.open(path):
        p = run_py(OPEN_AND_REPORT, str(path))
        out, err = p.communicate(timeout=20)
        assert (p.returncode, out) == (0, f"LOCKED pid={os.getpid()}\n"), err


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX")
async def test_lock_of_a_killed_process_is_released(tmp_path):
    path = tmp_path / "s.db"
    p = run_py(OPEN_AND_REPORT, str(path), "hold")
    assert p.stdout.readline() == "OPEN\n"
    with pytest.raises(DataDirLocked) as ei:
        await Store.open(path)
    assert ei.value.holder == f"pid={p.pid}"
    p.send_signal(signal.SIGKILL)
    p.communicate(timeout=20)
    async with await Store.open(path) as s:
        assert s.schema_version == len(MIGRATIONS)
