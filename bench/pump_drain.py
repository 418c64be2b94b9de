"""``python -m bench --only pump``: the delivery pump's drain rate and CPU per row against a Stack
backlog (issue 21 item 2, issue 24 lever 2), beside the raw sqlite3 and httpx figures of the same
run (:mod:`bench.limits`).

What is measured
----------------
* A real :class:`~sidecar.store.db.Store` (WAL, the serving durability) with ``n`` pending rows
  for one target — a ``journal`` (local file) or a ``webhook`` to a loopback receiver (the
  bare HTTP/1.1 server of :mod:`bench.limits`, in this process: its CPU is counted too) — beside
  ``backlog`` pending ``stack`` rows that no pass sends (no Stack configured: a long outage, or no
  Stack URL).
* The pump runs as the wall clock's pump loop does (:meth:`DeliveryPump.run_due` with
  ``detach=True``, the next pass when a landing wakes it), at a fixed instant (every row due).
* ``health``: the real sender-health gate plugged in as the app plugs it
  (:class:`~sidecar.senders.gate.HealthGate` over a fresh registry, its records committed with
  each pass) — without it the pump's gate is ``AlwaysOpen`` (no sender health at all).
* Figures: ``rows_per_s`` (wall), ``cpu_s_per_row`` (this process's CPU, pump + receiver),
  ``passes``; and ``uptime``'s load average beside them (a busy machine reads low).

Targets (never asserted): journal ≥ 2,000 rows/s, webhook ≥ 500 rows/s, with and without a
20,000-row Stack backlog (ratio ≥ 0.9); CPU per row flat from 0 to 100,000 pending.
"""
from __future__ import annotations

import asyncio
import os
import sqlite3
import tempfile
import threading
import time
from http.server import ThreadingHTTPServer
from pathlib import Path

from bench.limits import _Ok

T0 = 1_796_025_600.0
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
BODY = b'{"event":"sidecar/stack/unreachable","payload":{"tu":"c-tu-1","since":"2026-11-30T08:00:00Z"}}'


def _row(i: int, channel: str, target: str, seq_tag: str):
    from sidecar.router.model import Delivery
    if channel == "stack":
        return Delivery(f"ev-{seq_tag}{i}.0", f"ev-{seq_tag}{i}", T0 - 10, "sidecar", "stack", "write",
                        "normal", None, "stack", "stack", "pending", BODY, 0, T0 - 10, None, None,
                        None, None, f"tu-{i % 50}/ru-{i}", f"k-{seq_tag}{i}", "PUT",
                        f"/v1/tus/tu-{i % 50}/favorites/ru-{i}/markers/m", f"tu-{i % 50}", f"ru-{i}")
    return Delivery(f"ev-{seq_tag}{i}.1", f"ev-{seq_tag}{i}", T0 - 5, "electron", "a", "b", "normal",
                    "r", channel, target, "pending", BODY, 0, T0 - 5, None)


async def _seed(store, rows: list, chunk: int = 5000) -> None:
    from sidecar.router.ops import PutDelivery
    for i in range(0, len(rows), chunk):
        await store.commit([PutDelivery(r) for r in rows[i:i + chunk]])


async def drain(kind: str, n: int, backlog: int, health: bool = False) -> dict:
    """Drain ``n`` rows of one ``kind`` target (``journal`` | ``webhook``) beside ``backlog``
    pending Stack rows, with the real sender-health gate when ``health``: ``rows_per_s``,
    ``cpu_s_per_row``, ``passes``, ``load``."""
    from sidecar.router.config import Target
    from pydantic import SecretStr

    from sidecar.router.io.channels import Channel, JournalChannel, WebhookChannel
    from sidecar.router.io.pump import DeliveryPump
    from sidecar.router.io.storage import RouterStore
    from sidecar.store.db import Store

    httpd = None
    with tempfile.TemporaryDirectory(prefix="bench-pump-") as d:
        store = await Store.open(Path(d) / "sidecar.db")
        try:
            chan: Channel
            if kind == "journal":
                chan = JournalChannel("audit", Target(channel="journal"), Path(d))
            else:
                httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Ok)
                threading.Thread(target=httpd.serve_forever, daemon=True).start()
                url = f"http://127.0.0.1:{httpd.server_address[1]}/hook"
                chan = WebhookChannel("hook", Target(channel="webhook", url=url, secret=SecretStr(SECRET)))
            await _seed(store, [_row(i, "stack", "stack", "s") for i in range(backlog)])
            await _seed(store, [_row(i, kind, chan.name, "o") for i in range(n)])
            rstore = RouterStore(store)
            woke = asyncio.Event()
            pump = DeliveryPump(rstore, {chan.name: chan}, wake=woke.set, attempts=_attempts(chan.name, health))
            passes = 0
            load = os.getloadavg()[0]
            cpu0, t0 = time.process_time(), time.perf_counter()
            woke.set()
            while woke.is_set():
                woke.clear()
                res = await pump.run_due(T0, detach=True)
                passes += 1
                if woke.is_set():
                    continue  # an attempt landed during the pass: settle it
                if not pump.in_flight and (res.other_due is None or res.other_due > T0):
                    break
                if pump.in_flight:
                    await woke.wait()
                else:
                    woke.set()  # due rows and nothing flying: pass again (the loop's kick)
            el, cpu = time.perf_counter() - t0, time.process_time() - cpu0
            left = len(await rstore.deliveries(status="pending", target=chan.name, limit=n + 1))
            await pump.close()
        finally:
            await store.close()
            if httpd is not None:
                httpd.shutdown()
                httpd.server_close()
    done = n - left
    return {"kind": kind, "n": n, "backlog": backlog, "health": health, "rows_per_s": done / el, "wall_s": el,
            "cpu_s": cpu, "cpu_s_per_row": cpu / max(done, 1), "passes": passes, "left": left,
            "load": load}


