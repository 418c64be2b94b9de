"""The project's own acceptance scenarios (tests/scenarios/*.jsonl; ../shared is read-only):
the triggers the seeds name and the reference platform only plays since the scenario format's
revision 2 — Chathouse tab new's empty dialog and mutual like (Open Limits), a socket gap and its
reconnect (check chat «при реконекті сокета»), platform requests counted per pair and method
(seed 001: one mail-history read per pair), a TU Stack has no favorites list for — each through
the real websocket, a real sidecar process, SQLite files and the reference Stack over HTTP."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.replay_util import replay

SCENARIO_DIR = Path(__file__).resolve().parents[1] / "scenarios"
SCENARIOS = sorted(SCENARIO_DIR.glob("*.jsonl"))

def _param(path: Path):
    return pytest.param(path, id=path.stem)


def test_there_are_scenarios():
    assert SCENARIOS, f"no scenarios in {SCENARIO_DIR}"


@pytest.mark.parametrize("path", [_param(p) for p in SCENARIOS])
def test_project_scenario(path, tmp_path):
    rp, code = replay(path, tmp_path)
    assert code == 0, [r for r in rp.results if not r.ok]
