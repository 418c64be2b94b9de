"""Clock, scheduler and keyed randomness (DESIGN §5)."""
from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from sidecar.core.clock import ScaledClock, VirtualClock, from_iso, to_iso
from sidecar.core.rng import KeyedRandom
from sidecar.core.scheduler import Scheduler


def test_virtual_clock_only_moves_forward():
    c = VirtualClock()
    assert not c.is_set
    with pytest.raises(RuntimeError):
        c.now()
    assert c.advance_to(100.0) == 100.0
    assert c.advance_to(50.0) == 100.0  # never backwards
    assert c.advance_to(160.5) == 160.5


def test_scaled_clock_runs_k_times_faster():
    c = ScaledClock(3600.0, start=0.0)
    assert c.real_delay(3600.0) == 1.0
    with pytest.raises(ValueError):
        ScaledClock(0)


def test_iso_round_trip_to_the_millisecond():
    t = 1796025600.0 + 12.345
    assert to_iso(t) == "2026-11-30T08:00:12.345Z"
    assert from_iso(to_iso(t)) == round(t, 3)
    assert to_iso(1796025600.0) == "2026-11-30T08:00:00Z"


def test_scheduler_orders_by_due_then_insertion_and_replaces_keys():
    s = Scheduler()
    s.schedule("b", 10.0)
    s.schedule("a", 10.0)
    s.schedule("c", 5.0)
    s.schedule("b", 20.0)  # moved
    assert s.cancel("zzz") is False
    assert [k for k, _, _ in s.iter_due(15.0)] == ["c", "a"]
    assert s.next_due() == 20.0 and len(s) == 1
    assert s.pop_due(19.9) is None
    assert s.pop_due(20.0)[0] == "b"


def test_scheduler_handlers_may_schedule_due_timers_while_popping():
    s = Scheduler()
    s.schedule(("t", 1), 1.0)
    seen = []
    while (item := s.pop_due(10.0)) is not None:
        seen.append(item[0])
        if item[0] == ("t", 1):
            s.schedule(("t", 2), 1.0)  # due now: popped in the same drain
    assert seen == [("t", 1), ("t", 2)]
    s.schedule(("x", 1), 3.0)
    s.schedule(("y", 1), 4.0)
    assert s.cancel_where(lambda k: k[0] == "x") == 1
    assert s.next_due() == 4.0


def test_keyed_draws_depend_only_on_seed_and_key():
    a, b = KeyedRandom(7), KeyedRandom(7)
    assert a.uniform(60, 180, "tu", "ru", "src", 0) == b.uniform(60, 180, "tu", "ru", "src", 0)
    assert a.unit("k", 1) != a.unit("k", 2)
    assert KeyedRandom(8).unit("k", 1) != a.unit("k", 1)
    assert a.chance(1.0, "x") and not a.chance(0.0, "x")


def test_keyed_chances_have_the_stated_frequency():
    r = KeyedRandom("deployment")
    n = 20000
    hits = sum(r.chance(0.75, "tu", i, "roll") for i in range(n))
    assert abs(hits / n - 0.75) < 4 * (0.75 * 0.25 / n) ** 0.5


@given(st.text(), st.integers(), st.floats(0, 1e6))
def test_uniform_stays_in_range(k1, k2, lo):
    v = KeyedRandom(1).uniform(lo, lo + 120, k1, k2)
    assert lo <= v <= lo + 120
