"""Stack's flush cadence (sidecar.router.cadence): new writes on the grid of the interval,
retries at their exact ladder instants, the instant kept in memory; the setting is checked
(a bad value is one line on stderr and exit 2)."""
from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest

from sidecar.config import Settings
from sidecar.router.attempt import STACK_LADDER
from sidecar.router.cadence import DEFAULT_INTERVAL_S, StackCadence

T0 = 1796025600.0  # a multiple of 10
ROOT = Path(__file__).resolve().parents[2]


def test_first_attempts_wait_for_the_next_grid_instant():
    c = StackCadence(10.0)
    assert [c.grid(T0 + x) for x in (0.0, 0.001, 3.0, 9.999, 10.0, 10.5)] == [
        T0, T0 + 10, T0 + 10, T0 + 10, T0 + 10, T0 + 20]
    assert StackCadence(7.5).grid(T0 + 1) == math.ceil((T0 + 1) / 7.5) * 7.5
    # interval 0 (the wall clock): at once
    assert StackCadence(0.0).grid(T0 + 3.25) == T0 + 3.25


def test_retries_keep_their_ladder_instants_and_the_sooner_instant_wins():
    c = StackCadence(10.0)
    assert STACK_LADDER == (5.0, 15.0, 30.0, 60.0, 120.0)
    assert c.instant(None, None) is None
    assert c.instant(T0 + 3, None) == T0 + 10
    assert c.instant(None, T0 + 15) == T0 + 15  # attempt at T0 + 10, retry + 5 s: off the grid
    assert c.instant(T0 + 12, T0 + 15) == T0 + 15  # the retry's flush takes the fresh write too
    assert c.instant(T0 + 3, T0 + 15) == T0 + 10


def test_the_instant_is_kept_in_memory_between_passes():
    c = StackCadence(10.0)
    assert c.flush_at is None and not c.due(T0 + 1e9)
    assert c.queued(T0 + 3) == T0 + 10 and c.flush_at == T0 + 10
    assert c.queued(T0 + 14) == T0 + 10  # a later write joins the planned flush
    assert not c.due(T0 + 9.999) and c.due(T0 + 10)
    assert c.after_pass(T0 + 14, None) == T0 + 20  # the pass at T0 + 10 left one (queued later)
    assert c.after_pass(None, T0 + 25) == T0 + 25
    assert c.after_pass(None, None) is None and c.flush_at is None
    assert c.queued(T0 + 31) == T0 + 40


@pytest.mark.parametrize("bad", [-1.0, math.inf, math.nan])
def test_a_bad_interval_is_refused(bad):
    with pytest.raises(ValueError):
        StackCadence(bad)


def test_the_setting_defaults_and_is_checked(monkeypatch):
    assert Settings(token="t").stack_flush_interval_s == DEFAULT_INTERVAL_S == 10.0
    monkeypatch.setenv("SIDECAR_STACK_FLUSH_INTERVAL_S", "2.5")
    assert Settings(token="t").stack_flush_interval_s == 2.5
    for bad in ("-1", "nan", "inf", "soon", "7200"):
        monkeypatch.setenv("SIDECAR_STACK_FLUSH_INTERVAL_S", bad)
        with pytest.raises(ValueError):
            Settings(token="t")


def test_a_bad_interval_setting_is_one_line_and_exit_2(tmp_path):
    r = subprocess.run([sys.executable, "-m", "sidecar", "serve", "--data-dir", str(tmp_path)],
                       env={"SIDECAR_TOKEN": "t", "SIDECAR_STACK_FLUSH_INTERVAL_S": "-5",
                            "PATH": "/usr/bin:/bin"}, cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert r.returncode == 2, r.stderr
    assert "SIDECAR_STACK_FLUSH_INTERVAL_S" in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_the_flag_sets_it(tmp_path):
    from sidecar.cli.main import _parser
    from sidecar.cli.preflight import load_settings

    args = _parser().parse_args(["serve", "--stack-flush-interval-s", "2.5", "--data-dir", str(tmp_path)])
    overrides = {k: v for k, v in vars(args).items() if k != "cmd" and v is not None}
    assert load_settings(overrides).stack_flush_interval_s == 2.5
