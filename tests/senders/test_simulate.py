"""The fleet simulator reproduces seed 000 §5's shape and claims (small fleets: fast)."""
from __future__ import annotations

import statistics

import pytest

from electron_stub.cli import main
from sidecar.senders.groups import STACK_GROUP, Group
from sidecar.senders.simulate import planned_five, simulate

RECIPE = Group(id="r", name="r", priority=1, cooldown_delay_from=15, cooldown_delay_to=45)


def test_shape_of_section_5():
    st = simulate(200, 7)
    exits = sum(st.verdicts.values())
    assert 0.80 <= st.verdicts["proven"] / exits <= 0.90
    assert 0.06 <= st.verdicts["fail-open"] / exits <= 0.14
    assert 0.02 <= st.verdicts["neutral"] / exits <= 0.08
    assert st.starts[1] > 5 * st.starts[2]  # most senders reset before cooldown #2
    assert st.warmup_sent >= st.warmup_confirmed > 0


def test_same_seed_same_numbers():
    a, b = simulate(30, 2, seed=3), simulate(30, 2, seed=3)
    assert (a.starts, a.verdicts, a.warmup_sent) == (b.starts, b.verdicts, b.warmup_sent)


def test_five_cooldowns_recipe_vs_ladder():
    ladder, recipe = planned_five(None), planned_five(RECIPE)
    assert 28 * 3600 <= statistics.median(ladder) <= 36 * 3600  # "~34 h"
    assert all(2 * 3600 <= x <= 5 * 3600 for x in recipe)  # "3–5 h"


def test_worst_first_cooldown_is_about_two_plus_two_hours():
    st = simulate(200, 7)
    assert max(st.planned_first) <= 2 * 3600
    assert 3.5 * 3600 <= max(st.first_total) <= 2 * 3600 + 2 * 70 * 60 + 3 * 7 * 60


def test_stack_group_never_parks():
    st = simulate(20, 3, group=STACK_GROUP, seed=1)
    # its cooldown ends with the health probe (DESIGN §10 "Groups"): never neutral any more
    assert not st.need_check and st.verdicts["proven"] > 0 and not st.verdicts["neutral"]


def test_cli_prints_tables_and_rejects_bad_group(capsys):
    assert main(["senders", "simulate", "--senders", "20", "--days", "1",
                 "--group", "cooldown_delay_from=15,cooldown_delay_to=45"]) == 0
    out = capsys.readouterr().out
    assert "Recipe beside the baseline" in out and "five cooldowns" in out
    assert main(["senders", "simulate", "--senders", "5", "--days", "1", "--group", "from_time=25:00,to_time=01:00"]) == 2
    assert "from_time" in capsys.readouterr().err


@pytest.mark.parametrize("bad", ["--senders=0", "--days=0"])
def test_cli_rejects_empty_fleet(bad, capsys):
    assert main(["senders", "simulate", bad]) == 2


def test_group_window_is_read_at_the_failure():
    night = Group(id="n", name="n", priority=1, failed_in_row=1, cooldown_delay_from=1, cooldown_delay_to=2,
                  from_time="22:00", to_time="06:00")
    st = simulate(30, 3, group=night, seed=2)
    short = sum(d < 180 for d in st.planned)
    assert 0 < short < len(st.planned)  # group delays at night, the ladder by day


def test_extensions_per_start_match_section_5():
    """§5: 3 252 extensions for 10 648 starts (0.31 a start) and 13 060 warm-ups sent (1.23).
    A probe answered "failed" at once during a bad spell made it 0.65 (issue 10 calibration)."""
    st = simulate(200, 7)
    starts = sum(st.starts.values())
    assert 0.25 <= st.extensions / starts <= 0.40
    assert 1.15 <= st.warmup_sent / starts <= 1.40
    assert 0.80 <= st.warmup_confirmed / starts <= 0.92


