"""Sender health behind the router's one attempt gate, on a virtual clock with a real store and the
one scheduler: the trigger, waiting rows, the probe, the verdict and the rest to the second, restart
survival, the Stack group (seed 000 §1–§6; DESIGN §10)."""
from __future__ import annotations

import pytest

from sidecar.core.rng import KeyedRandom
from sidecar.core.scheduler import Scheduler
from sidecar.router.attempt import DELIVERED, Attempts, Outcome, ReleaseTarget, retryable, terminal
from sidecar.router.io.channels import Channel
from sidecar.router.model import Delivery, RoutingEvent, parse_rule
from sidecar.router.io.pump import DeliveryPump
from sidecar.router.state import RouterState
from sidecar.router.route import route
from sidecar.router.io.storage import RouterStore
from sidecar.senders import health as h
from sidecar.senders.gate import HealthGate, timer_key
from sidecar.senders.groups import Group
from sidecar.senders.manage import Registry
from sidecar.senders.io.storage import load_history, load_registry
from sidecar.store.db import Store

T0 = 1_764_489_600.0  # 2025-11-30 08:00:00 UTC
SEED = 5
TARGETS = {"stack": "stack", "crm-hook": "webhook"}
ALERT = RoutingEvent(source="electron", subject="alert", action="fired", priority="normal", payload={})


class Hook(Channel):
    """A webhook whose deliveries and probes follow ``self.mode``: ``down`` (retryable),
    ``up``, ``terminal`` (400 to everything)."""

    kind = "scripted"

    def __init__(self) -> None:
        super().__init__("crm-hook")
        self.mode = "down"
        self.calls: list[tuple[str, float, int]] = []
        self.probes: list[float] = []

    def _answer(self) -> Outcome:
        return {"down": retryable("ConnectError"), "up": DELIVERED,
                "terminal": terminal("HTTP 400", 400)}[self.mode]

    async def send(self, row: Delivery, now: float) -> Outcome:
        self.calls.append((row.id, now, row.attempts))
        return self._answer()

    async def probe(self, now: float) -> Outcome:
        self.probes.append(now)
        return self._answer()


class Rig:
    """The router's pump and sender health over one store and one scheduler, driven like the
    app drives them on the virtual clock: every timer at its instant, then the pump."""

    def __init__(self, store: Store, registry: Registry | None = None) -> None:
        self.store, self.rstore = store, RouterStore(store)
        self.sched = Scheduler()
        self.gate = HealthGate(h.HealthMachine(KeyedRandom(SEED)), self.sched)
        self.gate.load(registry or Registry(), ["crm-hook"])
        self.hook = Hook()
        self.pump = DeliveryPump(self.rstore, {"crm-hook": self.hook}, attempts=Attempts(self.gate))
        self.state = RouterState(prefix="ev-", rules={"to crm": parse_rule(
            {"name": "to crm", "actions": [{"target": "crm-hook"}]}, TARGETS)})
        self.now = T0
        self.events: list[RoutingEvent] = []
        self.notes: list = []

    async def emit(self, n: int = 1) -> None:
        r = route(self.state, [ALERT] * n, self.now, TARGETS)
        await self.rstore.commit(r.ops())
        self.state.apply(r)

    async def advance(self, until: float) -> None:
        at = self.now
        for _ in range(100_000):
            while (item := self.sched.pop_due(at)) is not None:
                rep = self.gate.on_timer(item[0], item[1])
                await self.store.commit(list(rep.ops))
                self.events += rep.events
            res = await self.pump.run_due(at)
            self.events += res.events
            self.notes += self.gate.take_notes()
            due = [d for d in (res.next_due, self.sched.next_due()) if d is not None]
            nxt = min(due, default=None)
            if nxt is None or nxt > until:
                break
            at = max(nxt, at)
        self.now = until

    async def codes(self, since: float = 0.0) -> list[tuple[float, int]]:
        return [(r.at, r.code) for r in await self.store.read(load_history, "crm-hook", since)]


@pytest.fixture
async def store(tmp_path):
    s = await Store.open(tmp_path / "sidecar.db")
    yield s
    await s.close()


