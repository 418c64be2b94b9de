"""Sender health behind the router's attempt gate: the real :class:`~sidecar.router.attempt.SenderHealth`
(seed 000 §1–§6; DESIGN §10 "Sender health", §13 "process-wide components").

Rules / theory of operation
---------------------------
* One :class:`HealthGate` per process, over the pure machine (:mod:`.health`) and the
  :class:`~.manage.Registry` loaded from SQLite at start (:meth:`HealthGate.load`).  A sender is
  a router target; ``stack`` is one too and always exists.
* **One exchange per pump round** (:mod:`sidecar.router.exchange`): the router asks
  :meth:`HealthGate.admit` once with every target's due rows (a :class:`~sidecar.router.exchange.Want`
  each) and tells :meth:`HealthGate.settle` once with every attempt's outcome and probe answer
  of the round — lists in, lists out; each item is the one-at-a-time answer below, in order, so
  the seed's rules hold row by row.  An item whose bookkeeping raises (a bug) is handed back
  (a :class:`~sidecar.router.exchange.Fault`, or the grant's ``error``) and the others stand.
* **May this sender send now?** (:meth:`may_send`): ``active`` and past its pacing / rest →
  yes, and the attempt starts now (the machine's ``Sent``: the active group's send interval
  paces the next one).  In cooldown → no, ask again at the planned exit plus the rest (10 min; 0 for
  the built-in Stack group) (``not_before``); in Need Check → no, ``not_before`` None: the router parks the row until
  :meth:`recover` releases the sender (:class:`~sidecar.router.attempt.ReleaseTarget`).  A
  refused row is not an attempt and keeps its place (the router's ``DeferDelivery``).
* **Outcomes** (:meth:`report`) — one per ATTEMPT, i.e. per HTTP request (seed 000 §1 "+1 per
  failed send"): a Stack batch of N writes that fails is ONE retryable failure, not N; a batch
  whose request was answered is reported once by its per-write results (delivered if any
  write was; else one retryable failure if any write answered 5xx/408 (a 429 is flood control, never reported); 4xx writes never
  count) — :func:`sidecar.router.attempt.request_outcome`.  Delivered → ``Delivered``; retryable → ``Failed`` (``final`` =
  the delivery's last attempt: no increment, the check still runs); terminal → never counts.
  The group is read here, at the failure, and only here (seed 000 §6).  The attempt's start is
  the instant :meth:`may_send` admitted it, so the outcome of a delivery started before a
  cooldown began is "late" and changes neither the probe nor the ladder.
* **Timers** live in the one scheduler under the process-wide key ``(None, "sender", name)``
  (:data:`TIMER_KIND`; not keyed by a TU), one per sender, moved after every change
  (:func:`~.health.next_timer`).  The engine hands a due one to :meth:`on_timer` as a step of
  its own.  :meth:`load` re-arms every timer from the stored states: nothing is re-drawn (every
  draw is keyed by (sender, cooldown number, purpose)), so a restart leaves every end unchanged.
* **Probes** (§3): when the machine says ``send_probe`` the sender joins :attr:`probes`; the
  router's pump takes them (:meth:`probes_due`), sends one probe on the sender's channel and
  reports it (:meth:`probe_result`).  The machine keeps exactly one in flight; a probe that was
  in flight when the process died is sent again after the restart (its answer died with it).
* **Effects of every change** — the sender's row, its history rows, a ``sender.state`` note per
  history row for Electron, and ``sidecar/sender/<action>`` router events (``need_check`` is
  ``critical``) — come back as store ops and events (:class:`~sidecar.router.attempt.Report`),
  and the notes wait in :attr:`notes` until the runtime has committed the ops
  (:meth:`take_notes`).  Memory changes before that commit: a failed commit must end the process
  (crash-only, DESIGN §13), which restores from SQLite.
* Pure: no clock, no I/O, no randomness of its own.
"""
from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from dataclasses import replace as dc_replace

import msgspec
from msgspec.structs import replace as struct_replace

from sidecar.core.scheduler import Scheduler
from sidecar.router.attempt import YES, Admission, Kind, Outcome, RefreshWaiting, ReleaseTarget, Report
from sidecar.router.exchange import Grant, Settlement, Told, Want, admit_each, settle_each
from sidecar.router.model import RoutingEvent
from sidecar.store.ops import Op, PutSender

from . import health as h
from .manage import Registry, with_senders
from .store import result_ops

TIMER_KIND = "sender"
STACK = "stack"


def timer_key(sender: str) -> tuple[None, str, str]:
    """The sender's one timer in the process-wide namespace (DESIGN §13)."""
    return (None, TIMER_KIND, sender)


