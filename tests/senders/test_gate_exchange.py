"""The health gate answers the router's lists (:meth:`HealthGate.admit`, :meth:`HealthGate.settle`;
sidecar.router.exchange) exactly as its one-at-a-time calls would, in order: pacing admits one
row of a batch, two failures told in one settlement start cooldown #1, a probe's answer told
with them is taken as :meth:`probe_result` (seed 000 §1–§3, §6; DESIGN §10).  Two twin gates,
one asked by lists, one row by row, must end in the same state with the same ops and notes."""
from __future__ import annotations

from sidecar.core.rng import KeyedRandom
from sidecar.core.scheduler import Scheduler
from sidecar.router.attempt import DELIVERED, retryable
from sidecar.router.exchange import Told, Want
from sidecar.senders import health as h
from sidecar.senders.gate import HealthGate, timer_key
from sidecar.senders.groups import Group
from sidecar.senders.manage import Registry
from sidecar.store.ops import PutSender

T0 = 1_764_489_600.0


def _twins() -> tuple[HealthGate, HealthGate]:
    g = Group(id="g", name="paced", priority=1, send_from_message_interval=0.5, send_to_message_interval=1.0)
    out = []
    for _ in range(2):
        gate = HealthGate(h.HealthMachine(KeyedRandom(5)), Scheduler())
        gate.load(Registry(groups={"g": g}, assignments={"paced": ("g",)}), ["crm-hook", "paced"])
        out.append(gate)
    return out[0], out[1]


def test_admission_of_a_batch_is_the_row_by_row_answers():
    lists, rows = _twins()
    grants = lists.admit([Want("crm-hook", "webhook", 4), Want("paced", "webhook", 3)], T0)
    one_by_one = [rows.may_send("crm-hook", "webhook", T0) for _ in range(4)]
    paced = [rows.may_send("paced", "webhook", T0) for _ in range(2)]
    assert all(a.allowed for a in one_by_one) and grants[0].admitted == 4 and grants[0].refusal is None
    assert paced[0].allowed and not paced[1].allowed
    assert grants[1].admitted == 1 and grants[1].refusal == paced[1]
    assert lists.state("paced") == rows.state("paced") and lists.state("crm-hook") == rows.state("crm-hook")


def test_a_settlement_is_the_reports_in_order():
    lists, rows = _twins()
    lists.admit([Want("crm-hook", "webhook", 2)], T0)
    rows.may_send("crm-hook", "webhook", T0)
    rows.may_send("crm-hook", "webhook", T0)
    fail = retryable("ConnectError")
    told = [Told(target="crm-hook", channel="webhook", outcome=fail, at=T0 + 1),
            Told(target="crm-hook", channel="webhook", outcome=fail, at=T0 + 2)]
    got = lists.settle(told, T0 + 3)
    want = [rows.report("crm-hook", "webhook", fail, T0 + 1, final=False),
            rows.report("crm-hook", "webhook", fail, T0 + 2, final=False)]
    assert got.faults == ()
    every = [op for r in want for op in r.ops]
    puts = [op for op in got.ops if isinstance(op, PutSender)]
    # the sender's row once, with its last state; every history row, in order
    reported_puts = [op for op in every if isinstance(op, PutSender)]
    assert len(reported_puts) == 2 and puts == reported_puts[-1:]
    assert [op for op in got.ops if not isinstance(op, PutSender)] == [
        op for op in every if not isinstance(op, PutSender)]
    assert puts[0].data["state"] == h.COOLDOWN
    assert got.events == tuple(e for r in want for e in r.events) and got.events[0].action == "cooldown"
    s = lists.state("crm-hook")
    assert s == rows.state("crm-hook") and (s.state, s.cooldown_times) == (h.COOLDOWN, 1)
    assert lists.take_notes() == rows.take_notes()


def test_a_probe_answer_rides_in_the_settlement():
    lists, rows = _twins()
    fail = retryable("ConnectError")
    for gate in (lists, rows):  # cooldown #1, then its warm-up slot: the probe is due
        gate.report("crm-hook", "webhook", fail, T0, final=False)
        gate.report("crm-hook", "webhook", fail, T0 + 1, final=False)
        s = gate.state("crm-hook")
        gate.on_timer(timer_key("crm-hook"), s.probe_at)
        assert gate.probes_due(s.probe_at) == ["crm-hook"]
    at = lists.state("crm-hook").probe_at + 1
    got = lists.settle([Told(target="crm-hook", channel="webhook", outcome=DELIVERED, at=at, probe=True)], at)
    want = rows.probe_result("crm-hook", DELIVERED, at)
    assert got.ops == want.ops and lists.state("crm-hook") == rows.state("crm-hook")
    assert lists.state("crm-hook").probe_confirmed
