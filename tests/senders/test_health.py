"""The health machine on a virtual clock, each rule at its edges (seed 000 §1–§4, DESIGN §10)."""
from __future__ import annotations

import pytest
from msgspec.structs import replace

from sidecar.core.rng import KeyedRandom
from sidecar.senders import health as h
from sidecar.senders.groups import STACK_GROUP, Group

T0 = 1_780_000_000.0
M = h.HealthMachine(KeyedRandom(7))


def run(s, *events):
    rows = []
    for ev in events:
        step = M.handle(s, ev)
        for r in step.history:  # every emitted code is a row of the table for this from-state
            assert any(k[0] == s.state and v[1] == r.code for k, v in h.TRANSITIONS.items()), (s.state, r)
        s = step.state
        rows += step.history
    return s, rows


def fail(at, **kw):
    return h.Failed(at=at, started_at=kw.pop("started_at", at - 1), **kw)


def to_cooldown(s, at, group=None):
    s, _ = run(s, fail(at, group=group), fail(at + 1, group=group))
    assert s.state == h.COOLDOWN
    return s


def drive(s, until, probe_ok=True, terminal=False):
    """Fire the sender's timers up to ``until``; answer every probe at once."""
    rows = []
    while (t := h.next_timer(s)) is not None and t <= until:
        step = M.handle(s, h.Tick(t))
        s, rows = step.state, rows + step.history
        if step.send_probe:
            step = M.handle(s, h.ProbeResult(t + 5, ok=probe_ok, terminal=terminal))
            s, rows = step.state, rows + step.history
    return s, rows


def test_threshold_two_and_rows():
    s, rows = run(h.SenderState(sender="w"), fail(T0))
    assert s.state == h.ACTIVE and s.failed_in_row == 1 and [r.code for r in rows] == [109]
    s, rows = run(s, fail(T0 + 1))
    assert s.state == h.COOLDOWN and [r.code for r in rows] == [109, 101] and s.cooldown_times == 1
    assert 60 * 60 <= s.cooldown_end - (T0 + 1) <= 120 * 60


def test_delivery_resets_failed_in_row():
    s, _ = run(h.SenderState(sender="w"), fail(T0), h.Delivered(T0 + 1, T0), fail(T0 + 2))
    assert s.state == h.ACTIVE and s.failed_in_row == 1


def test_terminal_failures_never_count():
    s, rows = run(h.SenderState(sender="w"), *[fail(T0 + i, retryable=False) for i in range(10)])
    assert s.state == h.ACTIVE and s.failed_in_row == 0 and rows == []


def test_final_retry_does_not_increment_but_checks():
    s, rows = run(h.SenderState(sender="w"), fail(T0), fail(T0 + 1, final=True))
    assert s.failed_in_row == 1 and s.state == h.ACTIVE and [r.code for r in rows] == [109]
    # at the threshold already (group threshold 1 reached by the earlier failure), the check runs
    g1 = Group(id="g", name="g", priority=1, failed_in_row=1)
    s, rows = run(h.SenderState(sender="w", failed_in_row=1), fail(T0, final=True, group=g1))
    assert s.state == h.COOLDOWN and [r.code for r in rows] == [101]


@pytest.mark.parametrize("fir,expect", [(0, 2), (1, 1), (3, 3)])
def test_group_threshold(fir, expect):
    g = Group(id="g", name="g", priority=1, failed_in_row=fir)
    s = h.SenderState(sender="w")
    for i in range(expect):
        assert s.state == h.ACTIVE
        s, _ = run(s, fail(T0 + i, group=g))
    assert s.state == h.COOLDOWN


def test_ladder_then_need_check_path_a():
    s, t = h.SenderState(sender="w"), T0
    durations = []
    for n in range(1, 6):
        s = to_cooldown(s, t)
        durations.append(s.cooldown_end - s.cooldown_start)
        s, rows = drive(s, t + 30 * 3600)
        assert s.state == h.ACTIVE and rows[-1].note == "proven"
        t = s.next_send_at + 1
    assert all(3600 <= d <= 7200 for d in durations[:3]) and all(12 * 3600 <= d <= 14 * 3600 for d in durations[3:])
    s, rows = run(s, fail(t), fail(t + 1))
    assert s.state == h.NEED_CHECK and s.need_check_path == "A" and rows[-1].code == 103
    assert h.may_send(s, t + 10 ** 6) == (False, None)
    s, rows = run(s, h.Recover(t + 5))
    assert s.state == h.ACTIVE and s.cooldown_times == 0 and rows[-1].code == 106