def waiting_reason(s: h.SenderState, until: float | None) -> str:
    """Why a row of sender ``s`` waits, as its ``last_error`` says after ``"waiting: "``:
    ``until`` is when it is asked again (unix seconds; None in Need Check).  Refreshed when the
    sender's state changes (:class:`~sidecar.router.attempt.RefreshWaiting`) and cleared at its
    release (:class:`~sidecar.router.attempt.ReleaseTarget`): never a stale instant."""
    if s.state == h.NEED_CHECK:
        return f"need check (path {s.need_check_path}): waits for senders.recover"
    if s.state == h.COOLDOWN:
        return (f"cooldown #{s.cooldown_times} until {h.utc_text(s.cooldown_end)},"
                f" asked again at {h.utc_text(until)}")
    return f"paced or resting until {h.utc_text(until)}"


def last_put_per_sender(ops: Sequence[Op]) -> tuple[Op, ...]:
    """``ops`` without the :class:`~sidecar.store.ops.PutSender` upserts a later one of the same
    sender overwrites (order otherwise kept: the survivor stays where the last one was)."""
    seen: set[str] = set()
    keep: list[Op] = []
    for op in reversed(ops):
        if isinstance(op, PutSender):
            if op.sender in seen:
                continue
            seen.add(op.sender)
        keep.append(op)
    return tuple(reversed(keep))


class SenderStateNote(msgspec.Struct, frozen=True, kw_only=True):
    """``sender.state`` for Electron: one per transition (history row).  ``at``/``cooldown_end``
    unix seconds; ``code`` the history code (seed 000: 109, 104, 105, 100; ours 101, 102, 103,
    106); ``previous`` the state before."""

    sender: str
    state: str
    previous: str
    code: int
    note: str
    at: float
    failed_in_row: int
    cooldown_times: int
    cooldown_end: float | None
    need_check_path: str | None


