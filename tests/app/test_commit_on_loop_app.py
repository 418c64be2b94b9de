"""The app with its store committing on the loop (sidecar/store/writer.py;
issue 11): the wall clock's ordering rules hold on that path too — no ``task.created`` before
the commit that holds its task, also when that commit first waits for a WAL catch-up (a new
await before the transaction, bounded unless the WAL is past its hard bound), and a commit SQLite itself refuses on the loop's connection is a
failed step: nothing sent, every frame -32603, the process stops, a restart finds nothing."""
from __future__ import annotations

import asyncio
import sqlite3
import threading

from bridge.errors import InternalError
from sidecar.store import writer as wmod

from tests.app.test_step_groups import TU, Run, event
from tests.store.test_commit_under_a_foreign_lock import ForeignLock, _longest_stall, stall_bound


def _tasks_in_sqlite(path) -> list[str]:
    c = sqlite3.connect(path / "sidecar.db")
    try:
        return [r[0] for r in c.execute("SELECT ru FROM tasks ORDER BY ru")]
    finally:
        c.close()


async def test_the_store_of_a_serving_app_commits_on_the_loop(tmp_path):
    run = await Run(tmp_path).start()
    try:
        assert run.store.commits_on_loop
        hops = run.store.counters.hops
        await run.app._handle_group("platform.event", [event(i) for i in range(3)])
        assert run.store.counters.hops == hops  # the group's commit made no thread hop
        assert run.created() == ["c-ru-0", "c-ru-1", "c-ru-2"]
    finally:
        await run.stop()


