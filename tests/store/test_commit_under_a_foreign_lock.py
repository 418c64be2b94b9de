"""Another process holds SQLite's write lock (breaker 16, HIGH): the loop's commit
(sidecar/store/writer.py, "A lock someone else holds") never waits for it on the loop's thread —
it finds the lock taken at once and the same transaction is retried on aiosqlite's thread, which
waits up to ``busy_timeout`` while the loop runs on.  The commit completes after the release, in
order with the commits behind it, or fails as a whole (``StoreError``, nothing written) when the
lock outlasts ``busy_timeout``."""
from __future__ import annotations

import asyncio
import sqlite3
import threading
import time

import pytest

from sidecar.store import PutMeta, Store, StoreError


class ForeignLock:
    """``BEGIN IMMEDIATE`` on a connection of its own, on a thread of its own (as another
    process would hold it), until :meth:`release`."""

    def __init__(self, path) -> None:
        self._path = path
        self._taken = threading.Event()
        self._release = threading.Event()
        self._thread = threading.Thread(target=self._hold, daemon=True)

    def _hold(self) -> None:
        c = sqlite3.connect(self._path, isolation_level=None)
        try:
            c.execute("BEGIN IMMEDIATE")
            self._taken.set()
            self._release.wait(30)
            c.execute("COMMIT")
        finally:
            c.close()

    async def take(self) -> "ForeignLock":
        self._thread.start()
        assert await asyncio.to_thread(self._taken.wait, 5)
        return self

    async def release(self) -> None:
        self._release.set()
        await asyncio.to_thread(self._thread.join, 5)


def stall_bound(busy_timeout_s: float) -> float:
    """The longest stall a test accepts: half the wait a commit that waited for the lock on the
    loop would stop it for (busy_timeout) — that bug shows as a stall of all of it, while a
    loaded machine's own pauses stay well under (a 0.2 s bound failed under load: issue 18 item 2)."""
    return busy_timeout_s / 2


async def _longest_stall(during: float) -> float:
    """The longest gap (s) between ticks of a coroutine ticking every 10 ms for ``during`` s."""
    gaps, last, end = [], time.monotonic(), time.monotonic() + during
    while time.monotonic() < end:
        await asyncio.sleep(0.01)
        now = time.monotonic()
        gaps.append(now - last)
        last = now
    return max(gaps)


def _meta(path) -> dict[str, str]:
    c = sqlite3.connect(path)
    try:
        return dict(c.execute("SELECT key, value FROM meta WHERE key LIKE 'k%'"))
    finally:
        c.close()


@pytest.mark.parametrize("durability", ["normal", "full"])
async def test_the_loop_runs_on_while_another_connection_holds_the_write_lock(tmp_path, durability):
    store = await Store.open(tmp_path / "sidecar.db", durability=durability)
    try:
        lock = await ForeignLock(tmp_path / "sidecar.db").take()
        first = asyncio.ensure_future(store.commit([PutMeta("k1", "a")]))
        second = asyncio.ensure_future(store.commit([PutMeta("k2", "b")]))
        stall = await _longest_stall(0.6)
        assert stall < stall_bound(5.0), f"the loop stopped for {stall:.2f} s behind the foreign lock"
        assert not first.done() and not second.done()  # both wait for the lock, off the loop
        await lock.release()
        await asyncio.wait_for(asyncio.gather(first, second), 5)
        assert _meta(tmp_path / "sidecar.db") == {"k1": "a", "k2": "b"}
        await store.commit([PutMeta("k3", "c")])  # and the next commits as before
        assert await store.meta("k3") == "c"
    finally:
        await store.close()


async def test_commits_behind_a_retried_one_keep_their_order(tmp_path):
    store = await Store.open(tmp_path / "sidecar.db")
    try:
        lock = await ForeignLock(tmp_path / "sidecar.db").take()
        first = asyncio.ensure_future(store.commit([PutMeta("k1", "first")]))
        await asyncio.sleep(0.05)
        await lock.release()
        # the lock is free now; a commit made while the first one is still on its way must not
        # overtake it (the last write wins: it must be the second)
        await store.commit([PutMeta("k1", "second")])
        await first
        assert _meta(tmp_path / "sidecar.db") == {"k1": "second"}
        assert store.counters.busy_retries == 1  # the first found the lock; the second queued
    finally:
        await store.close()


async def test_a_lock_that_outlasts_busy_timeout_fails_the_commit_as_a_whole_off_the_loop(tmp_path):
    store = await Store.open(tmp_path / "sidecar.db", busy_timeout_ms=1500)
    try:
        lock = await ForeignLock(tmp_path / "sidecar.db").take()
        commit = asyncio.ensure_future(store.commit([PutMeta("k1", "a"), PutMeta("k2", "b")]))
        stall = await _longest_stall(0.3)
        assert stall < stall_bound(1.5)
        with pytest.raises(StoreError, match="locked"):
            await asyncio.wait_for(commit, 5)
        await lock.release()
        assert _meta(tmp_path / "sidecar.db") == {}
        await store.commit([PutMeta("k3", "c")])  # the loop's connection commits again
        assert _meta(tmp_path / "sidecar.db") == {"k3": "c"}
        assert store.commits_on_loop
    finally:
        await store.close()


async def test_a_cancelled_retry_still_commits_whole_and_keeps_the_loop_behind_it(tmp_path):
    """Cancelling the task that awaits a retried commit does not cancel the transaction on
    aiosqlite's thread (it commits after the release), and a later commit still goes behind it."""
    store = await Store.open(tmp_path / "sidecar.db")
    try:
        lock = await ForeignLock(tmp_path / "sidecar.db").take()
        first = asyncio.ensure_future(store.commit([PutMeta("k1", "first"), PutMeta("k2", "x")]))
        await asyncio.sleep(0.05)
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        second = asyncio.ensure_future(store.commit([PutMeta("k1", "second")]))
        await asyncio.sleep(0.05)
        assert not second.done()
        await lock.release()
        await asyncio.wait_for(second, 5)
        assert _meta(tmp_path / "sidecar.db") == {"k1": "second", "k2": "x"}
        assert store.counters.busy_retries == 1
    finally:
        await store.close()
