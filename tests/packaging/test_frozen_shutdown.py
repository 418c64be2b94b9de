"""The frozen binary keeps the shutdown promise too (issue 7 item 1): login → disconnect →
SIGTERM, 50 times, every exit within 2 s: code 0, not the watchdog's 5 (``sidecar_proc`` rule 2;
it used to hang in 3 of 28 runs)."""
from __future__ import annotations

import pytest

from tests.integration.shutdown_cycles import run_cycles

# one xdist group: the binary (the session fixture ``frozen``) is built once, in one worker
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("frozen")]


async def test_frozen_binary_always_exits_within_2_s_after_login_disconnect_sigterm(frozen, tmp_path):
    res = await run_cycles(tmp_path, 50, "SIGTERM", binary=str(frozen))
    assert not res.hangs and not res.bad_codes, res.summary() + "\n" + "\n".join(res.hangs + res.bad_codes)
    assert len(res.exits) == 50
