"""``python -m bench [--quick] [--binary PATH] [--scenario FILE]``: print the figures of issue 2.

1. shift replay: wall time and virtual/wall speed-up (``../shared/scenarios/shift.jsonl`` when it
   exists, else a generated shift of the same shape);
2. events/s through the bridge (sequential round trips and pipelined);
3. p50 / p99 latency from ``platform.event`` to ``task.created`` in real-clock mode at 1,000 ev/s;
4. peak RSS of the sidecar;
5. the engine alone (in-process, no sockets, no SQLite): events/s.
Targets (issue 2, for later issues): shift ≤ 5 s wall (≥ 5,000×), p99 ≤ 2 ms at 1,000 ev/s.
"""
from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from bench import bridge_bench

ROOT = Path(__file__).resolve().parents[1]
SHIFT = ROOT.parent / "shared" / "scenarios" / "shift.jsonl"


def engine_only(n: int, gc_policy: bool = True) -> dict:
    """The engine in-process (the unit tests' driver: no sockets, no SQLite): ``n`` chat
    messages from new RUs, each a step that creates an Unanswered task.  ``gc_policy``: run
    under the serving sidecar's collector settings (:mod:`sidecar.gcpolicy`), restored after.
    ``eps`` is wall-clock events/s, ``cpu_eps`` per CPU second of this process (steadier on a
    shared machine)."""
    import gc

    from sidecar import gcpolicy
    from tests.sidecar.driver import Driver
    d = Driver(lambda tu, m, p: {"dialogs": [], "mails": []}, seed=1)
    t0 = 1796025600.0
    d.advance_to(t0)
    d.login("c-tu-1", "chathouse")
    before = gcpolicy.apply() if gc_policy else None
    try:
        start, cpu = time.perf_counter(), time.process_time()
        for i in range(n):
            d.advance_to(t0 + i * 0.01)
            d.event("c-tu-1", "chathouse", "Send", bridge_bench.event(i, t0 + i * 0.01)["data"])
        el, cpu = time.perf_counter() - start, time.process_time() - cpu
    finally:
        if before is not None:
            gc.unfreeze()
            gc.set_threshold(*before)
    return {"events": n, "eps": n / el, "cpu_eps": n / cpu}


async def shift(path: Path | None, binary: str | None) -> dict:
    from electron_stub import scenario as sc
    from electron_stub.replay import Replay
    with tempfile.TemporaryDirectory(prefix="bench-shift-") as tmp:
        if path is None:
            from electron_stub import generate
            path = Path(tmp) / "shift.jsonl"
            with open(path, "w") as fh:
                generate.write(fh, preset="shift")
        scenario = sc.load(str(path))
        rp = Replay(scenario, data_dir=str(Path(tmp) / "data"), binary=binary, quiet=True)
        start = time.perf_counter()
        await rp.run()
        wall = time.perf_counter() - start
        bad = rp.verdict()
        return {"scenario": str(path), "wall_s": wall, "virtual_s": scenario.header.duration_s,
                "speedup": scenario.header.duration_s / wall, "violations": len(bad)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="smaller runs, no shift replay")
    ap.add_argument("--binary", help="bench the frozen binary instead of the source")
    ap.add_argument("--scenario", type=Path, help="shift scenario to replay")
    a = ap.parse_args()
    print("engine only:", _fmt(engine_only(5000 if a.quick else 20000)))
    print("bridge throughput:", _fmt(asyncio.run(bridge_bench.throughput(1000 if a.quick else 5000, a.binary))))
    print("latency @1000 ev/s:", _fmt(asyncio.run(bridge_bench.latency(1000.0, 2.0 if a.quick else 5.0, a.binary))))
    if not a.quick:
        path = a.scenario or (SHIFT if SHIFT.exists() else None)
        print("shift replay:", _fmt(asyncio.run(shift(path, a.binary))))
    return 0


def _fmt(d: dict) -> str:
    return "  ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in d.items())


if __name__ == "__main__":
    raise SystemExit(main())