def test_group_delay_replaces_ladder_and_zero_is_ignored():
    g = Group(id="g", name="g", priority=1, cooldown_delay_from=15, cooldown_delay_to=45)
    s = to_cooldown(h.SenderState(sender="w"), T0, g)
    assert 15 * 60 <= s.cooldown_end - s.cooldown_start <= 45 * 60
    half = Group(id="h", name="h", priority=2, cooldown_delay_from=0, cooldown_delay_to=45)
    s = to_cooldown(h.SenderState(sender="w"), T0, half)
    assert 3600 <= s.cooldown_end - s.cooldown_start <= 7200


def _with_deliveries(times):
    s = h.SenderState(sender="w", cooldown_times=3)
    for t in times:
        s, _ = run(s, h.Delivered(t, t - 1))
    return s


@pytest.mark.parametrize("count,reset", [(10, False), (11, True)])
def test_reset_after_11_deliveries_in_14h(count, reset):
    s = _with_deliveries([T0 + i * 60 for i in range(count)])
    s, _ = run(s, fail(T0 + 13 * 3600))
    assert (s.cooldown_times == 0) is reset


def test_11_spread_over_15h_do_not_reset():
    s = _with_deliveries([T0 + i * 1.5 * 3600 for i in range(11)])  # first at 0, last at 15 h
    s, _ = run(s, fail(T0 + 15 * 3600 + 1))
    assert s.cooldown_times == 3


def test_reset_checked_only_at_a_failure_below_threshold():
    s = _with_deliveries([T0 + i * 60 for i in range(20)])
    assert s.cooldown_times == 3  # deliveries alone never reset (seed 000 §2)
    s, _ = run(replace(s, failed_in_row=1), fail(T0 + 3600))  # reaches the threshold: cooldown #4, no reset
    assert s.state == h.COOLDOWN and s.cooldown_times == 4


def test_warm_up_slot_and_verdicts():
    s = to_cooldown(h.SenderState(sender="w"), T0)
    start, end = s.cooldown_start, s.cooldown_end
    assert s.probe_at >= start + 20 * 60 and s.probe_at >= end - 75 * 60
    s, rows = drive(s, end + 3600)
    codes = [r.code for r in rows]
    assert codes == [104, 105, 100] and rows[-1].note == "proven"
    assert 0 <= rows[-1].at - end <= 7 * 60  # the scheduler's step lag
    ok, nxt = h.may_send(s, rows[-1].at + 599)
    assert not ok and nxt == rows[-1].at + 600


def test_unconfirmed_extends_twice_then_fail_open():
    s = to_cooldown(h.SenderState(sender="w"), T0)
    s, rows = drive(s, T0 + 10 * 3600, probe_ok=False)
    codes = [r.code for r in rows]
    assert codes == [104, 102, 104, 102, 104, 100] and rows[-1].note == "fail-open"
    # each warm-up says which one it is: the slot's own, then one per extension (not "extension 0")
    assert [r.note for r in rows if r.code == 104] == ["warm-up slot", "extension 1", "extension 2"]
    assert rows[-1].at - T0 <= 2 * 3600 + 2 * 70 * 60 + 3 * 7 * 60 + 2


SHORT = Group(id="s", name="short", priority=1, failed_in_row=3, cooldown_delay_from=1, cooldown_delay_to=2)


def test_no_slot_is_neutral():
    """A (non-built-in) group whose cooldown is shorter than its slot gets no warm-up: neutral.
    (The built-in Stack group is probed at the end instead: the tests below.)"""
    s = h.SenderState(sender="w")
    t = T0
    for n in range(3):
        s, _ = run(s, *[fail(t + i, group=SHORT) for i in range(3)])
        assert s.state == h.COOLDOWN and s.probe_at is None and s.cooldown_end - s.cooldown_start <= 120
        assert not s.end_probe
        step = M.handle(s, h.Tick(s.exit_at))
        assert step.history[-1].note == "neutral"
        s, t = step.state, step.state.next_send_at


def test_stack_raises_need_check_fact_after_fifth():
    s = h.SenderState(sender="stack", cooldown_times=5)
    facts = []
    for i in range(3):
        step = M.handle(s, fail(T0 + i, group=STACK_GROUP))
        s = step.state
        facts += step.facts
    assert s.state == h.COOLDOWN
    assert [(f.action, f.priority) for f in facts] == [("cooldown", "high"), ("need_check", "critical")]


