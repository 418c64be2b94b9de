"""Physical limits of this machine, measured in the same run as the figures they bound (issue 11
item 7), so a figure reads as a ratio that holds on any machine, busy or quiet.

* :func:`ws_echo` — a bare websockets echo over loopback, one message in flight: the most
  sequential round trips/s any bridge protocol can make here (``bridge`` events/s and the
  shift's round trips are read against it); with its p50 / p99 round trip in ms (the latency
  figure's floor).  The message is a ``platform.event`` frame of the benches' size.
* :func:`sqlite_commits` — raw ``sqlite3`` (no aiosqlite thread hop), WAL, the store's
  ``synchronous`` for the durability, one small INSERT per transaction: commits/s.
* :func:`httpx_posts` — bare ``httpx.AsyncClient`` POSTs, one in flight, keep-alive, to a
  minimal loopback HTTP/1.1 server that answers ``{"ok":true}``: what one Stack request costs
  before any Stack logic (the shift's Stack requests are read against it).

Each takes a count (``n``) and returns a dict of figures; none needs the sidecar.
"""
from __future__ import annotations

import asyncio
import json
import sqlite3
import statistics
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

FRAME = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "platform.event", "params": {
    "project": "chathouse", "tu": "c-tu-1", "name": "Send", "data": {
        "id": "m1", "type": "message", "from": "c-ru-1", "to": "c-tu-1", "at": 1796025600.0,
        "body": "hi"}}})


async def ws_echo(n: int) -> dict:
    """``n`` sequential echo round trips over a loopback websocket: ``rt_per_s``, ``p50_ms``,
    ``p99_ms``."""
    from websockets.asyncio.client import connect
    from websockets.asyncio.server import serve

    async def echo(ws) -> None:
        async for msg in ws:
            await ws.send(msg)

    async with serve(echo, "127.0.0.1", 0, compression=None) as server:
        port = server.sockets[0].getsockname()[1]
        async with connect(f"ws://127.0.0.1:{port}", compression=None) as ws:
            for _ in range(min(50, n)):  # warm-up
                await ws.send(FRAME)
                await ws.recv()
            rtts = []
            start = time.perf_counter()
            for _ in range(n):
                t = time.perf_counter()
                await ws.send(FRAME)
                await ws.recv()
                rtts.append(time.perf_counter() - t)
            el = time.perf_counter() - start
    q = statistics.quantiles(rtts, n=100) if len(rtts) >= 2 else [float("nan")] * 99
    return {"rt_per_s": n / el, "p50_ms": q[49] * 1000, "p99_ms": q[98] * 1000}


def sqlite_commits(n: int, durability: str = "normal") -> dict:
    """``n`` one-row transactions on raw sqlite3 in WAL mode: ``commits_per_s``."""
    sync = {"normal": "NORMAL", "full": "FULL"}[durability]
    with tempfile.TemporaryDirectory(prefix="bench-sqlite-") as d:
        conn = sqlite3.connect(Path(d) / "raw.db", isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute(f"PRAGMA synchronous = {sync}")
            conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, k TEXT, v TEXT)")
            start = time.perf_counter()
            for i in range(n):
                conn.execute("BEGIN IMMEDIATE")
                conn.execute("INSERT INTO t (k, v) VALUES (?, ?)", (f"k{i}", '{"step":1}'))
                conn.execute("COMMIT")
            el = time.perf_counter() - start
        finally:
            conn.close()
    return {"commits_per_s": n / el}


class _Ok(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the Stack client uses it
    disable_nagle_algorithm = True  # headers and body are two writes: no 40 ms delayed-ACK stall

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = b'{"ok":true}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base's name
        pass


async def httpx_posts(n: int) -> dict:
    """``n`` sequential POSTs of a marker-sized JSON body with ``httpx.AsyncClient`` to a
    loopback HTTP/1.1 server: ``posts_per_s``."""
    import httpx

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Ok)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{httpd.server_address[1]}/v1/tus/tu/favorites/ru/markers/m"
        body = b'{"value":{"sourceUnansweredTaskId":"t-1","step":1,"nextCheckAt":"2026-11-30T08:00:00Z"}}'
        headers = {"Content-Type": "application/json", "Idempotency-Key": "k"}
        async with httpx.AsyncClient(timeout=10) as client:
            for _ in range(min(20, n)):  # warm-up: the connection is open before timing
                (await client.post(url, content=body, headers=headers)).raise_for_status()
            start = time.perf_counter()
            for _ in range(n):
                (await client.post(url, content=body, headers=headers)).raise_for_status()
            el = time.perf_counter() - start
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)
    return {"posts_per_s": n / el}


def measure(quick: bool) -> dict:
    """Every limit, sized for ``--quick`` or the full bench."""
    return {"ws_echo": asyncio.run(ws_echo(1000 if quick else 5000)),
            "sqlite": sqlite_commits(1000 if quick else 5000),
            "httpx": asyncio.run(httpx_posts(300 if quick else 2000))}


__all__ = ["httpx_posts", "measure", "sqlite_commits", "ws_echo"]
