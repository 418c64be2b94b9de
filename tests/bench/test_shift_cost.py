"""``bench.shift_cost`` and ``bench/pass_loop.py``: a replay's cost with the sidecars' SQLite
counted by the bench-only ``sitecustomize`` (never production code), and the unchanged RU
Online pass loop."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from bench import shift_cost

ROOT = Path(__file__).resolve().parents[2]


def test_a_counted_replay_reports_cpu_frames_and_the_sidecars_transactions(tmp_path):
    scenario = tmp_path / "smoke.jsonl"
    subprocess.run([sys.executable, "-m", "electron_stub", "generate", "--preset", "smoke",
                    "--hours", "0.25", "-o", str(scenario)], check=True, cwd=ROOT)
    r = shift_cost.run_once(str(scenario), str(tmp_path / "t.jsonl"), count=True)
    assert r["exit"] == 0 and r["wall_s"] > 0 and r["harness_cpu_s"] > 0 and r["sidecar_cpu_s"] > 0
    assert r["frames"].get("session.login", 0) >= 1
    # poll answers pushed into frames replace round trips (electron_stub.pushed_polls)
    assert r["pushed_answers"]["used"] > 0 and r["pushed_answers"]["dropped"] >= 0
    assert r["round_trips"] == sum(r["frames"].values()) + sum(r["request_frames"].values())
    sql = r["sql"]
    assert r["sidecars"] >= 1
    assert 0 < sql["begins"] <= sql["statements"] and sql["commits"] <= sql["begins"]
    assert sql["writes"] > 0 and (tmp_path / "t.jsonl").stat().st_size > 0


def test_the_pass_loop_counts_four_golden_passes_a_minute():
    out = subprocess.run([sys.executable, "bench/pass_loop.py", "2"], check=True, cwd=ROOT,
                         capture_output=True, text=True).stdout.split()
    assert int(out[0]) == 8 and int(out[1]) > 0
