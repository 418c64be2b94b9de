"""``python -m bench.stage_probe OUT.json serve ...``: ``sidecar serve`` with timestamps at each
stage of a ``platform.event``'s way to its ``task.created`` (issue 11, the wall-clock latency).

Used by :func:`bench.bridge_bench.latency` with ``stages=True`` (``python -m bench --only latency
--stages``).  Not a production path: it wraps a few methods of the running process (the bridge's
inbound queue, the store's commit and its connection-thread function, the bridge's notify, the
socket send) and, at exit, writes what they saw to ``OUT.json``.  Every stamp is
``time.perf_counter()`` — CLOCK_MONOTONIC on Linux, one clock for every process of the machine,
so the bench's own send / receive stamps line up with the sidecar's.

What is recorded (lists; the k-th entry of a per-event list belongs to the k-th
``platform.event`` frame, which the bench sends over one connection in order):

* ``queued`` — the reader put the frame in the inbound queue (just after ``ws.recv`` and the
  JSON-RPC decode); ``taken`` — the worker took it off the queue;
* ``notified`` — ``task.created`` appended to the outbound stream; ``written`` — the socket
  send of that frame returned (websockets wrote it to the transport); ``commit_of`` — the
  index of the last commit that ended before the note (the group's commit);
* per commit: ``start`` (on the loop, ops compiled next), ``thread_start`` / ``thread_end`` (the
  transaction, BEGIN … COMMIT — on aiosqlite's thread, or on the loop, when the time from
  ``start`` is a WAL catch-up's wait: :mod:`sidecar.store.writer`) and ``thread_cpu`` (its CPU
  seconds: the rest of ``thread`` is waiting — for the GIL, a CPU, the disk), ``end`` (back on
  the loop), ``ops``;
* per group handed to :class:`sidecar.app.step_groups.StepGroups`: its size;
* ``gc``: ``(start, duration, generation, collected, CPU seconds)`` of every collection
  (``gc.callbacks``), and the tracked objects per generation at exit;
* ``threads``: CPU seconds (user + system) per native thread when the store began to close,
  the connection thread's id as ``db_thread`` (None when every commit ran on the loop);
* ``store``: the store's counters (hops, commits, ops), its background checkpoints and the
  commits that waited for a WAL catch-up, the WAL's size when the store began to close.

``BENCH_COMMIT_ON_LOOP=0`` / ``1`` in the environment opens the store with commits on aiosqlite's
thread / on the loop (:meth:`sidecar.store.db.Store.open` ``commit_on_loop``), for an A/B run;
``BENCH_PAGE_SIZE=4096`` creates the bench's new database with that page size instead of
:data:`sidecar.store.writer.PAGE_SIZE`.
"""
from __future__ import annotations

import atexit
import gc
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

_clock = time.perf_counter


