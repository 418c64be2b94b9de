"""Exact instants on the virtual clock (trio MockClock style: ``end == start + draw``): every
duration, slot, lag and extension is the keyed draw of (sender, cooldown number, purpose) and
nothing else (seed 000 §2–§3, DESIGN §5, §10)."""
from __future__ import annotations

import pytest

from sidecar.core.rng import KeyedRandom
from sidecar.senders import health as h
from sidecar.senders.groups import Group

T0 = 1_780_000_000.0
SEED = 11
RNG = KeyedRandom(SEED)
M = h.HealthMachine(KeyedRandom(SEED))
MIN, HOUR = 60.0, 3600.0


def draw(lo: float, hi: float, sender: str, no: int, *purpose: object) -> float:
    return RNG.uniform(lo, hi, "sender", sender, no, *purpose)


def start(s: h.SenderState, at: float, group: Group | None = None) -> h.SenderState:
    for i in range(2):
        s = M.handle(s, h.Failed(at + i, at + i - 1, group=group)).state
    assert s.state == h.COOLDOWN
    return s


def release(s: h.SenderState) -> h.SenderState:
    """Fire the timers to the verdict, the probe answered at once (proven)."""
    while s.state == h.COOLDOWN:
        t = h.next_timer(s)
        step = M.handle(s, h.Tick(t))
        s = step.state
        if step.send_probe:
            s = M.handle(s, h.ProbeResult(t, ok=True)).state
    return s


def test_ladder_durations_are_the_keyed_draws_then_path_a():
    s, at = h.SenderState(sender="w"), T0
    for n in range(1, 6):
        s = start(s, at)
        lo, hi = (60 * MIN, 120 * MIN) if n <= 3 else (12 * HOUR, 14 * HOUR)
        assert s.cooldown_no == n and s.cooldown_times == n
        assert s.cooldown_start == at + 1
        assert s.cooldown_end == at + 1 + draw(lo, hi, "w", n, "duration")
        assert s.exit_at == s.cooldown_end + draw(0, 7 * MIN, "w", n, "step", 0)
        planned_exit = s.exit_at
        s = release(s)
        assert s.next_send_at == planned_exit + 10 * MIN  # probe answered at once: proven at exit_at
        at = s.next_send_at
    s = M.handle(M.handle(s, h.Failed(at, at - 1)).state, h.Failed(at + 1, at)).state
    assert (s.state, s.need_check_path, s.cooldown_times, s.cooldown_no) == (h.NEED_CHECK, "A", 5, 5)


def test_rest_after_release_is_exactly_ten_minutes():
    s = start(h.SenderState(sender="w"), T0)
    exit_at = s.exit_at
    s = release(s)
    assert s.state == h.ACTIVE and s.next_send_at == exit_at + 10 * MIN
    assert h.may_send(s, exit_at + 10 * MIN - 0.001) == (False, exit_at + 10 * MIN)
    assert h.may_send(s, exit_at + 10 * MIN) == (True, None)


def test_probe_slot_long_and_short():
    s = start(h.SenderState(sender="w"), T0)
    slot = draw(20 * MIN, 30 * MIN, "w", 1, "slot")
    assert s.probe_at == max(T0 + 1 + slot, s.cooldown_end - 75 * MIN)
    short = Group(id="g", name="g", priority=1, cooldown_delay_from=40, cooldown_delay_to=50)
    s = start(h.SenderState(sender="v"), T0, short)
    assert s.cooldown_end == T0 + 1 + draw(40 * MIN, 50 * MIN, "v", 1, "duration")
    assert s.probe_at == T0 + 1 + draw(5 * MIN, 10 * MIN, "v", 1, "slot")  # end - 75 min is earlier


def test_extensions_are_keyed_and_fail_open_after_two():
    s = start(h.SenderState(sender="w"), T0)
    ends = []
    while s.state == h.COOLDOWN:
        t = h.next_timer(s)
        step = M.handle(s, h.Tick(t))
        if step.history and step.history[-1].code == h.EXTENDED:
            k = step.state.extensions
            assert step.state.cooldown_end == t + draw(55 * MIN, 70 * MIN, "w", 1, "extension", k)
            assert step.state.exit_at == step.state.cooldown_end + draw(0, 7 * MIN, "w", 1, "step", k)
            ends.append(step.state.cooldown_end)
        s = step.state
        if step.send_probe:
            s = M.handle(s, h.ProbeResult(t, ok=False)).state
    assert len(ends) == 2 and step.history[-1].note == "fail-open"


@pytest.mark.parametrize("first,reset", [(0.0, False), (1.0, True)])
def test_eleven_deliveries_in_fourteen_hours_edge(first, reset):
    """The window is (failure − 14 h, failure]: a delivery exactly 14 h before does not count."""
    fail_at = T0 + 14 * HOUR
    s = h.SenderState(sender="w", cooldown_times=2)
    times = [T0 + first] + [T0 + HOUR + i * 60 for i in range(10)]
    for t in times:
        s = M.handle(s, h.Delivered(t, t - 1)).state
    s = M.handle(s, h.Failed(fail_at, fail_at - 1)).state
    assert s.state == h.ACTIVE and s.failed_in_row == 1
    assert s.cooldown_times == (0 if reset else 2)
