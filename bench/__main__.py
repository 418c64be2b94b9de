"""``python -m bench [--quick] [--only NAMES] [--binary PATH] [--scenario FILE]``: the figures
of issues 2 and 11, each printed beside the physical limit it is bounded by, measured in the same
run (:mod:`bench.limits`), as a ratio — so the figures hold on any machine, busy or quiet.

1. limits: bare websockets echo round trips/s (p50 / p99), raw sqlite3 commits/s, bare httpx
   POST/s to a loopback server;
2. engine alone (in-process, no sockets, no SQLite): events/s (wall and per CPU second), under
   the serving GC policy and without it (:mod:`sidecar.cli.gcpolicy`);
3. bridge: ``platform.event`` sequential round trips/s ÷ echo round trips/s; pipelined;
4. store: one 3-op step committed/s ÷ raw sqlite3 commits/s;
5. latency: p50 / p95 / p99 ``platform.event`` → ``task.created`` at 1,000 ev/s on the wall clock,
   against the echo's p99; the store's thread hops, commits and ops per event; with ``--stages``
   the sidecar runs under :mod:`bench.stage_probe` and each stage of an event's way is printed
   (:mod:`bench.stages`: reader, queue, steps, commit, notify, writer, client; GC; CPU by thread);
6. shift replay (not ``--quick``): wall and speed-up; round trips by method and Stack requests
   (and writes) by kind; its floor = round trips at the echo rate + Stack requests at the bare
   POST rate, and wall ÷ floor;
7. pump: the delivery pump's drain rate (journal, webhook to a loopback receiver) with and
   without a Stack backlog, CPU per row at 0 / 20k / 100k pending, beside raw sqlite3
   inserts/updates and raw httpx POSTs (:mod:`bench.pump_drain`);
8. scale (not ``--quick``): the first hour of the ``large`` preset (60 TUs): wall, events, round
   trips, the sidecars' peak RSS against the 150 MB target.

Targets (issue 11; reached or not, the figure is printed, never asserted): shift ≤ 20 s on a
quiet machine, p99 ≤ 2 ms at 1,000 ev/s, Stack requests per shift ≤ 5,500, RSS ≤ 150 MB.
``--quick`` (< 1 min): smaller counts, no replays.  ``--only engine,limits``: just those.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import bridge_bench, limits, pump_drain, store_bench
from tests.shared_dir import SHIFT  # ../shared's shift, where it is (SIDECAR_SHARED_DIR moves it)

ROOT = Path(__file__).resolve().parents[1]
FIGURES = ("limits", "engine", "bridge", "store", "latency", "pump", "shift", "scale")
SLOW = ("shift", "scale")  # replays: not in --quick
RSS_TARGET_MB = 150.0
P99_TARGET_MS = 2.0  # platform.event → task.created at 1,000 ev/s (issue 11)
STACK_TARGET = 5500  # Stack requests per 8-hour shift


def engine_only(n: int, gc_policy: bool = True) -> dict:
    """The engine in-process (the unit tests' driver: no sockets, no SQLite): ``n`` chat
    messages from new RUs, each a step that creates an Unanswered task.  ``gc_policy``: run
    under the serving sidecar's collector settings (:mod:`sidecar.cli.gcpolicy`), restored after.
    ``eps`` is wall-clock events/s, ``cpu_eps`` per CPU second of this process (steadier on a
    shared machine)."""
    import gc

    from sidecar.cli import gcpolicy
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
            if i % 1000 == 999:  # the app commits ops and sends notes, then drops them: so does
                d.ops.clear()  # the bench, or the driver's ever-growing lists would be measured
                d.notes.clear()
        el, cpu = time.perf_counter() - start, time.process_time() - cpu
    finally:
        if before is not None:
            gc.unfreeze()
            gc.set_threshold(*before)
    return {"events": n, "eps": n / el, "cpu_eps": n / cpu}


async def replay(lines_or_path: list[dict] | Path, binary: str | None) -> dict:
    """Replay a scenario (lines or a file); the figures a replay can count: wall, speed-up,
    round trips by method, Stack requests and writes by kind, peak RSS of its sidecars."""
    from electron_stub import generate
    from electron_stub import scenario as sc
    from electron_stub.replay import Replay
    with tempfile.TemporaryDirectory(prefix="bench-replay-") as tmp:
        if isinstance(lines_or_path, Path):
            path = lines_or_path
        else:
            path = Path(tmp) / "scenario.jsonl"
            path.write_text(generate.dumps(lines_or_path), encoding="utf-8")
        scenario = sc.load(str(path))
        rp = Replay(scenario, data_dir=str(Path(tmp) / "data"), binary=binary, quiet=True)
        start = time.perf_counter()
        await rp.run()
        wall = time.perf_counter() - start
        bad = rp.verdict()
        st = rp.stats
        rss = [e.peak_rss_mb for e in st.exits if e.peak_rss_mb is not None]
        return {"scenario": path.name, "wall_s": wall, "virtual_s": scenario.header.duration_s,
                "speedup": scenario.header.duration_s / wall, "violations": len(bad),
                "failed_expectations": sum(1 for r in rp.results if not r.ok),
                "round_trips": dict(sorted(st.frames_sent.items(), key=lambda kv: -kv[1])),
                "platform_requests": sum(st.requests_answered.values()),
                # sidecar → harness round trips (platform.request, or a step's platform.requests)
                "request_round_trips": sum(st.request_frames.values()),
                "stack_requests": st.stack_requests, "stack_writes": st.stack_writes,
                "peak_rss_mb": max(rss) if rss else None}


def shift_lines(path: Path | None) -> list[dict] | Path:
    """``../shared/scenarios/shift.jsonl`` when given/present, else a generated shift."""
    if path is not None:
        return path
    if SHIFT.exists():
        return SHIFT
    from electron_stub import generate
    return generate.generate("shift")


def scale_lines() -> list[dict]:
    """The first hour of the ``large`` preset (60 TUs)."""
    from electron_stub import generate
    return generate.first(generate.generate("large"), 3600.0)


# ---- report -----------------------------------------------------------------------------------

def _n(x: float | None, digits: int = 3) -> str:
    if x is None:
        return "n/a"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    return f"{x:.{digits}g}"


def ratio(figure: float | None, limit: float | None) -> str:
    """``figure ÷ limit`` as ``0.22×``, or ``n/a``."""
    if not figure or not limit:
        return "n/a"
    return f"{figure / limit:.2f}×"


def verdict(figure: float | None, target: float) -> str:
    """``MET`` when ``figure ≤ target``, ``MISS`` above it, ``n/a`` when not measured — printed
    beside every figure that has a target, so a reader need not do the comparison."""
    if figure is None:
        return "n/a"
    return "MET" if figure <= target else "MISS"


def replay_lines(name: str, r: dict, lim: dict | None, *, shift: bool = True) -> list[str]:
    """A replay's figures: wall, speed-up, floor from the limits, counts by kind.  ``shift``: the
    replay is a whole shift, so the per-shift Stack target applies (and gets its verdict)."""
    rt = sum(r["round_trips"].values()) + r.get("request_round_trips", 0)
    stack = sum(r["stack_requests"].values())
    out = [f"{name}: {r['scenario']} wall {_n(r['wall_s'])} s, ×{_n(r['speedup'])} real time, "
           f"{r['violations']} violation(s), {r['failed_expectations']} failed expectation(s)"]
    if lim is not None:
        floor = rt / lim["ws_echo"]["rt_per_s"] + stack / lim["httpx"]["posts_per_s"]
        out.append(f"  floor at this machine's limits: {_n(rt)} round trips at echo rate + {_n(stack)} "
                   f"Stack requests at bare POST rate = {_n(floor)} s; wall ÷ floor = "
                   f"{_n(r['wall_s'] / floor if floor else None)}")
    out.append("  round trips by method: " + ", ".join(f"{k} {v:,}" for k, v in r["round_trips"].items())
               + f", platform.request(s) {r.get('request_round_trips', 0):,} (total {rt:,}; platform"
               f" requests answered {r['platform_requests']:,})")
    out.append("  Stack requests by kind: " + (", ".join(f"{k} {v:,}" for k, v in r["stack_requests"].items())
                                              or "none") + f" (total {stack:,}; "
               + (f"target ≤ {STACK_TARGET:,} per shift: {verdict(stack, STACK_TARGET)})" if shift
                  else f"the ≤ {STACK_TARGET:,} target is per whole shift: no verdict)"))
    out.append("  Stack writes by kind: " + (", ".join(f"{k} {v:,}" for k, v in r["stack_writes"].items())
                                            or "none"))
    rss = r["peak_rss_mb"]
    out.append(f"  sidecar peak RSS {_n(rss)} MB (target ≤ {RSS_TARGET_MB:.0f} MB: {verdict(rss, RSS_TARGET_MB)})")
    return out


def run(quick: bool, only: tuple[str, ...], binary: str | None, scenario: Path | None,
        emit=print, *, stages: bool = False, seconds: float | None = None) -> dict[str, Any]:
    """Measure the figures in ``only`` and ``emit`` one line each (see the module docstring);
    returns them as data."""
    want = [f for f in FIGURES if f in only and not (quick and f in SLOW)]
    res: dict[str, Any] = {}
    lim = None
    if any(f in want for f in ("limits", "bridge", "store", "latency", "shift", "scale")):
        lim = res["limits"] = limits.measure(quick)
        e, s, h = lim["ws_echo"], lim["sqlite"], lim["httpx"]
        emit(f"limits (this run): websockets echo {_n(e['rt_per_s'])} round trips/s "
             f"(p50 {_n(e['p50_ms'])} ms, p99 {_n(e['p99_ms'])} ms); raw sqlite3 "
             f"{_n(s['commits_per_s'])} commits/s; bare httpx {_n(h['posts_per_s'])} POST/s")
    if "engine" in want:
        n = 5000 if quick else 20000
        eng = res["engine"] = engine_only(n)
        bare = res["engine_default_gc"] = engine_only(n, gc_policy=False)
        emit(f"engine only: {_n(eng['eps'])} events/s ({_n(eng['cpu_eps'])} per CPU s); default GC "
             f"{_n(bare['eps'])} events/s ({_n(bare['cpu_eps'])} per CPU s) — in-process, no I/O limit")
    if "bridge" in want:
        b = res["bridge"] = asyncio.run(bridge_bench.throughput(1000 if quick else 5000, binary))
        emit(f"bridge: sequential {_n(b['sequential_eps'])} events/s = "
             f"{ratio(b['sequential_eps'], lim['ws_echo']['rt_per_s'])} of echo; pipelined "
             f"{_n(b['pipelined_eps'])} events/s = {ratio(b['pipelined_eps'], lim['ws_echo']['rt_per_s'])}; "
             f"peak RSS {_n(b['peak_rss_mb'])} MB")
    if "store" in want:
        steps = asyncio.run(store_bench.bench("normal", 300 if quick else 3000))
        res["store"] = {"steps_per_s": steps}
        emit(f"store: commit of a 3-op step {_n(steps)} steps/s = "
             f"{ratio(steps, lim['sqlite']['commits_per_s'])} of raw sqlite3 commits")
    if "latency" in want:
        secs = seconds if seconds is not None else (2.0 if quick else 5.0)
        la = res["latency"] = asyncio.run(bridge_bench.latency(1000.0, secs, binary, stages=stages))
        emit(f"latency @1000 ev/s: p50 {_n(la['p50_ms'])} ms, p95 {_n(la['p95_ms'])} ms, "
             f"p99 {_n(la['p99_ms'])} ms (= {ratio(la['p99_ms'], lim['ws_echo']['p99_ms'])} echo p99; "
             f"target ≤ {P99_TARGET_MS:g} ms: {verdict(la['p99_ms'], P99_TARGET_MS)}), max {_n(la['max_ms'])} ms, {la['received']}/{la['events']} received; "
             f"sidecar {_n(la['sidecar_cpu_ms_per_event'])} ms CPU per event; per event "
             + ", ".join(f"{k} {v:.2f}" for k, v in la["store_per_event"].items()))
        if "stages" in la:
            from bench import stages as st
            for line in st.lines(la["stages"]):
                emit(line)
    if "pump" in want:
        pu = res["pump"] = pump_drain.measure(quick)
        emit("pump drain (issue 21 item 2; targets journal ≥ 2,000 rows/s, webhook ≥ 500 rows/s,"
             " ×≥ 0.9 with a 20k Stack backlog, CPU/row flat to 100k):")
        for line in pump_drain.lines(pu):
            emit(line)
    if "shift" in want:
        r = res["shift"] = asyncio.run(replay(shift_lines(scenario), binary))
        for line in replay_lines("shift replay", r, lim):
            emit(line)
    if "scale" in want:
        r = res["scale"] = asyncio.run(replay(scale_lines(), binary))
        for line in replay_lines("scale (large, first hour, 60 TUs)", r, lim, shift=False):
            emit(line)
    return res


def main(argv: list[str] | None = None) -> int:
    # prog: how a user runs it (``./run bench``), not the module file argparse would name
    ap = argparse.ArgumentParser(prog="./run bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smaller runs, no replays (< 1 min)")
    ap.add_argument("--only", default=",".join(FIGURES),
                    help=f"comma-separated figures to measure (default: all of {','.join(FIGURES)})")
    ap.add_argument("--binary", help="bench the frozen binary instead of the source")
    ap.add_argument("--scenario", type=Path, help="shift scenario to replay")
    ap.add_argument("--json", type=Path, help="also write every figure as JSON here")
    ap.add_argument("--stages", action="store_true",
                    help="latency: run the sidecar under bench.stage_probe and print where each "
                         "event's time goes (stage by stage, commits, GC, CPU by thread)")
    ap.add_argument("--seconds", type=float, help="latency: seconds at 1,000 ev/s (default 5, --quick 2)")
    a = ap.parse_args(argv)
    only = tuple(x.strip() for x in a.only.split(",") if x.strip())
    unknown = [x for x in only if x not in FIGURES]
    if unknown:
        ap.error(f"unknown figure(s) {', '.join(unknown)}; choose from {', '.join(FIGURES)}")
    if hasattr(os, "getloadavg"):  # the figures are only as quiet as the machine was
        print("machine load (1, 5, 15 min): " + ", ".join(f"{x:.2f}" for x in os.getloadavg())
              + f" on {os.cpu_count()} CPU(s)")
    res = run(a.quick, only, a.binary, a.scenario, stages=a.stages, seconds=a.seconds)
    if a.json is not None:
        a.json.write_text(json.dumps(res, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