class _BoundEndsOnCue:
    """``asyncio`` for the writer, but its catch-up's bound (``asyncio.wait(..., timeout=s)``)
    ends when the test sets ``over``, not after ``s`` seconds of the clock: a loaded machine
    that took the checkpoint thread 0.2 s to start once had the bound over before the test
    looked (issue 18 item 2).  ``timeouts``: each wait's ``timeout``."""

    def __init__(self) -> None:
        self.over = asyncio.Event()
        self.timeouts: list[float | None] = []

    def __getattr__(self, name):
        return getattr(asyncio, name)

    async def wait(self, fs, timeout=None):
        self.timeouts.append(timeout)
        if timeout is None:
            return await asyncio.wait(fs)
        cue = asyncio.ensure_future(self.over.wait())
        try:
            await asyncio.wait({*fs, cue}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            cue.cancel()
        return {f for f in fs if f.done()}, {f for f in fs if not f.done()}


async def _group_behind_a_slow_catch_up(tmp_path, monkeypatch, *, hard: bool):
    """A group whose commit is due a WAL catch-up while the disk holds the checkpoint: what was
    sent, committed and answered while the checkpoint stays held (after the commit's wait)."""
    release = threading.Event()
    entered = asyncio.Event()
    loop = asyncio.get_running_loop()
    real = wmod.passive_checkpoint

    def slow_checkpoint(conn):  # a checkpoint held up by a slow disk (the minute: so a failed test ends)
        loop.call_soon_threadsafe(entered.set)
        release.wait(60)
        return real(conn)

    monkeypatch.setattr(wmod, "passive_checkpoint", slow_checkpoint)
    bound = _BoundEndsOnCue()
    monkeypatch.setattr(wmod, "asyncio", bound)
    run = await Run(tmp_path).start()
    try:
        writer = run.store._writer
        writer.restart_due = True  # a checkpoint left the WAL long: the next commit catches up
        if hard:
            writer._wal_frames = writer._hard_frames  # ... and past the hard bound
        group = asyncio.ensure_future(run.app._handle_group("platform.event", [event(0), event(1)]))
        async with asyncio.timeout(30):
            await entered.wait()
        await asyncio.sleep(0.1)  # the loop runs on while the commit waits
        assert not group.done()
        assert run.log == []  # nothing sent, nothing committed
        assert await asyncio.to_thread(_tasks_in_sqlite, tmp_path) == []
        assert bound.timeouts == [None if hard else wmod.CATCH_UP_WAIT_S]
        bound.over.set()  # the commit's bound is over
        if hard:  # disk space before latency: the commit waits for the catch-up
            await asyncio.sleep(0.1)
            assert not group.done() and run.log == []
            release.set()
        async with asyncio.timeout(30):
            out = await group
        assert [o["ok"] for o in out] == [True, True]
        assert [e[0] for e in run.log] == ["commit", "note", "note"]
        assert run.created() == ["c-ru-0", "c-ru-1"]
        assert run.store.counters.restarts == 1
        assert run.store.counters.catch_up_timeouts == (0 if hard else 1)
    finally:
        release.set()
        await run.stop()


async def test_a_group_waits_a_bounded_time_for_a_wal_catch_up_and_sends_nothing_before_its_commit(
        tmp_path, monkeypatch):
    """The catch-up runs on aiosqlite's thread while the loop goes on; the group's commit waits
    for it at most CATCH_UP_WAIT_S (an fsync on a busy disk once took 386 ms), then commits
    beside it — its notes and answers only after that commit."""
    await _group_behind_a_slow_catch_up(tmp_path, monkeypatch, hard=False)


async def test_past_the_hard_bound_a_group_waits_for_the_catch_up_itself(tmp_path, monkeypatch):
    await _group_behind_a_slow_catch_up(tmp_path, monkeypatch, hard=True)


async def test_a_commit_sqlite_refuses_on_the_loop_is_a_failed_step(tmp_path):
    """Not an injected StoreError: the loop's own connection fails beneath the commit."""
    run = await Run(tmp_path).start()
    try:
        run.store._writer.conn.execute("PRAGMA query_only = ON")  # SQLite now refuses every write
        out = await run.app._handle_group("platform.event", [event(i) for i in range(3)])
        assert all(isinstance(o, InternalError) for o in out), out
        assert run.log == []  # nothing committed, nothing sent
        assert run.app.failed is not None and run.app.fatal.is_set()
        alone = await run.app._handle_group("platform.event", [event(7), event(8)])
        assert all(isinstance(o, InternalError) and "stopped after a failed step" in o.message
                   for o in alone)
        assert run.log == []
    finally:
        run.store._writer.conn.execute("PRAGMA query_only = OFF")
        await run.stop()
    assert _tasks_in_sqlite(tmp_path) == []  # a restart finds none of the group's tasks
    run2 = await Run(tmp_path).start()
    try:
        assert await run2.app.handle("tasks.list", {"tu": TU}) == []
    finally:
        await run2.stop()


async def test_a_group_whose_commit_finds_another_process_s_write_lock_leaves_the_loop_running(
        tmp_path):
    """Breaker 16: a foreign ``BEGIN IMMEDIATE`` on sidecar.db.  The group's commit waits for it
    off the loop (sidecar/store/writer.py, "A lock someone else holds"): other frames are served
    meanwhile, nothing is sent or committed before the group's commit, and after the release the
    commit lands and its notes follow, in order."""
    run = await Run(tmp_path).start()
    try:
        lock = await ForeignLock(tmp_path / "sidecar.db").take()
        try:
            group = asyncio.ensure_future(
                run.app._handle_group("platform.event", [event(0), event(1)]))
            stall = await _longest_stall(0.5)
            assert stall < stall_bound(5.0), f"the loop stopped for {stall:.2f} s behind the foreign lock"
            assert not group.done()
            assert run.log == []  # nothing sent, nothing committed
            assert await asyncio.to_thread(_tasks_in_sqlite, tmp_path) == []
        finally:
            await lock.release()
        out = await asyncio.wait_for(group, 5)
        assert [o["ok"] for o in out] == [True, True]
        assert [e[0] for e in run.log] == ["commit", "note", "note"]
        assert run.created() == ["c-ru-0", "c-ru-1"]
        assert run.store.counters.busy_retries == 1
        assert run.app.failed is None
    finally:
        await run.stop()