def test_a_failed_probe_is_not_retried_inside_its_slot():
    """Seed 000 §3: the proof is ONE warm-up send per slot; an unconfirmed one is answered by
    the extension (§2), which has a probe of its own — never by a resend in the same slot
    (docs/decisions.md "Sender health")."""
    s = to_cooldown(h.SenderState(sender="w"), T0)
    step = M.handle(s, h.Tick(s.probe_at))
    assert step.send_probe
    s = M.handle(step.state, h.ProbeResult(s.probe_at + 1, ok=False, terminal=False)).state
    sent = 0
    for t in range(int(s.probe_at) + 60, int(s.exit_at), 300):  # the target is back; ticks come
        step = M.handle(s, h.Tick(float(t)))
        s, sent = step.state, sent + step.send_probe
        assert [r.code for r in step.history] == []
    assert sent == 0 and h.next_timer(s) == s.exit_at  # the next thing is the verdict
    at = s.exit_at
    step = M.handle(s, h.Tick(at))
    assert [r.code for r in step.history] == [102] and h.next_timer(step.state) == at
    step = M.handle(step.state, h.Tick(at))
    assert [r.code for r in step.history] == [104] and step.send_probe  # the extension's own


def test_probe_failed_terminally_is_path_b():
    s = to_cooldown(h.SenderState(sender="w"), T0)
    s, rows = drive(s, T0 + 5 * 3600, probe_ok=False, terminal=True)
    assert s.state == h.NEED_CHECK and s.need_check_path == "B" and rows[-1].code == 103


def test_late_results_change_nothing():
    s = to_cooldown(h.SenderState(sender="w"), T0)
    before = s
    s, rows = run(s, h.Delivered(T0 + 10, started_at=T0 - 5), fail(T0 + 11, started_at=T0 - 5))
    assert s == before and rows == []
    s, _ = drive(s, T0 + 5 * 3600)
    s2, rows = run(s, fail(s.next_send_at + 1, started_at=T0 - 5))  # late even after release
    assert s2 == s and rows == []


def test_20_queued_deliveries_one_probe():
    s = to_cooldown(h.SenderState(sender="w"), T0)
    ok, nxt = h.may_send(s, T0 + 60)
    assert not ok and nxt == s.exit_at + 600
    probes = 0
    t = s.probe_at
    for i in range(20):  # 20 waiting deliveries ask again and again; ticks fire repeatedly
        assert h.may_send(s, t + i)[0] is False
        step = M.handle(s, h.Tick(t + i))
        probes += step.send_probe
        s = step.state
    assert probes == 1 and s.probe_in_flight


def test_confirmation_window_three_hours():
    s = to_cooldown(h.SenderState(sender="w"), T0)
    step = M.handle(s, h.Tick(s.probe_at))
    late = M.handle(step.state, h.ProbeResult(s.probe_at + 3 * 3600 + 1, ok=True))
    assert not late.state.probe_confirmed
    ok = M.handle(step.state, h.ProbeResult(s.probe_at + 3 * 3600, ok=True))
    assert ok.state.probe_confirmed


def test_pacing_by_group_interval_in_minutes():
    # seed 000 §6: send_from/to_message_interval «(next_send_date), хвилини» — minutes
    g = Group(id="g", name="g", priority=1, send_from_message_interval=30, send_to_message_interval=60)
    s, _ = run(h.SenderState(sender="w"), h.Sent(T0, g))
    ok, nxt = h.may_send(s, T0 + 61)
    assert not ok and T0 + 30 * 60 <= nxt <= T0 + 60 * 60
    assert h.may_send(s, nxt) == (True, None)
    half = Group(id="h", name="h", priority=2, send_from_message_interval=0.5,
                 send_to_message_interval=0.5)  # fractions allowed: half a minute
    s, _ = run(h.SenderState(sender="w"), h.Sent(T0, half))
    assert s.next_send_at == T0 + 30


def test_draws_are_keyed_not_order_dependent():
    a = to_cooldown(h.SenderState(sender="w"), T0)
    M2 = h.HealthMachine(KeyedRandom(7))
    b = M2.handle(M2.handle(h.SenderState(sender="w"), fail(T0)).state, fail(T0 + 1)).state
    assert a == b
    c = to_cooldown(h.SenderState(sender="other"), T0)
    assert c.cooldown_end != a.cooldown_end


