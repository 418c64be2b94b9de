"""Bridge benchmarks against a real sidecar process.

* events/s: ``platform.event`` requests through the websocket on the virtual clock, sequential
  (one round trip each, as the harness replays) and pipelined (many in flight).
* latency: in real-clock mode, ``platform.event`` sent as notifications at a fixed rate; the time
  from sending an event to receiving its ``task.created`` — p50 / p95 / p99 / max, and the
  sidecar's CPU seconds per event (from ``/proc``: what the rate costs it, beside the wall).
* peak RSS of the sidecar (VmHWM).
"""
from __future__ import annotations

import asyncio
import json
import os
import secrets
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bridge.client import BridgeClient

ROOT = Path(__file__).resolve().parents[1]


class Sidecar:
    def __init__(self, clock: str, binary: str | None = None, probe: Path | None = None) -> None:
        self.clock = clock
        self.binary = binary
        self.probe = probe  # bench.stage_probe writes its stamps here at the sidecar's exit
        self.tmp = tempfile.TemporaryDirectory(prefix="sidecar-bench-")
        self.token = secrets.token_urlsafe(16)
        self.proc: asyncio.subprocess.Process | None = None
        self.client: BridgeClient | None = None
        self.created: dict[str, float] = {}  # ru -> perf_counter at task.created

    async def __aenter__(self) -> "Sidecar":
        if self.probe is not None:
            start = [sys.executable, "-m", "bench.stage_probe", str(self.probe)]
        else:
            start = [self.binary] if self.binary else [sys.executable, "-m", "sidecar"]
        cmd = start + [
            "serve", "--port", "0", "--data-dir", self.tmp.name, "--clock", self.clock,
            "--log-level", "WARNING"]
        env = dict(os.environ, SIDECAR_TOKEN=self.token)
        self.proc = await asyncio.create_subprocess_exec(
            *cmd, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL, env=env, cwd=ROOT)
        ready = json.loads(await _within(self.proc.stdout.readline(), 30))
        self.client = await BridgeClient.connect(ready["port"], self.token,
                                                 on_notification=self._note,
                                                 on_request=self._answer)
        return self

    def _note(self, method: str, params) -> None:
        if method == "task.created":
            self.created[params["task"]["ru"]] = time.perf_counter()

    async def _answer(self, method: str, params):
        return {"dialogs": [], "mails": []}

    def peak_rss_mb(self) -> float:
        try:
            for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
        except OSError:
            pass
        return float("nan")

    def cpu_s(self) -> float:
        """CPU seconds (user + system, every thread) the sidecar used so far; NaN off Linux."""
        try:
            fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, ValueError, IndexError):
            return float("nan")

    async def __aexit__(self, *exc) -> None:
        await self.client.close()
        self.proc.stdin.close()
        try:
            await _within(self.proc.wait(), 10)
        except TimeoutError:
            self.proc.kill()
        self.tmp.cleanup()


async def _within(aw, timeout_s: float):
    async with asyncio.timeout(timeout_s):
        return await aw


def event(i: int, at: float) -> dict:
    return {"project": "chathouse", "tu": "c-tu-1", "name": "Send",
            "data": {"id": f"m{i}", "type": "message", "from": f"c-ru-{i}", "to": "c-tu-1",
                     "at": at, "body": "hi"}}


async def throughput(n: int, binary: str | None) -> dict:
    async with Sidecar("virtual", binary) as sc:
        t0 = 1796025600.0
        await sc.client.call("clock.advance_to", {"t": t0})
        await sc.client.call("session.login", {"tu": "c-tu-1", "project": "chathouse"})
        start = time.perf_counter()
        for i in range(n):
            await sc.client.call("platform.event", event(i, t0))
        seq = time.perf_counter() - start
        start = time.perf_counter()
        batch = 200
        for b in range(n, 2 * n, batch):
            await asyncio.gather(*(sc.client.call("platform.event", event(i, t0))
                                   for i in range(b, min(b + batch, 2 * n))))
        pipe = time.perf_counter() - start
        return {"events": n, "sequential_eps": n / seq, "pipelined_eps": n / pipe,
                "peak_rss_mb": sc.peak_rss_mb()}


async def latency(rate: float, seconds: float, binary: str | None, *, stages: bool = False) -> dict:
    """``platform.event`` notifications at ``rate`` per second for ``seconds`` on the wall clock;
    each event's time to its ``task.created`` (module docstring), the sidecar's CPU and store
    counters per event.  ``stages``: run the sidecar under :mod:`bench.stage_probe` and add the
    per-stage breakdown (:func:`bench.stages.breakdown`) as ``"stages"``."""
    with tempfile.TemporaryDirectory(prefix="sidecar-stages-") as tmp:
        probe = Path(tmp) / "stages.json" if stages else None
        async with Sidecar("wall", binary, probe) as sc:
            await sc.client.call("session.login", {"tu": "c-tu-1", "project": "chathouse"})
            n = int(rate * seconds)
            sent: dict[str, float] = {}
            store0 = (await sc.client.call("status", {}))["store"]
            cpu0 = sc.cpu_s()
            start = time.perf_counter()
            for i in range(n):
                target = start + i / rate
                delay = target - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                sent[f"c-ru-{i}"] = time.perf_counter()
                await sc.client.notify("platform.event", event(i, time.time()))
            store1 = (await sc.client.call("status", {}))["store"]
            deadline = time.perf_counter() + 5
            while len(sc.created) < n and time.perf_counter() < deadline:
                await asyncio.sleep(0.01)
            cpu = sc.cpu_s() - cpu0
            lat = sorted((sc.created[ru] - t) * 1000 for ru, t in sent.items() if ru in sc.created)
            achieved = n / (time.perf_counter() - start)
            q = statistics.quantiles(lat, n=100) if len(lat) >= 2 else [float("nan")] * 99
            out = {"rate": rate, "events": n, "received": len(lat), "p50_ms": q[49], "p95_ms": q[94],
                   "p99_ms": q[98], "sidecar_cpu_ms_per_event": cpu * 1000 / n,
                   "max_ms": lat[-1] if lat else float("nan"), "peak_rss_mb": sc.peak_rss_mb(),
                   "achieved_eps": achieved,
                   "store_per_event": {k: (store1[k] - store0[k]) / n for k in store0}}
            received = [sc.created.get(ru) for ru in sent]
        if probe is not None:
            from bench import stages as st
            out["stages"] = st.breakdown(list(sent.values()), received,
                                         json.loads(probe.read_text(encoding="utf-8")))
        return out
