"""Every executable acceptance scenario of ../shared/scenarios/seed/ through the real websocket,
a real sidecar process, SQLite files and the reference Stack over HTTP."""
from __future__ import annotations

import pytest

from tests.integration.replay_util import SEED_DIR, replay

pytestmark = pytest.mark.shared

SCENARIOS = sorted(SEED_DIR.glob("*.jsonl")) if SEED_DIR.is_dir() else []
# Follow-up mail (seed 001) is its own issue; these flip to XPASS (and fail, strict) when it lands.
NOT_YET = {"m01_post_chat_mail_even_offline", "m03_mail_read_golden",
           "m05_last_tu_mail_older_than_6h", "n02_chathouse_online_now_mail_when_no_chat_limit"}


def _param(path):
    marks = [pytest.mark.xfail(strict=True, reason="Follow-up mail (seed 001) not implemented yet")] \
        if path.stem in NOT_YET else []
    return pytest.param(path, id=path.stem, marks=marks)


@pytest.mark.skipif(not SCENARIOS, reason=f"{SEED_DIR} is absent (../shared is beside the checkout only)")
@pytest.mark.parametrize("path", [_param(p) for p in SCENARIOS])
def test_seed_scenario(path, tmp_path):
    rp, code = replay(path, tmp_path)
    assert code == 0, [r for r in rp.results if not r.ok]
