"""``python -m bench.shift_cost SCENARIO [--trace OUT] [--count] [--no-push]``: what one replay
costs — wall seconds, harness CPU, sidecar CPU, and (``--count``) the sidecars' SQLite
transactions and statements — with the load average beside each run (issue 24: measure each
lever before and after).

Rules / theory of operation
---------------------------
* The replay runs in this process (:func:`electron_stub.cli.main` ``replay … --quiet``): its
  ``RUSAGE_SELF`` is the harness's CPU (the reference Stack's handler threads included), its
  ``RUSAGE_CHILDREN`` after the run the sidecars' (every sidecar is reaped by then, killed ones
  too) — user + system seconds.  Wall is ``time.monotonic``.
* ``--count``: the sidecars start with ``bench/sqlcount`` on their ``PYTHONPATH``; its
  ``sitecustomize`` counts each connection's statements through SQLite's trace callback
  (:mod:`bench.sqlcount.sitecustomize`) — a bench-only wrapper, nothing in production code.
  The callback costs sidecar CPU, so a ``--count`` run's CPU figures are not the ones to quote;
  its counts are exact (a killed sidecar loses < 500 statements of its last stretch).
* ``--profile DIR``: each sidecar runs under cProfile (the same ``sitecustomize``) and leaves
  ``DIR/<pid>.prof`` at its exit (a killed one leaves none).
* ``frames``: the frames the harness sent the sidecars, by method (``Replay.frames``);
  ``request_frames``: the sidecars' ``platform.request(s)`` round trips; ``round_trips`` both;
  ``pushed_answers``: poll answers pushed into frames instead (``electron_stub.pushed_polls``:
  ``used``, and ``dropped`` — pushed for a pass that did not run).  ``transactions_per_frame``
  divides the write transactions by every frame sent.
* Prints one JSON object per run.  ``/proc/loadavg``'s 1-minute figure is read before and after.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _load() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


class _Seen:
    """The replay's :class:`electron_stub.replay.Replay`, caught as it is made (for its frame
    counters)."""
    replay: object = None


def _catch_replay() -> None:
    from electron_stub import replay

    init = replay.Replay.__init__
    if getattr(init, "_caught", False):
        return

    def caught(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        init(self, *args, **kwargs)
        _Seen.replay = self

    caught._caught = True  # type: ignore[attr-defined]
    replay.Replay.__init__ = caught  # type: ignore[method-assign]


def run_once(scenario: str, trace: str | None, count: bool, profile: str | None = None,
             push: bool = True) -> dict:
    """One replay in this process (module rules); returns its figures."""
    from electron_stub import cli

    _catch_replay()

    with tempfile.TemporaryDirectory(prefix="shift-cost-") as tmp:
        out = Path(trace) if trace else Path(tmp) / "trace.jsonl"
        env_before = dict(os.environ)
        if profile:
            Path(profile).mkdir(parents=True, exist_ok=True)
            os.environ["BENCH_PROFILE_DIR"] = str(Path(profile).resolve())
        if count:
            counts = Path(tmp) / "sql"
            counts.mkdir()
            os.environ["BENCH_SQL_COUNT_DIR"] = str(counts)
        if count or profile:
            os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE / "sqlcount"),
                                                                      os.environ.get("PYTHONPATH")]))
        load0 = _load()
        s0, w0 = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
        with contextlib.redirect_stdout(io.StringIO()):
            code = cli.main(["replay", scenario, "--trace", str(out), "--quiet",
                             "--data-dir", str(Path(tmp) / "data"), *([] if push else ["--no-push"])])
        wall = time.monotonic() - w0
        s1, c1 = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        os.environ.clear()
        os.environ.update(env_before)
        r: dict = {"scenario": Path(scenario).name, "exit": code, "wall_s": round(wall, 2),
                   "harness_cpu_s": round(s1.ru_utime + s1.ru_stime - s0.ru_utime - s0.ru_stime, 2),
                   "sidecar_cpu_s": round(c1.ru_utime + c1.ru_stime, 2),
                   "load_before": load0, "load_after": _load()}
        rp = _Seen.replay
        r["frames"] = dict(getattr(rp, "frames", {}))  # sidecar-bound frames by method
        r["request_frames"] = dict(getattr(rp, "request_frames", {}))  # the sidecars' round trips
        pusher = getattr(rp, "pusher", None)  # poll answers pushed into frames instead of round trips
        if pusher is not None:
            r["pushed_answers"] = {"used": pusher.used, "dropped": pusher.dropped}
        r["round_trips"] = sum(r["frames"].values()) + sum(r["request_frames"].values())
        r["overlap"] = round(wall / max(1e-9, r["harness_cpu_s"] + r["sidecar_cpu_s"]), 2)
        if count:
            total: dict = {}
            for p in counts.glob("*.json"):
                for k, v in json.loads(p.read_text()).items():
                    if isinstance(v, dict):  # BENCH_SQL_DETAIL's tables: summed per key
                        into = total.setdefault(k, {})
                        for kk, vv in v.items():
                            into[kk] = into.get(kk, 0) + vv
                    else:
                        total[k] = total.get(k, 0) + v
            r["sql"] = total
            r["sidecars"] = len(list(counts.glob("*.json")))
            n = sum(r["frames"].values())
            if n:
                r["transactions_per_frame"] = round(total.get("begins", 0) / n, 2)
        return r


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.shift_cost")
    ap.add_argument("scenario")
    ap.add_argument("--trace", help="keep the (first run's) trace here")
    ap.add_argument("--count", action="store_true", help="count SQLite transactions and statements")
    ap.add_argument("--profile", metavar="DIR", help="cProfile each sidecar into DIR/<pid>.prof")
    ap.add_argument("--no-push", action="store_true",
                    help="the replay asks every poll pass by round trip (the cost before pushed answers)")
    a = ap.parse_args(argv)
    print(json.dumps(run_once(a.scenario, a.trace, a.count, a.profile, push=not a.no_push)), flush=True)
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