async def test_two_failures_start_cooldown_and_waiting_rows_are_not_attempts(store):
    rig = Rig(store)
    await rig.emit()
    await rig.advance(T0 + 40)  # attempt 1 at +0, attempt 2 at +30 (the router's ladder)
    s = rig.gate.state("crm-hook")
    assert s.state == h.COOLDOWN and s.cooldown_times == 1 and s.cooldown_start == T0 + 30
    assert await rig.codes() == [(T0, 109), (T0 + 30, 109), (T0 + 30, 101)]
    assert [(e.source, e.subject, e.action, e.priority) for e in rig.events] == [
        ("sidecar", "sender", "cooldown", "high")]
    assert [(n.previous, n.state, n.code, n.at) for n in rig.notes] == [
        ("active", "active", 109, T0), ("active", "cooldown", 109, T0 + 30), ("active", "cooldown", 101, T0 + 30)]
    await rig.emit(20)  # 20 more wait in order; none is an attempt
    await rig.advance(s.probe_at - 1)
    assert len(rig.hook.calls) == 2
    rows = await rig.rstore.deliveries(target="crm-hook")
    assert [r.attempts for r in rows] == [2] + [0] * 20
    assert all(r.next_attempt_at == s.exit_at + h.REST for r in rows)
    assert all(r.last_error.startswith("waiting: cooldown #1") for r in rows[1:])


async def test_one_probe_at_its_slot_then_proven_exit_and_rest_to_the_second(store):
    rig = Rig(store)
    await rig.emit(21)
    await rig.advance(T0 + 30)
    s = rig.gate.state("crm-hook")
    assert s.state == h.COOLDOWN and s.probe_at is not None
    assert T0 + 30 + 20 * 60 <= s.probe_at and s.probe_at >= s.cooldown_end - 75 * 60
    rig.hook.mode = "up"
    await rig.advance(s.exit_at - 1)
    assert rig.hook.probes == [s.probe_at]  # exactly one probe, whatever is queued
    assert await rig.codes(T0 + 31) == [(s.probe_at, 104), (s.probe_at, 105)]
    await rig.advance(s.exit_at + h.REST - 1)
    after = rig.gate.state("crm-hook")
    assert after.state == h.ACTIVE and after.failed_in_row == 0 and after.cooldown_times == 1
    assert await rig.codes(s.probe_at + 1) == [(s.exit_at, 100)]
    assert len(rig.hook.calls) == 2  # resting: nothing sent before exit + 10 min
    await rig.advance(s.exit_at + h.REST)
    sent = rig.hook.calls[2:]
    assert [c[1] for c in sent] == [s.exit_at + h.REST] * 21  # the real exit lags the plan by 0–7 min
    assert 0 <= s.exit_at - s.cooldown_end <= 7 * 60
    assert [c[0] for c in sent] == sorted((c[0] for c in sent), key=lambda i: int(i.split(".")[0][3:]))
    assert [e.action for e in rig.events] == ["cooldown", "recovered"]
    assert rig.events[-1].payload["verdict"] == "proven"


async def test_restart_x10_during_cooldown_leaves_every_instant_unchanged(tmp_path):
    path = tmp_path / "sidecar.db"
    async with await Store.open(path) as store:
        rig = Rig(store)
        await rig.emit()
        await rig.advance(T0 + 30)
        s = rig.gate.state("crm-hook")
        planned = (s.cooldown_end, s.exit_at, s.probe_at, rig.sched.due_of(timer_key("crm-hook")))
    assert planned[3] == s.probe_at
    for i in range(10):
        async with await Store.open(path) as store:
            rig = Rig(store, await store.read(load_registry))
            s = rig.gate.state("crm-hook")
            assert (s.cooldown_end, s.exit_at, s.probe_at, rig.sched.due_of(timer_key("crm-hook"))) == planned
            rig.now = T0 + 60 + 60 * i
            await rig.advance(rig.now)
    async with await Store.open(path) as store:
        assert [c for _, c in [(r.at, r.code) for r in await store.read(load_history, "crm-hook")]] == [109, 109, 101]


