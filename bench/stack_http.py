"""``python -m bench.stack_http [-n N] [--writes W] [--rounds R]``: client CPU per
``POST /v1/batch`` for each HTTP path Stack's batches could take (issue 24 lever 2).

Rules / theory of operation
---------------------------
* The server is a bare HTTP/1.1 keep-alive server (``http.server``, Nagle off) in ANOTHER
  process, so this process's ``time.process_time`` (user + system CPU of the process) counts only
  the client.  It answers ``POST /v1/batch`` with ``{"results": [{"key", "status": 200}]}`` for
  the batch's keys, as Stack does.
* The request is the pump's: ``W`` marker writes (default 8) as one batch body, the
  ``Accept``/``User-Agent``/``Content-Type``/virtual-at headers.  One request in flight, one
  kept-alive connection; ``min(50, N)`` warm-up requests open it before timing.
* Candidates, each ``N`` requests per round, rounds interleaved (a load change hits each alike);
  the figure is the median round's CPU µs per request, with the wall µs beside it:

  - ``stack_client``: :meth:`sidecar.stack.client.StackClient.batch`, end to end (whatever the
    tree's client is: httpx before issue 24 lever 2's change, the h11 path after it);
  - ``httpx``: a bare ``httpx.AsyncClient.post`` (the transport the client used before);
  - ``httpcore``: ``httpcore.AsyncConnectionPool.request`` (httpx's own transport, without httpx);
  - ``h11_streams``: asyncio streams + ``h11`` (:class:`_H11`, one connection, keep-alive);
  - ``http_client``: the stdlib's blocking ``http.client`` (a floor, not a candidate: it
    would block the event loop).
* Prints one JSON object: figures per candidate and ``os.getloadavg()`` before and after.
"""
from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable

import msgspec

SERVER = r"""
import json, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def do_POST(self):
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        keys = [w["key"] for w in json.loads(raw)["writes"]]
        out = json.dumps({"results": [{"key": k, "status": 200} for k in keys]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *a):
        pass

s = ThreadingHTTPServer(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
"""


def _writes(w: int) -> list:
    from sidecar.stack.client import BatchWrite

    body = msgspec.json.encode({"value": {"sourceUnansweredTaskId": "t-1", "step": 1,
                                          "nextCheckAt": "2026-11-30T08:00:00.000Z"}})
    return [BatchWrite(f"followUpChat:g-tu-1:g-ru-{i}:t-1:1:set", "PUT",
                       f"/v1/tus/g-tu-1/favorites/g-ru-{i}/markers/followUpChat", body) for i in range(w)]


def _batch_body(writes: list) -> bytes:
    return msgspec.json.encode({"writes": [{"key": w.key, "method": w.method, "path": w.path,
                                            "body": msgspec.Raw(w.body)} for w in writes]})


HEADERS = {"Accept": "application/json", "User-Agent": "operator-sidecar",
           "Content-Type": "application/json", "Sidecar-Virtual-At": "1796025600.5"}


class _H11:
    """The smallest keep-alive client on asyncio streams + h11: one connection, no pool, no
    timeouts — the floor of candidate (c), not the production path."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def post(self, path: str, body: bytes) -> bytes:
        import h11

        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
            self.conn = h11.Connection(h11.CLIENT)
        assert self.reader is not None
        conn = self.conn
        hdrs = [("Host", f"{self.host}:{self.port}"), *HEADERS.items(), ("Content-Length", str(len(body)))]
        self.writer.write(conn.send(h11.Request(method="POST", target=path, headers=hdrs))
                          + conn.send(h11.Data(data=body)) + conn.send(h11.EndOfMessage()))
        await self.writer.drain()
        chunks: list[bytes] = []
        while True:
            ev = conn.next_event()
            if ev is h11.NEED_DATA:
                conn.receive_data(await self.reader.read(65536))
            elif isinstance(ev, h11.Data):
                chunks.append(bytes(ev.data))
            elif isinstance(ev, h11.EndOfMessage):
                break
        conn.start_next_cycle()
        return b"".join(chunks)

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


async def _loop(fn: Callable[[], Awaitable[object]], n: int) -> tuple[float, float]:
    for _ in range(min(50, n)):
        await fn()
    c0, w0 = time.process_time(), time.perf_counter()
    for _ in range(n):
        await fn()
    return (time.process_time() - c0) / n, (time.perf_counter() - w0) / n


async def _round(port: int, n: int, writes: list) -> dict[str, tuple[float, float]]:
    import httpcore
    import httpx

    from sidecar.stack.client import StackClient

    base = f"http://127.0.0.1:{port}"
    body = _batch_body(writes)
    hdrs = {**HEADERS, "Content-Length": str(len(body))}
    out: dict[str, tuple[float, float]] = {}

    async with StackClient(base, timeout=5.0) as sc:
        out["stack_client"] = await _loop(lambda: sc.batch(writes, at=1796025600.5), n)

    async with httpx.AsyncClient(base_url=base, timeout=5.0, headers=HEADERS) as hx:
        async def one_httpx() -> bytes:
            r = await hx.post("/v1/batch", content=body)
            return r.content
        out["httpx"] = await _loop(one_httpx, n)

    async with httpcore.AsyncConnectionPool(max_connections=16) as pool:
        url = f"{base}/v1/batch"
        hc_headers = list(hdrs.items())

        async def one_httpcore() -> bytes:
            r = await pool.request("POST", url, headers=hc_headers, content=body)
            return r.content
        out["httpcore"] = await _loop(one_httpcore, n)

    h = _H11("127.0.0.1", port)
    out["h11_streams"] = await _loop(lambda: h.post("/v1/batch", body), n)
    await h.close()

    hc = http.client.HTTPConnection("127.0.0.1", port)

    async def one_stdlib() -> bytes:
        hc.request("POST", "/v1/batch", body=body, headers=hdrs)
        return hc.getresponse().read()
    out["http_client"] = await _loop(one_stdlib, n)
    hc.close()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.stack_http", description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=2000, help="requests per candidate per round")
    ap.add_argument("--writes", type=int, default=8, help="writes per batch")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    srv = subprocess.Popen([sys.executable, "-c", SERVER], stdout=subprocess.PIPE, text=True)
    try:
        assert srv.stdout is not None
        port = int(srv.stdout.readline())
        load0 = os.getloadavg()
        rounds = [asyncio.run(_round(port, args.n, _writes(args.writes))) for _ in range(args.rounds)]
        load1 = os.getloadavg()
    finally:
        srv.terminate()
        srv.wait(10)
    figures = {name: {"cpu_us": round(statistics.median(r[name][0] for r in rounds) * 1e6, 1),
                      "wall_us": round(statistics.median(r[name][1] for r in rounds) * 1e6, 1),
                      "cpu_us_rounds": [round(r[name][0] * 1e6, 1) for r in rounds]}
               for name in rounds[0]}
    print(json.dumps({"n": args.n, "writes": args.writes, "rounds": args.rounds,
                      "loadavg_before": [round(x, 2) for x in load0],
                      "loadavg_after": [round(x, 2) for x in load1], "figures": figures}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
