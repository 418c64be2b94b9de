"""Property: every step of the machine is a row of ``TRANSITIONS`` (h11 style), and the stored plan
of a running cooldown moves only by an extension (102)."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from sidecar.core.rng import KeyedRandom
from sidecar.senders import health as h
from sidecar.senders.groups import STACK_GROUP, Group

M = h.HealthMachine(KeyedRandom(5))
T0 = 1_780_000_000.0
GROUPS = [None, STACK_GROUP, Group(id="g", name="g", priority=1, failed_in_row=1, cooldown_delay_from=3,
                                   cooldown_delay_to=40)]

event = st.one_of(
    st.builds(lambda d, back, r, f, g: ("Failed", d, back, r, f, g), st.floats(0, 7200), st.floats(0, 9000),
              st.booleans(), st.booleans(), st.sampled_from(GROUPS)),
    st.builds(lambda d, back: ("Delivered", d, back), st.floats(0, 7200), st.floats(0, 9000)),
    st.builds(lambda d, g: ("Sent", d, g), st.floats(0, 600), st.sampled_from(GROUPS)),
    st.builds(lambda d, ok, term: ("ProbeResult", d, ok, term), st.floats(0, 600), st.booleans(), st.booleans()),
    st.builds(lambda d: ("Tick", d), st.floats(0, 7200)),
    st.builds(lambda d: ("TimerTick", d), st.just(0.0)),
    st.builds(lambda d: ("Recover", d), st.floats(0, 60)),
)


def build(spec, now, s):
    kind = spec[0]
    if kind == "Failed":
        return h.Failed(now, now - spec[2], retryable=spec[3], final=spec[4], group=spec[5])
    if kind == "Delivered":
        return h.Delivered(now, now - spec[2])
    if kind == "Sent":
        return h.Sent(now, spec[2])
    if kind == "ProbeResult":
        return h.ProbeResult(now, spec[2], spec[3])
    if kind == "TimerTick":
        return h.Tick(max(now, h.next_timer(s) or now))
    if kind == "Recover":
        return h.Recover(now)
    return h.Tick(now)


@settings(max_examples=300, deadline=None)
@given(st.lists(event, min_size=1, max_size=60))
def test_every_step_is_a_row_of_the_table(specs):
    s, now = h.SenderState(sender="x"), T0
    rows = {(k[0], k[1], v[0], v[1]) for k, v in h.TRANSITIONS.items()}
    for spec in specs:
        now += spec[1]
        ev = build(spec, now, s)
        now = max(now, ev.at)
        step = M.handle(s, ev)
        code = step.history[-1].code if step.history else None
        assert (s.state, type(ev).__name__, step.state.state, code) in rows, (s, ev, step)
        if s.state == h.COOLDOWN == step.state.state and code != h.EXTENDED:
            assert (step.state.cooldown_end, step.state.exit_at) == (s.cooldown_end, s.exit_at)
        assert step.state.failed_in_row >= 0 and 0 <= step.state.cooldown_times <= 5
        assert step.send_probe <= (s.state == h.COOLDOWN and not s.probe_in_flight)
        s = step.state
