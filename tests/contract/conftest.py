"""A smoke replay's real frames, both ways, captured once per session (``ELECTRON_STUB_CAPTURE``)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def captured(tmp_path_factory) -> Path:
    """The capture file of a generated smoke replay (three projects, one hour, virtual clock)."""
    tmp = tmp_path_factory.mktemp("capture")
    scenario, frames = tmp / "smoke.jsonl", tmp / "frames.jsonl"
    py = [sys.executable, "-m", "electron_stub"]
    subprocess.run([*py, "generate", "--preset", "smoke", "-o", str(scenario)], cwd=ROOT, check=True,
                   capture_output=True)
    # batched (platform.events, as a replayer sends) and one event per frame (platform.event, as
    # Electron sends live), into one file: each run's auth starts its ids afresh
    for i, extra in enumerate(([], ["--no-batch"])):
        r = subprocess.run([*py, "replay", str(scenario), "--quiet", "--data-dir", str(tmp / f"data{i}"), *extra],
                           cwd=ROOT, capture_output=True, text=True,
                           env={**os.environ, "ELECTRON_STUB_CAPTURE": str(frames)})
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    return frames


@pytest.fixture(scope="session")
def frames(captured) -> list[dict]:
    return [json.loads(line) for line in captured.read_text(encoding="utf-8").splitlines()]