def _attempts(target: str, health: bool):
    """The pump's gate: ``AlwaysOpen``, or the real sender health as the app plugs it."""
    from sidecar.core.rng import KeyedRandom
    from sidecar.core.scheduler import Scheduler
    from sidecar.router.attempt import Attempts
    from sidecar.senders import health as h
    from sidecar.senders.gate import HealthGate
    from sidecar.senders.manage import Registry
    if not health:
        return Attempts()
    gate = HealthGate(h.HealthMachine(KeyedRandom(7)), Scheduler())
    gate.load(Registry(), [target])
    return Attempts(gate)


def raw_sqlite(n: int) -> dict:
    """Raw sqlite3 (WAL, synchronous NORMAL): ``n`` INSERTs then ``n`` UPDATEs by key, one
    transaction per 100 rows — the floor of the pump's claim + settle writes."""
    with tempfile.TemporaryDirectory(prefix="bench-sqlite-") as d:
        conn = sqlite3.connect(Path(d) / "raw.db", isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute("CREATE TABLE t (id TEXT PRIMARY KEY, status TEXT, n INTEGER, body BLOB)")
            t0 = time.perf_counter()
            for i in range(0, n, 100):
                conn.execute("BEGIN IMMEDIATE")
                conn.executemany("INSERT INTO t VALUES (?, 'pending', 0, ?)",
                                 [(f"k{j}", BODY) for j in range(i, min(n, i + 100))])
                conn.execute("COMMIT")
            t1 = time.perf_counter()
            for i in range(0, n, 100):
                conn.execute("BEGIN IMMEDIATE")
                for j in range(i, min(n, i + 100)):
                    conn.execute("UPDATE t SET status = 'delivered', n = n + 1 WHERE id = ?", (f"k{j}",))
                conn.execute("COMMIT")
            t2 = time.perf_counter()
        finally:
            conn.close()
    return {"inserts_per_s": n / (t1 - t0), "updates_per_s": n / (t2 - t1)}


def measure(quick: bool) -> dict:
    """The drain figures: journal and webhook, 0 and 20,000 Stack rows pending; the CPU per
    row at 0 / 20k / 100k pending (journal); the same with the real sender-health gate (journal
    at 0 and 100k, webhook at 0); the raw sqlite3 and httpx limits beside.  The journal drains
    10,000 rows (3,000 drain in ~0.4 s: too short to read a ratio from)."""
    from bench.limits import httpx_posts
    sizes = {"journal": 500, "webhook": 300} if quick else {"journal": 10_000, "webhook": 3000}
    big = (0, 2000) if quick else (0, 20_000, 100_000)
    out: dict = {"raw_sqlite": raw_sqlite(2000 if quick else 20_000),
                 "raw_httpx": asyncio.run(httpx_posts(300 if quick else 2000)), "runs": []}
    for kind in ("journal", "webhook"):
        for backlog in big:
            if kind == "webhook" and backlog > 20_000:
                continue
            out["runs"].append(asyncio.run(drain(kind, sizes[kind], backlog)))
    for kind, backlog in (("journal", 0), ("journal", big[-1]), ("webhook", 0)):
        out["runs"].append(asyncio.run(drain(kind, sizes[kind], backlog, health=True)))
    return out


def lines(fig: dict) -> list[str]:
    """The figures as printed lines."""
    rs, rh = fig["raw_sqlite"], fig["raw_httpx"]
    out = [f"  raw sqlite3: {rs['inserts_per_s']:,.0f} inserts/s, {rs['updates_per_s']:,.0f} updates/s"
           f" (100 per transaction); raw httpx POST loopback: {rh['posts_per_s']:,.0f}/s"]
    base: dict[tuple[str, bool], float] = {}
    for r in fig["runs"]:
        key = (r["kind"], r.get("health", False))
        if r["backlog"] == 0:
            base[key] = r["rows_per_s"]
        ratio = r["rows_per_s"] / base[key] if base.get(key) else float("nan")
        name = r["kind"] + ("+health" if key[1] else "")
        out.append(f"  {name:14} n={r['n']:,} backlog={r['backlog']:>7,}: {r['rows_per_s']:>8,.0f} rows/s"
                   f" (×{ratio:.2f} of no backlog), {r['cpu_s_per_row'] * 1000:.3f} ms CPU/row,"
                   f" CPU {r['cpu_s']:.2f} s, {r['passes']} passes, left {r['left']}, load {r['load']:.2f}")
    return out


if __name__ == "__main__":
    import sys
    print("\n".join(lines(measure("--quick" in sys.argv))))