def test_20_waiting_deliveries_keep_order_and_are_not_attempts():
    """A FIFO of 20 deliveries in front of a cooling sender: no attempt while it cools, one probe,
    then the queue drains in order, paced, after the 10 min rest (DESIGN §10)."""
    s = to_cooldown(h.SenderState(sender="w"), T0)
    queue, sent, probes, t = list(range(20)), [], 0, T0 + 2
    while queue and t < T0 + 8 * 3600:
        nt = h.next_timer(s)
        if nt is not None and nt <= t:
            step = M.handle(s, h.Tick(t))
            s, probes = step.state, probes + step.send_probe
            if step.send_probe:
                s = M.handle(s, h.ProbeResult(t + 1, ok=True)).state
        ok, nxt = h.may_send(s, t)
        if ok:
            s = M.handle(s, h.Sent(t)).state
            sent.append((queue.pop(0), t))
            s = M.handle(s, h.Delivered(t + 1, t)).state
        t += 30
    assert [d for d, _ in sent] == list(range(20)) and probes == 1
    assert s.sent == 20 and sent[0][1] >= s.last_cooldown_start + 3600 + 600


@pytest.mark.parametrize("group", [None, STACK_GROUP])
def test_cooldown_notes_name_the_verdict_instant_after_the_step_lag(group):
    """The report's "cooldown started: #1 until 08:42:55 UTC (1.2 min)" was followed by
    "cooldown finished" at 08:48:31 with nothing to explain the 5.6 min: the note names the
    verdict instant (the planned end plus the keyed 0–7 min scheduler step lag) — and the
    verdict comes exactly then.  The same for an extension's note."""
    s, rows = run(h.SenderState(sender="w"), fail(T0, group=group), fail(T0 + 1, group=group),
                  *([fail(T0 + 2, group=group)] if group is not None else []))
    assert s.state == h.COOLDOWN and rows[-1].code == 101
    lag = s.exit_at - s.cooldown_end
    assert 0 <= lag <= 7 * 60
    assert rows[-1].note == (f"#1 until {h.utc_text(s.cooldown_end)} ({(s.cooldown_end - T0 - (2 if group else 1)) / 60:.1f}"
                             f" min), verdict at {h.utc_text(s.exit_at)} (+{lag / 60:.1f} min step lag)")
    nxt = h.next_timer(s)
    while nxt is not None and nxt < s.exit_at:  # a warm-up slot first, answered as failed
        step = M.handle(s, h.Tick(nxt))
        s = step.state
        if step.send_probe:
            s = M.handle(s, h.ProbeResult(nxt + 5, ok=False, terminal=False)).state
        nxt = h.next_timer(s)
    exit_at = s.exit_at
    step = M.handle(s, h.Tick(exit_at - 0.001))
    assert step.state.state == h.COOLDOWN and not step.history  # not before the stated instant
    step = M.handle(s, h.Tick(exit_at))
    if step.send_probe and s.end_probe:  # Stack: the verdict is the health probe's answer
        assert not step.history
        step = M.handle(step.state, h.ProbeResult(exit_at + 1, ok=False))
    assert step.history and step.history[-1].code in (100, 102)  # the verdict: released or extended
    if step.history[-1].code == 102:
        e = step.state
        assert step.history[-1].note.endswith(f"verdict at {h.utc_text(e.exit_at)} "
                                              f"(+{(e.exit_at - e.cooldown_end) / 60:.1f} min step lag)")


# ---- the Stack sender's probe at its cooldown's end (DESIGN §10 "Groups") ----------------------

def stack_cooldown(s=None, at=T0):
    s, _ = run(s or h.SenderState(sender="stack"), *[fail(at + i, group=STACK_GROUP) for i in range(3)])
    assert s.state == h.COOLDOWN and s.end_probe and s.probe_at is None
    return s


def test_stack_cooldown_ends_with_a_health_probe_proven_105_then_100():
    s = stack_cooldown()
    assert h.next_timer(s) == s.exit_at  # the modelled step: the verdict instant, keyed
    step = M.handle(s, h.Tick(s.exit_at))
    assert step.send_probe and step.history == [] and step.state.state == h.COOLDOWN
    s = step.state
    # waits for the answer; the timer is only the backstop for a lost one (never a busy loop)
    assert s.probe_in_flight and h.next_timer(s) == s.exit_at + h.END_PROBE_WAIT
    step = M.handle(s, h.ProbeResult(s.exit_at + 0.2, ok=True))
    assert [(r.code, r.note) for r in step.history] == [(105, "GET /v1/health answered 200"), (100, "proven")]
    assert step.state.state == h.ACTIVE and step.state.failed_in_row == 0
    assert [f.action for f in step.facts] == ["recovered"] and step.facts[0].payload["verdict"] == "proven"
    assert step.state.next_send_at == s.exit_at + 0.2  # the built-in group rests 0


