"""The transition table drives the machine: every row is used by a step that names its outcome,
the keys are distinct, and a step whose key has no row raises (sidecar/senders/table.py Rules 1–3)."""
from __future__ import annotations

from collections.abc import Callable

import msgspec
import pytest

from sidecar.core.rng import KeyedRandom
from sidecar.senders import health as h
from sidecar.senders import table
from sidecar.senders.groups import STACK_GROUP, Group

M = h.HealthMachine(KeyedRandom(5))
T0 = 1_780_000_000.0
ACTIVE_S = h.SenderState(sender="x")
Build = Callable[[], tuple[h.SenderState, h.HealthInput]]


def run(s: h.SenderState, *inputs: h.HealthInput) -> h.SenderState:
    for ev in inputs:
        s = M.handle(s, ev).state
    return s


def cooling(group=None) -> h.SenderState:
    """A sender just put in cooldown #1 at T0 (two counted failures)."""
    s = run(ACTIVE_S, h.Failed(T0 - 1, T0 - 1, group=group), h.Failed(T0, T0, group=group))
    assert s.state == h.COOLDOWN
    return s


def probing() -> h.SenderState:
    """In cooldown with its warm-up probe in flight."""
    s = cooling()
    assert s.probe_at is not None
    return run(s, h.Tick(s.probe_at))


def need_check() -> h.SenderState:
    return run(h.SenderState(sender="x", cooldown_times=5, failed_in_row=1), h.Failed(T0, T0))


def unconfirmed_to_the_end(s: h.SenderState) -> tuple[h.SenderState, h.HealthInput]:
    """Warm-ups that fail, through both extensions, up to the Tick of the last verdict."""
    for _ in range(20):  # 2 extensions × (probe, answer, verdict) — far fewer steps than this
        due = h.next_timer(s)
        assert due is not None
        if s.extensions == h.EXTENSIONS and due == s.exit_at:
            return s, h.Tick(due)
        step = M.handle(s, h.Tick(due))
        s = run(step.state, h.ProbeResult(due + 1, ok=False)) if step.send_probe else step.state
    raise AssertionError(f"no last verdict reached: {s}")


def extension_tick() -> tuple[h.SenderState, h.HealthInput]:
    s = run(probing(), h.ProbeResult(T0 + 1, ok=False))
    assert s.exit_at is not None
    return s, h.Tick(s.exit_at)


def verdict_after(*answers: h.HealthInput) -> tuple[h.SenderState, h.HealthInput]:
    s = run(probing(), *answers)
    assert s.exit_at is not None
    return s, h.Tick(s.exit_at)


SHORT = Group(id="s", name="short", priority=1, failed_in_row=3, cooldown_delay_from=1, cooldown_delay_to=2)


def neutral() -> tuple[h.SenderState, h.HealthInput]:
    # a group whose 1–2 min cooldown is shorter than any slot, not the built-in Stack group
    s = run(h.SenderState(sender="x", failed_in_row=2), h.Failed(T0, T0, group=SHORT))
    assert not s.had_slot and s.exit_at is not None
    return s, h.Tick(s.exit_at)


def cooling_stack() -> h.SenderState:
    # the Stack group's 1–2 min cooldown is shorter than any warm-up slot: no probe
    return run(h.SenderState(sender="x", failed_in_row=2), h.Failed(T0, T0, group=STACK_GROUP))


def stack_probing() -> h.SenderState:
    """The Stack sender at its verdict with its GET /v1/health probe in flight."""
    s = cooling_stack()
    return run(s, h.Tick(s.exit_at or 0.0))


def released() -> h.SenderState:
    s, tick = extension_tick()
    s = run(s, tick)
    s, last = unconfirmed_to_the_end(s)
    s = run(s, last)
    assert s.state == h.ACTIVE and s.last_cooldown_start is not None
    return s


