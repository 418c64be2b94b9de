"""Golden's backed-up messages (issue 22 item 1; DESIGN §12.7; seed 003, Unanswered message,
Golden column: «При перегляді активних фаворитів онлайн — генерація Follow-up підстрахує»):
the project's own scenarios ``tests/scenarios/g_backup_*.jsonl`` through the real websocket, a
real sidecar process and the reference Stack."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.replay_util import replay

SCENARIOS = sorted((Path(__file__).resolve().parents[1] / "scenarios").glob("g_backup_*.jsonl"))


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_g_backup_scenario(path, tmp_path):
    rp, code = replay(path, tmp_path)
    assert code == 0, [r for r in rp.results if not r.ok]