async def test_probe_failed_terminally_is_need_check_b_and_recover_releases_parked_rows(store):
    rig = Rig(store)
    await rig.emit(3)
    await rig.advance(T0 + 30)
    s = rig.gate.state("crm-hook")
    rig.hook.mode = "terminal"
    await rig.advance(s.exit_at + 3600)
    nc = rig.gate.state("crm-hook")
    assert nc.state == h.NEED_CHECK and nc.need_check_path == "B"
    assert [e.priority for e in rig.events if e.action == "need_check"] == ["critical"]
    assert (s.exit_at, 103) in await rig.codes()
    rows = await rig.rstore.deliveries(target="crm-hook")
    assert [r.next_attempt_at for r in rows if r.status == "pending"] == [None, None, None]  # parked
    rig.hook.mode = "up"
    at = s.exit_at + 3600
    rep = rig.gate.recover("crm-hook", at)
    assert ReleaseTarget("crm-hook", at) in rep.ops
    await store.commit(list(rep.ops))
    await rig.advance(at)
    assert [r.status for r in await rig.rstore.deliveries(target="crm-hook")] == ["delivered"] * 3
    assert (at, 106) in await rig.codes()


async def test_terminal_deliveries_never_count(store):
    rig = Rig(store)
    rig.hook.mode = "terminal"
    await rig.emit(4)
    await rig.advance(T0 + 60)
    s = rig.gate.state("crm-hook")
    assert s.state == h.ACTIVE and s.failed_in_row == 0 and await rig.codes() == []
    assert [r.status for r in await rig.rstore.deliveries(target="crm-hook")] == ["failed"] * 4


async def test_group_send_interval_paces_the_sender(store):
    g = Group(id="g", name="slow", priority=1, send_from_message_interval=1, send_to_message_interval=1)
    rig = Rig(store, Registry(groups={"g": g}, assignments={"crm-hook": ("g",)}))  # 1 minute
    rig.hook.mode = "up"
    await rig.emit(3)
    await rig.advance(T0 + 300)
    assert [c[1] for c in rig.hook.calls] == [T0, T0 + 60, T0 + 120]


def test_stack_cycles_its_last_step_and_raises_need_check_instead():
    sched = Scheduler()
    gate = HealthGate(h.HealthMachine(KeyedRandom(SEED)), sched)
    gate.load(Registry(), [])
    now, events = T0, []
    for cycle in range(7):
        for _ in range(3):  # the built-in Stack group: failed_in_row 3
            gate.may_send("stack", "stack", now)
            events += gate.report("stack", "stack", retryable("ConnectError"), now, final=False).events
            now += 1
        s = gate.state("stack")
        assert s.state == h.COOLDOWN and 60 <= s.cooldown_end - s.cooldown_start <= 120  # delay 1–2 min
        while (item := sched.pop_due(s.exit_at)) is not None:
            gate.on_timer(item[0], item[1])
        assert gate.probes_due(s.exit_at) == ["stack"]  # its cooldown ends with GET /v1/health
        gate.probe_result("stack", DELIVERED, s.exit_at + 1)
        assert gate.state("stack").state == h.ACTIVE
        now = gate.state("stack").next_send_at
    assert [e.action for e in events].count("need_check") == 2  # cycles 6 and 7
    assert all(e.priority == "critical" for e in events if e.action == "need_check")
    assert gate.state("stack").cooldown_times == 5


def test_a_refusal_in_cooldown_reads_as_utc_for_the_shift_lead():
    """``deliveries.list`` shows why a row waits: the planned exit as UTC text, not unix seconds."""
    gate = HealthGate(h.HealthMachine(KeyedRandom(SEED)), Scheduler())
    gate.load(Registry(), [])
    for i in range(3):  # the built-in Stack group: failed_in_row 3
        gate.may_send("stack", "stack", T0 + i)
        gate.report("stack", "stack", retryable("ConnectError"), T0 + i, final=False)
    s = gate.state("stack")
    adm = gate.may_send("stack", "stack", T0 + 10)
    assert not adm.allowed
    # the planned end, and when the row is asked again: the modelled exit (Stack rests 0)
    assert adm.reason == (f"cooldown #1 until {h.utc_text(s.cooldown_end)},"
                          f" asked again at {h.utc_text(s.exit_at)}")
    assert adm.not_before == s.exit_at and s.rest_s == 0
    assert adm.reason.endswith(" UTC") and str(int(s.cooldown_end)) not in adm.reason