@pytest.mark.parametrize("terminal", [False, True])
def test_stack_unproven_is_a_new_cooldown_of_the_group_delay_never_an_extension(terminal):
    s = stack_cooldown()
    rows = []
    for k in range(1, 6):
        step = M.handle(s, h.Tick(s.exit_at))
        assert step.send_probe
        at = s.exit_at + 1
        step = M.handle(step.state, h.ProbeResult(at, ok=False, terminal=terminal))
        s, rows = step.state, rows + step.history
        assert s.state == h.COOLDOWN and s.need_check_path is None  # never path B
        assert 60 <= s.cooldown_end - at <= 120  # the group's 1–2 min, not U(55, 70) min
        assert 0 <= s.exit_at - s.cooldown_end <= 7 * 60  # the scheduler's modelled step
        assert not s.probe_in_flight and s.probe_sent_at is None and s.probe_at is None
    assert [r.code for r in rows] == [102] * 5
    assert all(r.note.startswith("unproven: probe failed; ") for r in rows)
    assert s.cooldown_times == 1  # the ladder moves at a threshold, not at a re-probe
    step = M.handle(s, h.Tick(s.exit_at))
    step = M.handle(step.state, h.ProbeResult(s.exit_at + 1, ok=True))
    assert [r.code for r in step.history] == [105, 100] and step.state.state == h.ACTIVE


def test_stack_unproven_draws_are_keyed():
    def cycle():
        s = stack_cooldown()
        step = M.handle(s, h.Tick(s.exit_at))
        return M.handle(step.state, h.ProbeResult(s.exit_at + 1, ok=False)).state
    a = cycle()
    b = h.HealthMachine(KeyedRandom(7)).handle(
        M.handle(stack_cooldown(), h.Tick(stack_cooldown().exit_at)).state,
        h.ProbeResult(stack_cooldown().exit_at + 1, ok=False)).state
    assert (a.cooldown_end, a.exit_at) == (b.cooldown_end, b.exit_at)
    c = h.HealthMachine(KeyedRandom(8)).handle(
        M.handle(stack_cooldown(), h.Tick(stack_cooldown().exit_at)).state,
        h.ProbeResult(stack_cooldown().exit_at + 1, ok=False)).state
    assert (a.cooldown_end, a.exit_at) != (c.cooldown_end, c.exit_at)


def test_stack_never_parks_and_cycles_its_last_step_raising_need_check():
    s = h.SenderState(sender="stack")
    t = T0
    actions = []
    for n in range(8):
        s, _ = run(s, *[fail(t + i, group=STACK_GROUP) for i in range(3)])
        assert s.state == h.COOLDOWN and s.cooldown_end - s.cooldown_start <= 120
        tick = M.handle(s, h.Tick(s.exit_at))
        step = M.handle(tick.state, h.ProbeResult(s.exit_at + 1, ok=True))
        assert step.history[-1].note == "proven"
        s, t = step.state, step.state.next_send_at + 1
    assert s.cooldown_times == 5 and s.cooldown_no == 8 and s.state == h.ACTIVE
    for i in range(3):
        step = M.handle(s, fail(t + i, group=STACK_GROUP))
        s, actions = step.state, actions + [(f.action, f.priority) for f in step.facts]
    assert s.state == h.COOLDOWN and ("need_check", "critical") in actions


def test_a_stack_probe_in_flight_across_a_restart_is_answered_once():
    s = stack_cooldown()
    s = M.handle(s, h.Tick(s.exit_at)).state
    again = M.handle(s, h.Tick(s.exit_at + 30))  # a stale timer while the answer is due
    assert not again.send_probe and again.history == [] and again.state == s
    ok = M.handle(s, h.ProbeResult(s.exit_at + 31, ok=True))
    late = M.handle(ok.state, h.ProbeResult(s.exit_at + 32, ok=False))
    assert late.history == [] and late.state.state == h.ACTIVE


def test_a_lost_stack_probe_is_unproven_at_the_backstop():
    s = stack_cooldown()
    s = M.handle(s, h.Tick(s.exit_at)).state
    assert M.handle(s, h.Tick(s.exit_at + h.END_PROBE_WAIT - 1)).history == []
    step = M.handle(s, h.Tick(s.exit_at + h.END_PROBE_WAIT))
    assert [r.code for r in step.history] == [102] and step.history[0].note.startswith("unproven: probe unanswered; ")
    assert step.state.state == h.COOLDOWN and not step.state.probe_in_flight and not step.send_probe
    late = M.handle(step.state, h.ProbeResult(s.exit_at + h.END_PROBE_WAIT + 1, ok=True))
    assert late.history == []  # the lost answer arriving after all: a stale answer