A, C, N = h.ACTIVE, h.COOLDOWN, h.NEED_CHECK
CASES: dict[tuple[str, str, str], Build] = {
    (A, "Failed", "below threshold"): lambda: (ACTIVE_S, h.Failed(T0, T0)),
    (A, "Failed", "final retry below threshold"): lambda: (ACTIVE_S, h.Failed(T0, T0, final=True)),
    (A, "Failed", "terminal"): lambda: (ACTIVE_S, h.Failed(T0, T0, retryable=False)),
    (A, "Failed", "late"): lambda: (released(), h.Failed(T0 + 9 * 3600, T0 - 5)),
    (A, "Failed", "threshold"): lambda: (h.SenderState(sender="x", failed_in_row=1), h.Failed(T0, T0)),
    (A, "Failed", "ladder exhausted"): lambda: (h.SenderState(sender="x", cooldown_times=5, failed_in_row=1),
                                                h.Failed(T0, T0)),
    (A, "Failed", "ladder exhausted, never need check"): lambda: (
        h.SenderState(sender="x", cooldown_times=5, failed_in_row=2), h.Failed(T0, T0, group=STACK_GROUP)),
    (C, "Failed", "late or held"): lambda: (cooling(), h.Failed(T0 + 5, T0 + 5)),
    (N, "Failed", "held"): lambda: (need_check(), h.Failed(T0 + 5, T0 + 5)),
    (A, "Delivered", "counted"): lambda: (ACTIVE_S, h.Delivered(T0, T0)),
    (A, "Delivered", "late"): lambda: (released(), h.Delivered(T0 + 9 * 3600, T0 - 5)),
    (C, "Delivered", "late or held"): lambda: (cooling(), h.Delivered(T0 + 5, T0 - 5)),
    (N, "Delivered", "held"): lambda: (need_check(), h.Delivered(T0 + 5, T0 + 5)),
    (A, "Sent", "paced"): lambda: (ACTIVE_S, h.Sent(T0)),
    (C, "Sent", "paced"): lambda: (cooling(), h.Sent(T0 + 5)),
    (N, "Sent", "paced"): lambda: (need_check(), h.Sent(T0 + 5)),
    (C, "Tick", "probe sent"): lambda: (cooling(), h.Tick(cooling().probe_at or 0.0)),
    (C, "ProbeResult", "confirmed"): lambda: (probing(), h.ProbeResult(T0 + 3600, ok=True)),
    (C, "ProbeResult", "not confirmed"): lambda: (probing(), h.ProbeResult(T0 + 3600, ok=False)),
    (C, "ProbeResult", "stale answer"): lambda: (cooling(), h.ProbeResult(T0 + 5, ok=True)),
    (C, "Tick", "proven"): lambda: verdict_after(h.ProbeResult(T0 + 3600, ok=True)),
    (C, "Tick", "neutral"): neutral,
    (C, "Tick", "fail-open"): lambda: unconfirmed_to_the_end(run(*extension_tick())),
    (C, "Tick", "extension"): extension_tick,
    (C, "Tick", "probe failed terminally"): lambda: verdict_after(h.ProbeResult(T0 + 3600, ok=False, terminal=True)),
    (C, "Tick", "nothing due"): lambda: (cooling(), h.Tick(T0 + 1)),
    (C, "Tick", "end probe sent"): lambda: (cooling_stack(), h.Tick(cooling_stack().exit_at or 0.0)),
    (C, "ProbeResult", "proven at the end"): lambda: (stack_probing(), h.ProbeResult(T0 + 600, ok=True)),
    (C, "ProbeResult", "unproven"): lambda: (stack_probing(), h.ProbeResult(T0 + 600, ok=False)),
    (C, "Tick", "unproven"): lambda: (stack_probing(), h.Tick((stack_probing().probe_sent_at or 0.0) + h.END_PROBE_WAIT)),
    (A, "Recover", "manual"): lambda: (ACTIVE_S, h.Recover(T0)),
    (C, "Recover", "manual"): lambda: (cooling(), h.Recover(T0 + 5)),
    (N, "Recover", "manual"): lambda: (need_check(), h.Recover(T0 + 5)),
    (A, "Tick", "stale timer"): lambda: (ACTIVE_S, h.Tick(T0)),
    (A, "ProbeResult", "stale answer"): lambda: (ACTIVE_S, h.ProbeResult(T0, ok=True)),
    (N, "Tick", "stale timer"): lambda: (need_check(), h.Tick(T0 + 5)),
    (N, "ProbeResult", "stale answer"): lambda: (need_check(), h.ProbeResult(T0 + 5, ok=False)),
}


def test_the_table_has_37_distinct_rows_and_each_has_a_driving_case():
    assert len(table.ROWS) == len(h.TRANSITIONS) == 37  # no key written twice (a dict literal hides it)
    assert set(CASES) == set(h.TRANSITIONS)


def test_a_repeated_key_is_refused():
    with pytest.raises(table.MachineInvariantError, match="duplicate"):
        table.index([*table.ROWS, table.ROWS[0]])


@pytest.mark.parametrize("key", list(CASES), ids=[" × ".join(k) for k in CASES])
def test_each_row_is_the_step_that_names_it(key, monkeypatch):
    seen: list[tuple[str, str, str]] = []

    def recording(state, kind, outcome):
        seen.append((state, kind, outcome))
        return table.lookup(state, kind, outcome)

    s, ev = CASES[key]()
    monkeypatch.setattr(h, "lookup", recording)
    step = M.handle(s, ev)
    assert seen == [key]
    row = h.TRANSITIONS[key]
    assert step.state.state == row.to
    assert (step.history[-1].code if step.history else None) == row.code


def test_a_step_without_a_row_raises(monkeypatch):
    key = (h.COOLDOWN, "Tick", "nothing due")
    monkeypatch.delitem(table.TRANSITIONS, key)
    with pytest.raises(h.MissingTransition) as err:
        M.handle(cooling(), h.Tick(T0 + 1))
    assert err.value.key == key and isinstance(err.value, table.MachineInvariantError)
    assert "state='cooldown', input='Tick', outcome='nothing due'" in str(err.value)


def test_inputs_decode_from_their_tag():
    ev = h.Failed(T0, T0 - 3, final=True, group=STACK_GROUP)
    assert h.decode_input(msgspec.json.encode(ev)) == ev
    assert h.decode_input(b'{"type": "Tick", "at": 5}') == h.Tick(5.0)
    with pytest.raises(msgspec.ValidationError, match=r"\$\.at"):
        h.decode_input(b'{"type": "Tick", "at": "soon"}')