def test_a_failing_update_leaves_the_sender_as_it_was():
    """Sender health computes a change whole before it changes memory: if a part raises (here
    the scheduler, arming the cooldown's timer), the sender's state, its notes and its probes
    are as before — the pump then records the delivery's outcome without health's part
    (tests/router/io/test_router_pump_health_errors.py)."""

    class Refusing(Scheduler):
        refuse = False

        def schedule(self, key, due, payload=None):
            if self.refuse:
                raise RuntimeError("scheduler full")
            super().schedule(key, due, payload)

    sched = Refusing()
    gate = HealthGate(h.HealthMachine(KeyedRandom(1)), sched)
    gate.load(Registry(), ["crm-hook"])
    gate.may_send("crm-hook", "webhook", T0)
    gate.report("crm-hook", "webhook", retryable("down"), T0, final=False)
    gate.take_notes()
    once = gate.state("crm-hook")
    assert (once.state, once.failed_in_row) == (h.ACTIVE, 1)
    sched.refuse = True
    gate.may_send("crm-hook", "webhook", T0 + 60)
    paced = gate.state("crm-hook")
    with pytest.raises(RuntimeError):  # the second failure starts a cooldown: it needs a timer
        gate.report("crm-hook", "webhook", retryable("down"), T0 + 60, final=False)
    assert gate.state("crm-hook") == paced and gate.take_notes() == [] and gate.probes == {}
    sched.refuse = False
    gate.report("crm-hook", "webhook", retryable("down"), T0 + 60, final=False)
    assert gate.state("crm-hook").state == h.COOLDOWN and 101 in [n.code for n in gate.take_notes()]


def test_stack_probe_at_the_cooldown_end_through_the_gate():
    """DESIGN §10 "Groups": the verdict timer hands the pump one ``GET /v1/health``; no timer
    while it is in flight; a failed answer re-arms the timer at the new (1–2 min) cooldown's
    verdict and refreshes the waiting rows' reason; a 200 releases the rows (105, 100)."""
    from sidecar.router.attempt import RefreshWaiting

    sched = Scheduler()
    gate = HealthGate(h.HealthMachine(KeyedRandom(SEED)), sched)
    gate.load(Registry(), [])
    for i in range(3):
        gate.may_send("stack", "stack", T0 + i)
        gate.report("stack", "stack", retryable("ConnectError"), T0 + i, final=False)
    s = gate.state("stack")
    assert sched.due_of(timer_key("stack")) == s.exit_at
    gate.on_timer(timer_key("stack"), s.exit_at)
    # the answer moves it on; the timer is the backstop for a lost answer only
    assert sched.due_of(timer_key("stack")) == s.exit_at + h.END_PROBE_WAIT
    assert not gate.may_send("stack", "stack", s.exit_at).allowed
    assert gate.probes_due(s.exit_at) == ["stack"] and gate.probes_due(s.exit_at) == []
    rep = gate.probe_result("stack", retryable("ConnectError"), s.exit_at + 1)
    again = gate.state("stack")
    assert again.state == h.COOLDOWN and 60 <= again.cooldown_end - (s.exit_at + 1) <= 120
    assert sched.due_of(timer_key("stack")) == again.exit_at
    assert any(isinstance(op, RefreshWaiting) for op in rep.ops)
    gate.on_timer(timer_key("stack"), again.exit_at)
    assert gate.probes_due(again.exit_at) == ["stack"]
    rep = gate.probe_result("stack", DELIVERED, again.exit_at + 1)
    assert gate.state("stack").state == h.ACTIVE
    assert any(isinstance(op, ReleaseTarget) for op in rep.ops)
    assert [e.action for e in rep.events] == ["recovered"] and rep.events[0].payload["verdict"] == "proven"
    assert [n.code for n in gate.take_notes()] == [109, 109, 109, 101, 102, 105, 100]
