"""Every executable acceptance scenario of ../shared/scenarios/seed/ through the real websocket,
a real sidecar process, SQLite files and the reference Stack over HTTP."""
from __future__ import annotations

import pytest

from tests.integration.replay_util import SEED_DIR, replay

pytestmark = pytest.mark.shared  # skipped, with the reason, where ../shared is absent (tests/conftest.py)

SCENARIOS = sorted(SEED_DIR.glob("*.jsonl")) if SEED_DIR.is_dir() else []

# Scenarios of open issues: strict expected failures that name their issue, so each flips to
# XPASS (and fails, strict) the moment its issue lands and must then leave this table.
NOT_YET: dict[str, str] = {
}


def _param(path):
    why = NOT_YET.get(path.stem)
    marks = [pytest.mark.xfail(strict=True, reason=why)] if why else []
    return pytest.param(path, id=path.stem, marks=marks)


@pytest.mark.parametrize("path", [_param(p) for p in SCENARIOS])
def test_seed_scenario(path, tmp_path):
    rp, code = replay(path, tmp_path)
    assert code == 0, [r for r in rp.results if not r.ok]