class Probe:
    def __init__(self, out: Path) -> None:
        self.out = out
        self.queued: list[float] = []
        self.taken: list[float] = []
        self.notified: list[float] = []
        self.commit_of: list[int] = []
        self.written: list[float] = []
        self.commits: list[dict[str, Any]] = []
        self.groups: list[int] = []
        self.gc: list[tuple[float, float]] = []
        self.db_thread: int | None = None
        self.store: Any = None
        self._gc_start = self._gc_cpu = 0.0
        self.threads: dict[str, float] = {}
        self.wal_bytes: int | None = None  # the WAL's size when the store began to close

    def on_gc(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._gc_start, self._gc_cpu = _clock(), time.thread_time()
        else:
            self.gc.append((self._gc_start, _clock() - self._gc_start, info.get("generation"),
                            info.get("collected"), time.thread_time() - self._gc_cpu))

    def sample_threads(self) -> None:
        """CPU seconds per native thread now (before the store's close ends its thread)."""
        threads: dict[str, float] = {}
        tck = os.sysconf("SC_CLK_TCK")
        try:
            for tid in os.listdir("/proc/self/task"):
                fields = Path(f"/proc/self/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
                threads[tid] = (int(fields[11]) + int(fields[12])) / tck
        except OSError:
            pass
        self.threads = threads

    def dump(self) -> None:
        if not self.threads:
            self.sample_threads()
        threads = self.threads
        data = {"queued": self.queued, "taken": self.taken, "notified": self.notified,
                "commit_of": self.commit_of, "written": self.written, "commits": self.commits,
                "groups": self.groups, "gc": self.gc, "threads": threads,
                "gc_objects": [len(gc.get_objects(g)) for g in range(3)],
                "gc_frozen": gc.get_freeze_count(),
                "main_thread": threading.main_thread().native_id, "db_thread": self.db_thread,
                "store": self.store.counters.as_dict() if self.store is not None else None,
                "checkpoints": getattr(getattr(self.store, "counters", None), "checkpoints", None),
                "restarts": getattr(getattr(self.store, "counters", None), "restarts", None),
                "wal_bytes": self.wal_bytes}
        self.out.write_text(json.dumps(data), encoding="utf-8")


def install(out: Path) -> Probe:
    """Wrap the stages' methods (module docstring); returns the probe that collects."""
    from websockets.asyncio.connection import Connection

    from bridge.inbound import InboundQueue
    from bridge.server import BridgeServer
    from sidecar.app.step_groups import StepGroups
    from sidecar.store import db as dbmod
    from sidecar.store import writer as wmod

    probe = Probe(out)
    gc.callbacks.append(probe.on_gc)

    put_nowait, get_nowait = InboundQueue.put_nowait, InboundQueue.get_nowait

    def put(self, item):
        if item[1].method == "platform.event":
            probe.queued.append(_clock())
        return put_nowait(self, item)

    def get(self):
        item = get_nowait(self)
        if item[1].method == "platform.event":
            probe.taken.append(_clock())
        return item

    InboundQueue.put_nowait, InboundQueue.get_nowait = put, get

    notify = BridgeServer.notify

    def notify_probe(self, method, params=None):
        if method == "task.created":
            probe.notified.append(_clock())
            probe.commit_of.append(len(probe.commits) - 1)
        return notify(self, method, params)

    BridgeServer.notify = notify_probe

    send = Connection.send

    async def send_probe(self, message, text=None):
        await send(self, message, text=text)
        if isinstance(message, (bytes, str)) and "task.created" in (
                message if isinstance(message, str) else message[:64].decode("utf-8", "replace")):
            probe.written.append(_clock())

    Connection.send = send_probe

    apply = wmod.apply_plan

    def apply_probe(conn, plan):
        c = probe.commits[-1] if probe.commits else None
        if probe.db_thread is None and threading.current_thread() is not threading.main_thread():
            probe.db_thread = threading.get_native_id()  # aiosqlite's (None: commits on the loop)
        t0, cpu0 = _clock(), time.thread_time()
        try:
            return apply(conn, plan)
        finally:
            if c is not None and "thread_start" not in c:
                c["thread_start"], c["thread_end"] = t0, _clock()
                c["thread_cpu"] = time.thread_time() - cpu0

    wmod.apply_plan = apply_probe
    commit = dbmod.Store.commit

    async def commit_probe(self, ops):
        probe.store = self
        c = {"start": _clock(), "ops": len(ops)}
        probe.commits.append(c)
        try:
            return await commit(self, ops)
        finally:
            c["end"] = _clock()

    dbmod.Store.commit = commit_probe
    close = dbmod.Store.close

    async def close_probe(self):
        probe.sample_threads()
        try:
            probe.wal_bytes = self.path.with_name(self.path.name + "-wal").stat().st_size
        except OSError:
            pass
        probe.store = self
        return await close(self)

    dbmod.Store.close = close_probe
    if os.environ.get("BENCH_PAGE_SIZE"):  # A/B of a new database file's page size
        wmod.PAGE_SIZE = int(os.environ["BENCH_PAGE_SIZE"])
    on_loop = os.environ.get("BENCH_COMMIT_ON_LOOP")  # "0" / "1": A/B of the store's commit path
    if on_loop in ("0", "1"):
        open_ = dbmod.Store.open.__func__

        async def open_probe(cls, path, **kw):
            return await open_(cls, path, commit_on_loop=on_loop == "1", **kw)

        dbmod.Store.open = classmethod(open_probe)
    handle = StepGroups.handle

    async def handle_probe(self, method, params):
        probe.groups.append(len(params))
        return await handle(self, method, params)

    StepGroups.handle = handle_probe
    atexit.register(probe.dump)
    return probe


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: python -m bench.stage_probe OUT.json serve [sidecar serve options]", file=sys.stderr)
        return 2
    install(Path(argv[0]))
    from sidecar.cli.main import main as sidecar_main
    profile = os.environ.get("BENCH_PROFILE")  # a path: cProfile the whole serve into it
    if not profile:
        return sidecar_main(argv[1:])
    import cProfile
    prof = cProfile.Profile()
    atexit.register(prof.dump_stats, profile)
    prof.enable()
    return sidecar_main(argv[1:])


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