# ---- issue 23 item 5: groups on a subset, several at once, held-back time ----------------------
from sidecar.senders.simulate import Model, sender_names, share_cohort  # noqa: E402

CALM = Model(spells_per_day=1e-9, background=0.0, dead=0.0)  # no failures: only pacing holds sends


def test_share_cohort_is_exact_and_keyed_by_seed():
    names = sender_names(660)
    a = share_cohort(names, 0.2, seed=0)
    assert sum(a) == 132  # seed 000 §6: 132 of 660 in groups
    assert a == share_cohort(names, 0.2, seed=0) and a != share_cohort(names, 0.2, seed=1)
    assert sum(share_cohort(names, 0.0)) == 0 and all(share_cohort(names, 1.0))


def test_senders_outside_the_cohort_are_untouched_by_the_recipe():
    names = sender_names(60)
    cohort = share_cohort(names, 0.25, seed=2)
    rec = simulate(days=3, fleet_groups=[(RECIPE,) if c else () for c in cohort], names=names, seed=2)
    base = simulate(days=3, fleet_groups=[()] * 60, cohort=cohort, names=names, seed=2)
    assert rec.cohort.senders == base.cohort.senders == 15
    # keyed randomness per sender: the 45 ungrouped senders run exactly as in the baseline
    assert rec.sends - rec.cohort.sends == base.sends - base.cohort.sends
    assert sorted(set(rec.held) - set(rec.cohort.held)) == sorted(set(base.held) - set(base.cohort.held))
    assert rec.cohort.sends != base.cohort.sends  # and the cohort's differ


def test_group_pacing_is_in_minutes_and_held_back_is_measured():
    pacing = Group(id="p", name="p", priority=1, send_from_message_interval=120, send_to_message_interval=180)
    base = simulate(days=2, fleet_groups=[()] * 10, names=sender_names(10), model=CALM)
    assert base.held == [] and base.failed == 0  # nothing holds a send back
    st = simulate(days=2, fleet_groups=[(pacing,)] * 10, names=sender_names(10), model=CALM)
    # a send wanted 20–60 min after the last goes out 120–180 min after it: held 60–160 min
    assert st.held and all(60 * 60 <= w <= 160 * 60 for w in st.held)
    assert st.cohort.senders == 10 and len(st.cohort.held) == len(st.held)


def test_dead_devices_holds_are_kept_apart():
    st = simulate(days=2, fleet_groups=[(RECIPE,)] * 5, names=sender_names(5), model=Model(dead=1.0))
    assert st.held == [] and st.held_open == [] and st.held_dead > 0 and st.failed == st.sends


def test_day_and_night_groups_at_once_never_jump_the_window_edge():
    day = Group(id="d", name="day", priority=2, cooldown_delay_from=15, cooldown_delay_to=45,
                from_time="08:00", to_time="20:00")
    night = Group(id="n", name="night", priority=1, cooldown_delay_from=120, cooldown_delay_to=240,
                  from_time="20:00", to_time="08:00")
    st = simulate(days=4, fleet_groups=[(day, night)] * 60, names=sender_names(60), seed=1)
    # seed 000 §6: "Через межу вікна нічого не «перестрибує»: параметри читаються лише в момент фейлу"
    assert st.window["crossing"] > 10 and st.window["kept"] == st.window["crossing"]
    durations = [d / 60 for d in st.planned]
    assert any(15 <= d <= 45 for d in durations) and any(120 <= d <= 240 for d in durations)


def test_a_send_still_waiting_at_the_end_is_an_open_hold():
    slow = Group(id="s", name="s", priority=1, send_from_message_interval=1440, send_to_message_interval=1440)
    st = simulate(days=0.5, fleet_groups=[(slow,)] * 4, names=sender_names(4), model=CALM)
    # each sender sent once, then waits a day: its next send is still held when the run ends
    assert st.sends == 4 and st.held == [] and len(st.held_open) == 4 and all(w > 0 for w in st.held_open)
