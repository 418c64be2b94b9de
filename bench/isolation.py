"""A healthy target's delivery latency beside hanging receivers (issue 21 item 1, DESIGN §10
"Targets are isolated"), on the wall clock, through a real ``sidecar serve`` process.

Shape: a real sidecar (``--clock wall``) with one healthy webhook (``ok-hook``) and ``k``
webhooks whose loopback receivers accept the connection, read the request and never answer
(``timeout_s`` 10 s each, so every attempt to them is cut by the channel's total timeout); one
rule routes every ``events.emit`` of source ``bench`` to all of them.  ``n`` events are emitted at
``rate`` per second; the healthy receiver notes each delivery's arrival (by its ``action``).
Latency = arrival − emit, wall seconds, measured in this process on the same host clock.

Run::

    .venv/bin/python -m bench.isolation            # k = 0, 1, 6; n = 60 at 10/s
    .venv/bin/python -m bench.isolation --k 1 --n 100 --rate 20

Before issue 21 item 1 a pass waited for its slowest attempt, so the healthy p99 grew with the
hanging receivers' timeout (0.08 s alone, 7.9 s beside one, 11.9 s beside six faulty, issue 21);
with targets isolated it should stay near the alone figure.  Figures in bench/README.md.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bridge.client import BridgeClient  # noqa: E402
from tests.integration.sidecar_proc import SidecarProcess  # noqa: E402

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


async def _serve(handler) -> tuple[asyncio.Server, str]:
    srv = await asyncio.start_server(handler, "127.0.0.1", 0)
    return srv, f"http://127.0.0.1:{srv.sockets[0].getsockname()[1]}/hook"


async def measure(k: int, n: int, rate: float) -> dict:
    """One run: ``k`` hanging receivers, ``n`` events at ``rate``/s → latency figures (s)."""
    arrived: dict[str, float] = {}
    hold = asyncio.Event()

    async def ok(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:  # keep-alive: httpx reuses the connection
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                              if line.lower().startswith(b"content-length"))
                body = json.loads(await reader.readexactly(length))
                arrived.setdefault(body["data"]["action"], time.time())
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    async def hang(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.readuntil(b"\r\n\r\n")
            await hold.wait()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()

    servers = []
    srv, url = await _serve(ok)
    servers.append(srv)
    targets = {"ok-hook": {"channel": "webhook", "url": url, "secret": SECRET}}
    for i in range(k):
        srv, hurl = await _serve(hang)
        servers.append(srv)
        targets[f"hang-{i}"] = {"channel": "webhook", "url": hurl, "secret": SECRET, "timeout_s": 10}
    os.environ["SIDECAR_ROUTER_TARGETS"] = json.dumps(targets)
    emitted: dict[str, float] = {}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            async with SidecarProcess(Path(tmp), clock="wall", deadline_s=15) as sc:
                async def answer(method, params):
                    return {"dialogs": [], "mails": [], "online": []}
                client = await BridgeClient.connect(sc.port, sc.token, on_request=answer)
                await client.call("rules.create", {"name": "all", "conditions": {"source": "bench"},
                                                   "actions": [{"target": t} for t in targets]})
                for i in range(n):
                    action = f"a{i}"
                    emitted[action] = time.time()
                    await client.call("events.emit", {"source": "bench", "subject": "s",
                                                      "action": action, "payload": {}})
                    await asyncio.sleep(1 / rate)  # noqa: TID251 - a benchmark's pacing
                end = time.time() + 60
                while len(arrived) < n and time.time() < end:
                    await asyncio.sleep(0.05)  # noqa: TID251
                await client.close()
                await sc.stop(deadline_s=15)
    finally:
        hold.set()
        os.environ.pop("SIDECAR_ROUTER_TARGETS", None)
        for srv in servers:
            srv.close()
    lat = sorted(arrived[a] - emitted[a] for a in arrived)
    p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))] if lat else float("nan")
    return {"hanging": k, "events": n, "received": len(lat),
            "p50_s": round(statistics.median(lat), 4) if lat else None,
            "p99_s": round(p99, 4), "max_s": round(lat[-1], 4) if lat else None}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.isolation", description=__doc__.split("\n\n")[0])
    ap.add_argument("--k", type=int, action="append", help="hanging receivers (repeatable; default 0, 1, 6)")
    ap.add_argument("--n", type=int, default=60, help="events (default 60)")
    ap.add_argument("--rate", type=float, default=10.0, help="events per second (default 10)")
    args = ap.parse_args(argv)
    if args.n < 1 or args.rate <= 0 or any(k < 0 for k in args.k or ()):
        ap.error("--n ≥ 1, --rate > 0, --k ≥ 0")
    print(f"load average {os.getloadavg()[0]:.2f} (1 min) at start")
    for k in args.k or [0, 1, 6]:
        r = asyncio.run(measure(k, args.n, args.rate))
        r["load_1m"] = round(os.getloadavg()[0], 2)
        r["bench_cpu_s"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_utime, 2)
        print(json.dumps(r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
