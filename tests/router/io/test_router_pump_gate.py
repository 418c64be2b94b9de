"""The pump talks to sender health once per pass, not once per row (issue 21 item 2; DESIGN §10;
docs/decisions.md "One sender-health exchange per pass"): the due rows' admissions in, what
may be sent out (:meth:`~sidecar.senders.gate.HealthGate.admit`); the outcomes in, the ops to
persist out (:meth:`~sidecar.senders.gate.HealthGate.settle`).  The real gate stands behind a
front that offers ONLY the batch calls and counts them: a per-row call (``may_send``,
``report``) would be an AttributeError, i.e. a health error of the pass."""
from __future__ import annotations

import asyncio

from sidecar.core.rng import KeyedRandom
from sidecar.core.scheduler import Scheduler
from sidecar.router.attempt import DELIVERED, Attempts, retryable
from sidecar.router.config import Target
from sidecar.router.io.channels import JournalChannel
from sidecar.router.io.pump import DeliveryPump
from sidecar.router.model import Delivery
from sidecar.router.ops import PutDelivery
from sidecar.senders import health as h
from sidecar.senders.gate import HealthGate
from sidecar.senders.manage import Registry

from routerhelp import T0, Scripted


class Front:
    """The batch face of a real :class:`HealthGate`, counting each call and what it carried."""

    def __init__(self, gate: HealthGate) -> None:
        self.gate = gate
        self.admits: list[list[tuple[str, int]]] = []  # per call: (target, rows wanted)
        self.settles: list[list[tuple[str, str]]] = []  # per call: (target, outcome kind)

    def admit(self, wants, now):
        self.admits.append([(w.target, w.rows) for w in wants])
        return self.gate.admit(wants, now)

    def settle(self, told, now):
        self.settles.append([(t.target, t.outcome.kind) for t in told])
        return self.gate.settle(told, now)

    def probes_due(self, now):
        return self.gate.probes_due(now)


def _gate(*senders: str) -> HealthGate:
    gate = HealthGate(h.HealthMachine(KeyedRandom(5)), Scheduler())
    gate.load(Registry(), list(senders))
    return gate


def _row(i: int, target: str, channel: str) -> Delivery:
    return Delivery(f"ev-{target}{i}.1", f"ev-{target}{i}", T0 - 5 + i * 1e-3, "electron", "a", "b",
                    "normal", "r", channel, target, "pending", b'{"n":1}', 0, T0 - 5 + i * 1e-3, None)


async def test_a_pass_over_16_rows_of_a_webhook_admits_once_and_settles_once(rstore):
    front = Front(_gate("crm-hook"))
    hook = Scripted("crm-hook")
    woke = asyncio.Event()
    await rstore.commit([PutDelivery(_row(i, "crm-hook", "webhook")) for i in range(16)])
    pump = DeliveryPump(rstore, {"crm-hook": hook}, attempts=Attempts(front), wake=woke.set, per_target=16)
    res = await pump.run_due(T0, detach=True)
    assert res.claimed == 16 and res.health_errors == []
    assert front.admits == [[("crm-hook", 16)]] and front.settles == []
    async with asyncio.timeout(10):
        while pump.in_flight:
            await woke.wait()
            woke.clear()
    res = await pump.run_due(T0, detach=True)  # settles the landing: the 16 outcomes in one call
    assert front.admits == [[("crm-hook", 16)]] and front.settles == [[("crm-hook", "delivered")] * 16]
    assert res.health_errors == [] and len(hook.calls) == 16
    assert {r.status for r in await rstore.deliveries(target="crm-hook")} == {"delivered"}
    s = front.gate.state("crm-hook")
    assert (s.state, s.failed_in_row) == (h.ACTIVE, 0)
    await pump.close()


async def test_a_pass_over_16_journal_rows_admits_once_and_settles_once(rstore, tmp_path):
    front = Front(_gate("audit"))
    chan = JournalChannel("audit", Target(channel="journal"), tmp_path)
    await rstore.commit([PutDelivery(_row(i, "audit", "journal")) for i in range(16)])
    pump = DeliveryPump(rstore, {"audit": chan}, attempts=Attempts(front), per_target=16)
    res = await pump.run_due(T0, detach=True)
    assert res.claimed == 16 and res.health_errors == [] and not pump.in_flight
    assert front.admits == [[("audit", 16)]] and front.settles == [[("audit", "delivered")] * 16]
    assert len(chan.path.read_text().splitlines()) == 16
    await pump.close()


async def test_a_round_of_several_targets_admits_once_and_settles_once(rstore):
    """The virtual clock's rounds (one row per target): one admission and one settlement per
    round for every target together; a failure is told before the next round asks again."""
    front = Front(_gate("crm-hook", "ops"))
    hook = Scripted("crm-hook")
    ops = Scripted("ops", lambda r, n: retryable("HTTP 503", 503))
    await rstore.commit([PutDelivery(_row(i, t, "webhook")) for t in ("crm-hook", "ops") for i in range(2)])
    pump = DeliveryPump(rstore, {"crm-hook": hook, "ops": ops}, attempts=Attempts(front))
    await pump.run_due(T0)
    # round 1: both heads; round 2: the next heads (ops' first waits for its retry at +30)
    assert front.admits == [[("crm-hook", 1), ("ops", 1)]] * 2
    assert front.settles == [[("crm-hook", "delivered"), ("ops", "retryable")]] * 2
    # told before the next round: two failures in a row start cooldown #1 (seed 000 §1–§2)
    s = front.gate.state("ops")
    assert (s.state, s.cooldown_times) == (h.COOLDOWN, 1)
    await pump.run_due(T0 + 30)  # both retries are due (a round each): refused, not attempts
    assert front.admits[2:] == [[("ops", 1)]] * 2 and front.settles[2:] == []
    assert [r.attempts for r in await rstore.deliveries(target="ops")] == [1, 1]
    await pump.close()


async def test_a_paced_sender_is_admitted_one_row_of_its_batch(rstore):
    """A group's send interval (seed 000 §6) admits the first row of the batch; the rest wait
    for the pacing (not attempts), and the gate was asked once."""
    from sidecar.senders.groups import Group
    gate = HealthGate(h.HealthMachine(KeyedRandom(5)), Scheduler())
    g = Group(id="g", name="paced", priority=1, send_from_message_interval=1.0, send_to_message_interval=1.0)
    gate.load(Registry(groups={"g": g}, assignments={"crm-hook": ("g",)}), ["crm-hook"])
    front = Front(gate)
    hook = Scripted("crm-hook", lambda r, n: DELIVERED)
    woke = asyncio.Event()
    await rstore.commit([PutDelivery(_row(i, "crm-hook", "webhook")) for i in range(5)])
    pump = DeliveryPump(rstore, {"crm-hook": hook}, attempts=Attempts(front), wake=woke.set, per_target=16)
    res = await pump.run_due(T0, detach=True)
    assert res.claimed == 1 and front.admits == [[("crm-hook", 5)]]
    rows = await rstore.deliveries(target="crm-hook")
    assert [r.attempts for r in rows] == [1, 0, 0, 0, 0]
    assert rows[1].last_error.startswith("waiting: paced") and rows[1].next_attempt_at is not None
    await pump.drain()
    await pump.close()