class HealthGate:
    """See the module rules.  ``scheduler`` is the engine's one scheduler."""

    def __init__(self, machine: h.HealthMachine, scheduler: Scheduler,
                 registry: Registry | None = None) -> None:
        self.machine = machine
        self.scheduler = scheduler
        self.reg = registry or Registry()
        self.notes: list[SenderStateNote] = []  # for Electron, after the commit
        self.probes: dict[str, None] = {}  # senders whose probe is to be sent (ordered set)
        self._admitted: dict[str, float] = {}  # sender -> when its current attempt started

    # ---- start --------------------------------------------------------------------------------
    def load(self, registry: Registry, senders: Iterable[str]) -> None:
        """Take the stored registry, register the configured senders (``stack`` always) and
        re-arm every timer from the stored states — nothing is re-drawn."""
        self.reg = with_senders(registry, sorted({STACK, *senders}))
        for name, s in self.reg.senders.items():
            self._arm(s)
            if s.state == h.COOLDOWN and s.probe_in_flight:
                self.probes[name] = None  # its answer died with the old process: send it again

    def state(self, sender: str) -> h.SenderState:
        return self._get(sender)

    # ---- the router's BatchHealth: one admission, one settlement per round ------------------------
    def admit(self, wants: Sequence[Want], now: float) -> list[Grant]:
        """Each want's grant: :meth:`may_send` asked row by row, stopping at the first "no"."""
        return admit_each(self.may_send, wants, now)

    def settle(self, told: Sequence[Told], now: float) -> Settlement:
        """Every told item in order: an attempt's outcome (:meth:`report`, at its ``at``) or a
        probe's answer (:meth:`probe_result`).  A sender's row is written once, with its last
        state (every item's history rows are kept): the settlement commits in one transaction,
        so the earlier upserts of the same row would be overwritten there anyway."""
        got = settle_each(lambda t: self.report(t.target, t.channel, t.outcome, t.at, final=t.final),
                          lambda t: self.probe_result(t.target, t.outcome, t.at), told)
        return struct_replace(got, ops=last_put_per_sender(got.ops))

    # ---- one at a time (the batch calls' items; the manage API and tests) ------------------------
    def may_send(self, target: str, channel: str, now: float) -> Admission:
        s = self._get(target)
        ok, nxt = h.may_send(s, now)
        if not ok:
            return Admission(allowed=False, not_before=nxt, reason=waiting_reason(s, nxt))
        self._put(self.machine.handle(s, h.Sent(now, self.reg.active_group(target, now))).state)
        self._admitted[target] = now
        return YES

    def report(self, target: str, channel: str, outcome: Outcome, now: float, *,
               final: bool) -> Report:
        # one call per ATTEMPT (one HTTP request): the router tells a request that carried
        # several deliveries once (Attempts.request_told), never once per delivery
        started = self._admitted.get(target, now)
        if outcome.kind == Kind.DELIVERED.value:
            ev: h.HealthInput = h.Delivered(now, started)
        elif outcome.kind == Kind.RETRYABLE.value:
            ev = h.Failed(now, started, retryable=True, final=final,
                          group=self.reg.active_group(target, now))
        else:  # terminal: never counts against the sender (DESIGN §10); its pacing is saved
            return Report(ops=tuple(result_ops(h.HealthResult(self._get(target)))))
        return self._apply(target, ev)

    def probes_due(self, now: float) -> list[str]:
        """The senders whose probe is to be sent now (taken: each is sent once)."""
        out = [s for s in self.probes if self._get(s).state == h.COOLDOWN and self._get(s).probe_in_flight]
        self.probes.clear()
        return out

    def probe_result(self, target: str, outcome: Outcome, now: float) -> Report:
        """The probe's answer: delivered confirms; terminal (a 4xx other than 408/429, a bad
        target) is the path-B failure; anything else leaves the warm-up unconfirmed."""
        return self._apply(target, h.ProbeResult(now, ok=outcome.ok,
                                                 terminal=outcome.kind == Kind.TERMINAL.value))

    # ---- the scheduler and the manage API ---------------------------------------------------------
    def on_timer(self, key: Hashable, now: float) -> Report:
        """The sender's timer fired (``key`` from :func:`timer_key`): probe slot or verdict."""
        assert isinstance(key, tuple) and key[:2] == (None, TIMER_KIND), key
        name = key[2]
        if name not in self.reg.senders:
            return Report()
        return self._apply(name, h.Tick(now))

    def recover(self, sender: str, now: float, by: str = "manual") -> Report:
        """Manual recovery (106): counters reset; parked deliveries become due now."""
        rep = self._apply(sender, h.Recover(now, by))
        return Report(ops=(*rep.ops, ReleaseTarget(sender, now)), events=rep.events)

    def replace_registry(self, reg: Registry) -> None:
        """A manage call changed groups or assignments (applied after its commit)."""
        self.reg = dc_replace(reg, senders=self.reg.senders)

    def take_notes(self) -> list[SenderStateNote]:
        notes, self.notes = self.notes, []
        return notes

    # ---- internals ------------------------------------------------------------------------------
    def _get(self, sender: str) -> h.SenderState:
        s = self.reg.senders.get(sender)
        if s is None:  # a target configured after start: it starts active
            s = h.SenderState(sender=sender)
            self.reg.senders[sender] = s
        return s

    def _put(self, s: h.SenderState) -> None:
        self.reg.senders[s.sender] = s

    def _apply(self, sender: str, ev: h.HealthInput) -> Report:
        # everything is computed first and memory changes last, timer first: if any part
        # raises, the sender is as it was (the pump logs it and records the outcome anyway)
        before = self._get(sender)
        result = self.machine.handle(before, ev)
        s = result.state
        prev = before.state
        notes = [SenderStateNote(
            sender=sender, state=s.state, previous=prev, code=row.code, note=row.note, at=row.at,
            failed_in_row=s.failed_in_row, cooldown_times=s.cooldown_times,
            cooldown_end=s.cooldown_end, need_check_path=s.need_check_path) for row in result.history]
        ops: list[Op] = list(result_ops(result))  # always: the pacing of may_send is saved with it
        if prev != h.ACTIVE and s.state == h.ACTIVE and not isinstance(ev, h.Recover):
            # released by its verdict: rows parked meanwhile (Need Check) and rows deferred to
            # the planned exit plus the rest become due after the actual rest, and lose their
            # "waiting: cooldown … until X" (stale from now on)
            ops.append(ReleaseTarget(sender, s.next_send_at))
        elif s.state != h.ACTIVE and (s.state, s.cooldown_end) != (prev, before.cooldown_end):
            # a cooldown started or was extended, or Need Check: rows already waiting get the
            # new reason and instant (rows deferred later get it from may_send)
            ops.append(RefreshWaiting(sender, waiting_reason(s, h.may_send(s, ev.at)[1]), ev.at))
        events = tuple(RoutingEvent(source="sidecar", subject="sender", action=f.action, priority=f.priority,
                             payload=dict(f.payload)) for f in result.facts)
        self._arm(s)
        self._put(s)
        if result.send_probe:
            self.probes[sender] = None
        self.notes.extend(notes)
        return Report(ops=tuple(ops), events=events)

    def _arm(self, s: h.SenderState) -> None:
        due = h.next_timer(s)
        key = timer_key(s.sender)
        if due is None:
            self.scheduler.cancel(key)
        elif self.scheduler.due_of(key) != due:
            self.scheduler.schedule(key, due)
