"""A crash does not move the 30-minute check-chat grid (issue 7 item 6; seed 003 "check chat —
при логіні, при реконекті сокета і, можливо, раз на 30 хв"): the login's own check chat runs at
once, and the periodic ones stay on the instants a sidecar that never stopped would use."""
from __future__ import annotations

import pytest

from tests.sidecar.world import T0, World

HOUR = 3600.0


def check_chat_times(w: World, asked: list[float]):
    orig = w.answer

    def answer(tu, method, params):
        if method == "scroll_new":
            asked.append(w.d.now)
        return orig(tu, method, params)
    return answer


def run(crash_at: float | None, until: float, down: float = 0.0) -> list[float]:
    asked: list[float] = []
    w = World("chathouse", "c-tu-1", seed=7)
    w.d.answer = check_chat_times(w, asked)
    w.login([])
    if crash_at is not None:
        w.at(crash_at)
        w2 = World("chathouse", "c-tu-1", seed=7)  # a new process: same seed, nothing in memory
        asked.append(-1.0)  # marks the restart
        w2.d.answer = check_chat_times(w2, asked)
        w2.at(crash_at + down)
        w2.login([])
        w = w2
    w.at(until)
    return asked


@pytest.mark.parametrize("crash_at, down", [
    (1.5 * HOUR + 17 * 60, 0.0),  # between two grid instants, restarted at once
    (1.5 * HOUR + 17 * 60, 25 * 60.0),  # down across a grid instant
    (None, 0.0),  # exactly on a grid instant (filled in below)
])
def test_restart_keeps_the_check_chat_grid_and_adds_the_logins_own_check(crash_at, down):
    steady = run(None, 4 * HOUR)
    assert len(steady) >= 8
    grid = steady[1:]
    assert all(round(b - a, 6) == 1800.0 for a, b in zip(grid, grid[1:]))
    if crash_at is None:
        crash_at = grid[3] - T0
    crashed = run(crash_at, 4 * HOUR, down)
    t_crash, t_back = T0 + crash_at, T0 + crash_at + down
    cut = crashed.index(-1.0)
    before, after = crashed[:cut], crashed[cut + 1:]
    assert before == [t for t in steady if t <= t_crash]
    assert after[0] == t_back  # the login's own check chat, at once
    assert after[1:] == [t for t in grid if t > t_back]  # then the same grid as without a crash
