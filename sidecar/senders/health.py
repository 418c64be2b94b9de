"""The sender health machine (seed 000 §1–§4; DESIGN §10 "Sender health").  Pure and sans-I/O.

Rule 1.  A sender is ``active``, in ``cooldown`` or in ``need_check``.  :meth:`HealthMachine.handle`
         takes the state and one :data:`~.inputs.HealthInput` and returns a :class:`HealthResult` (new
         state, history rows, facts).  It decides only the outcome; the next state and the
         history code come from the row (state, input type, outcome) of
         :data:`~.table.TRANSITIONS`, and a missing row raises :class:`~.table.MissingTransition`.
Rule 2.  Time is the input's ``at`` (unix seconds); every draw is keyed by ``(sender, cooldown
         number, purpose)`` through :class:`~sidecar.core.rng.KeyedRandom`, so a restart
         re-derives the same durations and slots and the stored ``cooldown_end`` never moves.
Rule 3.  Trigger (§1): a retryable failure adds 1 to ``failed_in_row`` (109); the final retry of a
         delivery does not add but still runs the check; terminal failures never count.  Any
         delivery and leaving a cooldown set it to 0.  Threshold: the active group's
         ``failed_in_row`` (0 = default 2, 1 = every failure).
Rule 4.  Check (§2): at the threshold a cooldown starts (101) with ``cooldown_times`` + 1: #1–#3
         U(60, 120) min, #4–#5 U(12, 14) h, then Need Check path A (103).  A group with both
         delays > 0 replaces the durations.  Below the threshold — and only there —
         ``cooldown_times`` resets to 0 when the sender had ≥ 11 deliveries in the last 14 h.
Rule 5.  Warm-up (§3): the slot is planned at start: no earlier than +20–30 min (long) or +5–10 min
         (short, < 60 min) and sent in the last 75 min before the end; a slot not before the end
         is none.  A :class:`~.inputs.Tick` at the slot sends the probe (104), one in flight; a
         success within 3 h of sending confirms (105).  One probe per slot: a failed one is not
         resent inside its slot (§3 «одна … відправка (warm-up)»; docs/decisions.md "Sender health").
Rule 6.  Verdict (§3) at the scheduler's step after ``cooldown_end`` (the real exit lags the plan by
         a keyed 0–7 min: step 2 min + jitter ≤ 5): confirmed → release ``proven``; no slot →
         ``neutral``; probe failed terminally → Need Check path B (103); otherwise up to 2
         extensions of U(55, 70) min (102, a new probe each), then release ``fail-open``.  A
         release (100, verdict in the note) sets ``failed_in_row`` 0, keeps ``cooldown_times``
         and rests the sender 10 more min — 0 for the built-in Stack group
         (:meth:`~.groups.Group.rest_after_release_s`, decided at the cooldown's start).
Rule 7.  Late results: an outcome of a delivery started before the current (or last) cooldown
         began changes neither the probe nor the ladder.
Rule 8.  Stack (DESIGN §10 "Groups"; seed 000 §3 asks a proof of delivery before release): a
         group with ``never_need_check`` cycles its fifth step instead of path A and raises the
         ``need_check`` fact each time.  The built-in Stack group's cooldown (1–2 min, shorter
         than any slot) ends with a ``GET /v1/health`` probe instead of a warm-up
         (``end_probe``, decided at the start): the Tick at the verdict instant sends it (no
         history row); 200 → 105 then 100 ``proven``; no answer within 5 min (the timer's
         backstop, :data:`END_PROBE_WAIT`) or anything
         else (terminal included: never path B) → a new cooldown of the group's delay, keyed
         ``(sender, cooldown number, "unproven", k)`` with its own step lag (102 "unproven:
         probe failed"), never the U(55, 70) min extensions; ``cooldown_times`` does not move.
Rule 9.  Manual recovery (106) from any state resets both counters.
Rule 10. Pacing: :class:`~.inputs.Sent` (an attempt starts) sets ``next_send_at`` by the active
         group's send interval; :func:`may_send` answers "may this sender send now, and when next?".

Transitions (``TRANSITIONS``; state × input type (outcome) → next state [history code]):
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import assert_never

import msgspec
from msgspec.structs import replace

from sidecar.core.rng import KeyedRandom

from .groups import Group
from .inputs import Delivered, Failed, HealthInput, ProbeResult, Recover, Sent, Tick, decode_input, input_type
from .table import (ACTIVE, COOLDOWN, EXTENDED, FAILED, FINISHED, NEED_CHECK, NEED_CHECK_CODE, RECOVERED, STARTED,
                    TRANSITIONS, WARMUP_OK, WARMUP_SENT, MachineInvariantError, MissingTransition, StateName,
                    describe, lookup)

__all__ = [
    "ACTIVE", "COOLDOWN", "NEED_CHECK", "FAILED", "WARMUP_SENT", "WARMUP_OK", "FINISHED", "STARTED", "EXTENDED",
    "NEED_CHECK_CODE", "RECOVERED", "TRANSITIONS", "StateName", "MachineInvariantError", "MissingTransition",
    "Failed", "Delivered", "Sent", "ProbeResult", "Tick", "Recover", "HealthInput", "decode_input",
    "SenderState", "History", "Fact", "HealthResult", "HealthMachine", "may_send", "next_timer", "utc_text",
]
__doc__ = (__doc__ or "") + describe()

MIN = 60.0
HOUR = 3600.0
DEFAULT_THRESHOLD = 2
LADDER_SHORT = (60 * MIN, 120 * MIN)  # #1–#3
LADDER_LONG = (12 * HOUR, 14 * HOUR)  # #4–#5
LADDER_STEPS = 5
RESET_DELIVERIES, RESET_WINDOW = 11, 14 * HOUR
SLOT_LONG, SLOT_SHORT = (20 * MIN, 30 * MIN), (5 * MIN, 10 * MIN)
SHORT_BELOW = 60 * MIN
PROBE_LAST = 75 * MIN
CONFIRM_WINDOW = 3 * HOUR
EXTENSIONS, EXTENSION = 2, (55 * MIN, 70 * MIN)
REST = 10 * MIN
END_PROBE_WAIT = 5 * MIN  # Stack's probe at a cooldown's end: no answer by then is unproven
STEP_LAG = (0.0, 7 * MIN)  # scheduler step 2 min + jitter up to 5 min


class SenderState(msgspec.Struct, frozen=True, kw_only=True):
    """Durable state of one sender (stored whole; times unix seconds)."""

    sender: str
    state: StateName = ACTIVE
    failed_in_row: int = 0
    cooldown_times: int = 0  # ladder position since the last reset
    cooldown_no: int = 0  # cooldowns ever started: the key of every draw, never reset
    cooldown_start: float | None = None
    last_cooldown_start: float | None = None  # to recognise late results after release
    cooldown_end: float | None = None  # planned end, extensions included
    exit_at: float | None = None  # when the scheduler's step reaches the verdict
    extensions: int = 0
    probe_at: float | None = None  # when the probe is sent; None = no slot
    probe_sent_at: float | None = None
    probe_in_flight: bool = False
    probe_confirmed: bool = False
    probe_failed_terminal: bool = False
    had_slot: bool = False
    need_check_path: str | None = None
    next_send_at: float = 0.0
    sent: int = 0  # attempts started: key of the pacing draws
    deliveries: tuple[float, ...] = ()  # the last 11 delivery times
    rest_s: float = REST  # rest after this cooldown's release: the group's at its start
    end_probe: bool = False  # this cooldown ends with a health probe (the built-in Stack group)
    delay: tuple[float, float] = (MIN, 2 * MIN)  # the cooldown's duration range (s), from its start


@dataclass(frozen=True)
class History:
    sender: str
    at: float
    code: int
    note: str = ""


@dataclass(frozen=True)
class Fact:
    """A ``sidecar/sender/<action>`` event for the router (``critical`` for need_check)."""

    action: str
    priority: str
    payload: dict


@dataclass(frozen=True)
class HealthResult:
    """What :meth:`HealthMachine.handle` makes of one input: the sender's next state, its history
    rows and router facts (not a runtime :class:`~sidecar.runtime.step.Step`, which applies it)."""

    state: SenderState
    history: list[History] = field(default_factory=list)
    facts: list[Fact] = field(default_factory=list)
    send_probe: bool = False  # the runtime sends one probe on the sender's channel


@dataclass(frozen=True)
class _Outcome:
    """What a handler decided: the outcome label (the third column of the row), the state with
    every field but ``state`` (Rule 1: the row sets that), the note of the row's history entry,
    the 109 entry that precedes it (table Rule 4) and the facts as (action, payload)."""

    outcome: str
    state: SenderState
    note: str = ""
    first: tuple[History, ...] = ()
    facts: tuple[tuple[str, dict], ...] = ()
    send_probe: bool = False


class HealthMachine:
    """The transition function with its keyed randomness (one per deployment seed)."""

    def __init__(self, rng: KeyedRandom) -> None:
        self.rng = rng

    # ---- draws: keyed by (sender, cooldown number, purpose) — a restart re-derives them ----
    def _draw(self, lo: float, hi: float, s: SenderState, *purpose: object) -> float:
        return self.rng.uniform(lo, hi, "sender", s.sender, s.cooldown_no, *purpose)

    def handle(self, s: SenderState, ev: HealthInput) -> HealthResult:
        """Apply one input: the handler names the outcome, the row of ``TRANSITIONS`` gives the
        next state and history code.  Raises :class:`MissingTransition` for an outcome the table
        does not list in this state (a bug in the machine)."""
        match ev:
            case Failed():
                out = self._failed(s, ev)
            case Delivered():
                out = self._delivered(s, ev)
            case Sent():
                out = _Outcome("paced", self._pace(s, ev))
            case ProbeResult():
                out = self._probe_result(s, ev)
            case Tick():
                out = self._tick(s, ev.at)
            case Recover():
                out = self._recover(s, ev)
            case _:
                assert_never(ev)
        row = lookup(s.state, input_type(ev), out.outcome)
        # the row sets the state name; an input that changes nothing hands back the state it got
        new = out.state if out.state.state == row.to else replace(out.state, state=row.to)
        history = list(out.first)
        if row.code is not None:
            history.append(History(s.sender, ev.at, row.code, out.note))
        facts = [Fact(action, "critical" if action == "need_check" else "high",
                      {"sender": s.sender, "state": new.state, **payload}) for action, payload in out.facts]
        return HealthResult(new, history, facts, out.send_probe)

    @staticmethod
    def _late(s: SenderState, started_at: float) -> bool:
        start = s.cooldown_start if s.cooldown_start is not None else s.last_cooldown_start
        return start is not None and started_at < start

    def _pace(self, s: SenderState, ev: Sent) -> SenderState:
        """The pause after a send: U(send_from, send_to) MINUTES of the active group (seed 000 §6
        «(next_send_date), хвилини»; fractions allowed), drawn keyed; every admitted delivery is
        paced, ``critical`` ones too (the pause is the sender's); warm-up probes are not sends."""
        g = ev.group
        gap = 0.0
        if g is not None and g.send_to_message_interval > 0:
            lo = g.send_from_message_interval
            gap = 60.0 * self.rng.uniform(lo, max(lo, g.send_to_message_interval), "sender", s.sender,
                                          "pace", s.sent)
        return replace(s, sent=s.sent + 1, next_send_at=max(s.next_send_at, ev.at + gap))

    def _delivered(self, s: SenderState, ev: Delivered) -> _Outcome:
        if s.state != ACTIVE:
            return _Outcome("held" if s.state == NEED_CHECK else "late or held", s)
        if self._late(s, ev.started_at):
            return _Outcome("late", s)
        times = (*s.deliveries, ev.at)[-RESET_DELIVERIES:]
        return _Outcome("counted", replace(s, failed_in_row=0, deliveries=times))

    def _failed(self, s: SenderState, ev: Failed) -> _Outcome:
        if s.state != ACTIVE:
            return _Outcome("held" if s.state == NEED_CHECK else "late or held", s)
        if not ev.retryable:
            return _Outcome("terminal", s)  # never counts (DESIGN §10)
        if self._late(s, ev.started_at):
            return _Outcome("late", s)
        if not ev.final:
            s = replace(s, failed_in_row=s.failed_in_row + 1)
        counted = f"failed_in_row={s.failed_in_row}"
        threshold = ev.group.threshold() if ev.group is not None else DEFAULT_THRESHOLD
        if s.failed_in_row >= threshold:
            out = self._start(s, ev.at, ev.group)
            first = () if ev.final else (History(s.sender, ev.at, FAILED, counted),)
            return _Outcome(out.outcome, out.state, out.note, first, out.facts)
        # below the threshold, and only here, the ladder may reset (seed 000 §2)
        recent = [t for t in s.deliveries if t > ev.at - RESET_WINDOW]
        if s.cooldown_times and len(recent) >= RESET_DELIVERIES:
            s = replace(s, cooldown_times=0)
            counted += "; cooldown_times reset"
        return _Outcome("final retry below threshold" if ev.final else "below threshold", s, counted)

    def _start(self, s: SenderState, now: float, g: Group | None) -> _Outcome:
        n = s.cooldown_times + 1
        cycling = n > LADDER_STEPS and g is not None and g.never_need_check
        if n > LADDER_STEPS and not cycling:
            s = replace(s, need_check_path="A", cooldown_times=n - 1)
            return _Outcome("ladder exhausted", s, "path A: ladder exhausted", facts=(("need_check", {"path": "A"}),))
        n = min(n, LADDER_STEPS)
        s = replace(s, cooldown_no=s.cooldown_no + 1, cooldown_times=n)
        if g is not None and g.has_delay():
            lo, hi = g.cooldown_delay_from * MIN, max(g.cooldown_delay_from, g.cooldown_delay_to) * MIN
        else:
            lo, hi = LADDER_SHORT if n <= 3 else LADDER_LONG
        end = now + self._draw(lo, hi, s, "duration")
        slot_lo = SLOT_SHORT if end - now < SHORT_BELOW else SLOT_LONG
        probe_at: float | None = max(now + self._draw(*slot_lo, s, "slot"), end - PROBE_LAST)
        if probe_at is not None and probe_at >= end:
            probe_at = None  # the cooldown is shorter than its slot: no warm-up, verdict neutral
        rest = g.rest_after_release_s(REST) if g is not None else REST
        end_probe = g is not None and g.probes_at_end()
        if end_probe:
            probe_at = None  # its proof is the probe at the end (Rule 8), not a warm-up slot
        s = replace(s, cooldown_start=now, last_cooldown_start=now, cooldown_end=end, rest_s=rest,
                    end_probe=end_probe, delay=(lo, hi),
                    exit_at=end + self._draw(*STEP_LAG, s, "step", 0), extensions=0, probe_at=probe_at,
                    had_slot=probe_at is not None, probe_sent_at=None, probe_in_flight=False,
                    probe_confirmed=False, probe_failed_terminal=False)
        facts: tuple[tuple[str, dict], ...] = (("cooldown", {"number": n, "end": end}),)
        if cycling:
            facts += (("need_check", {"path": "A", "cycling": True}),)
        note = f"#{n} {_until(end, s.exit_at, now)}" + (", cycling last step" if cycling else "")
        return _Outcome("ladder exhausted, never need check" if cycling else "threshold", s, note, facts=facts)

    def _probe_result(self, s: SenderState, ev: ProbeResult) -> _Outcome:
        if s.state != COOLDOWN or not s.probe_in_flight:
            return _Outcome("stale answer", s)
        sent_at = s.probe_sent_at
        if sent_at is None:
            raise MachineInvariantError(f"sender {s.sender!r}: a probe in flight without its send time")
        s = replace(s, probe_in_flight=False)
        if s.end_probe:
            return self._end_probe_result(s, ev)
        if ev.ok and ev.at - sent_at <= CONFIRM_WINDOW:
            return _Outcome("confirmed", replace(s, probe_confirmed=True))
        if not ev.ok and ev.terminal:
            s = replace(s, probe_failed_terminal=True)
        return _Outcome("not confirmed", s)

    def _tick(self, s: SenderState, now: float) -> _Outcome:
        if s.state != COOLDOWN:
            return _Outcome("stale timer", s)
        assert s.exit_at is not None and s.cooldown_end is not None
        if now >= s.exit_at:
            return self._verdict(s, now)
        if s.probe_at is not None and now >= s.probe_at and not s.probe_in_flight and s.probe_sent_at is None:
            s = replace(s, probe_in_flight=True, probe_sent_at=now)
            # the note names the warm-up: the cooldown's own slot, or the extension it checks
            which = f"extension {s.extensions}" if s.extensions else "warm-up slot"
            return _Outcome("probe sent", s, which, send_probe=True)
        return _Outcome("nothing due", s)

    def _end_probe_result(self, s: SenderState, ev: ProbeResult, lost: bool = False) -> _Outcome:
        """The answer of the probe at a Stack cooldown's end (Rule 8): proven → 105 then 100;
        else a new cooldown of the group's delay (102), keyed by the re-probe number."""
        if ev.ok:
            out = self._release(s, ev.at, "proven")
            first = (History(s.sender, ev.at, WARMUP_OK, "GET /v1/health answered 200"),)
            return _Outcome("proven at the end", out.state, out.note, first, out.facts)
        k = s.extensions + 1
        lo, hi = s.delay
        end = ev.at + self._draw(lo, hi, s, "unproven", k)
        s = replace(s, extensions=k, cooldown_end=end, probe_sent_at=None,
                    exit_at=end + self._draw(*STEP_LAG, s, "unproven step", k))
        why = "probe unanswered" if lost else "probe failed"
        return _Outcome("unproven", s, f"unproven: {why}; {_until(end, s.exit_at, ev.at)}")

    def _verdict(self, s: SenderState, now: float) -> _Outcome:
        if s.end_probe and not s.probe_confirmed:
            if s.probe_in_flight:
                if s.probe_sent_at is not None and now < s.probe_sent_at + END_PROBE_WAIT:
                    return _Outcome("nothing due", s)  # its answer is on the way
                # no answer in END_PROBE_WAIT (the channel's timeouts are far shorter): unproven
                return self._end_probe_result(replace(s, probe_in_flight=False),
                                              ProbeResult(now, ok=False), lost=True)
            return _Outcome("end probe sent", replace(s, probe_in_flight=True, probe_sent_at=now),
                            send_probe=True)
        if s.probe_confirmed:
            return self._release(s, now, "proven")
        if s.probe_failed_terminal:
            s = replace(s, need_check_path="B", cooldown_start=None, probe_in_flight=False)
            return _Outcome("probe failed terminally", s, "path B: warm-up failed terminally",
                            facts=(("need_check", {"path": "B"}),))
        if not s.had_slot:
            return self._release(s, now, "neutral")
        if s.extensions < EXTENSIONS:
            k = s.extensions + 1
            end = now + self._draw(*EXTENSION, s, "extension", k)
            # a new probe for the extension, unless the earlier one is still in flight (one at a time)
            s = replace(s, extensions=k, cooldown_end=end, exit_at=end + self._draw(*STEP_LAG, s, "step", k),
                        probe_at=now, probe_sent_at=s.probe_sent_at if s.probe_in_flight else None)
            return _Outcome("extension", s, f"{k} {_until(end, s.exit_at, now)}")
        return self._release(s, now, "fail-open")

    @staticmethod
    def _release(s: SenderState, now: float, verdict: str) -> _Outcome:
        s = replace(s, failed_in_row=0, cooldown_start=None, cooldown_end=None, exit_at=None,
                    probe_at=None, probe_in_flight=False, next_send_at=max(s.next_send_at, now + s.rest_s))
        return _Outcome(verdict, s, verdict, facts=(("recovered", {"verdict": verdict}),))

    @staticmethod
    def _recover(s: SenderState, ev: Recover) -> _Outcome:
        note = f"from {s.state} by {ev.by}"
        s = replace(s, failed_in_row=0, cooldown_times=0, cooldown_start=None, cooldown_end=None,
                    exit_at=None, probe_at=None, probe_in_flight=False, need_check_path=None)
        return _Outcome("manual", s, note, facts=(("recovered", {"verdict": "manual"}),))


def _until(end: float, exit_at: float | None, now: float) -> str:
    """A cooldown's span for its history note: the planned end and the verdict instant, which the
    scheduler's step lag (:data:`STEP_LAG`, keyed 0–7 min, drawn with the cooldown) puts after
    it — e.g. ``until 2026-11-30 08:42:55 UTC (1.2 min), verdict at 2026-11-30 08:48:31 UTC
    (+5.6 min step lag)``.  Without the verdict instant a shift lead saw the sender stay in
    cooldown minutes past the stated end with nothing to explain it."""
    text = f"until {utc_text(end)} ({(end - now) / MIN:.1f} min)"
    if exit_at is not None:
        text += f", verdict at {utc_text(exit_at)} (+{(exit_at - end) / MIN:.1f} min step lag)"
    return text


def utc_text(t: float | None) -> str:
    """Unix seconds as ``YYYY-MM-DD HH:MM:SS UTC`` for history notes and delivery notes a shift
    lead reads (pure arithmetic on the value, no clock read); ``None`` → ``"an unknown time"``."""
    if t is None:
        return "an unknown time"
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def may_send(s: SenderState, now: float) -> tuple[bool, float | None]:
    """May this sender start a delivery at ``now``?  ``(True, None)`` or ``(False, next)`` where
    ``next`` is the earliest unix second to ask again (``None`` while in Need Check: only a
    manual recovery frees it).  In cooldown ``next`` is the planned exit plus the rest (0 for
    the built-in Stack group)."""
    if s.state == NEED_CHECK:
        return False, None
    if s.state == COOLDOWN:
        assert s.exit_at is not None
        return False, s.exit_at + s.rest_s
    if now < s.next_send_at:
        return False, s.next_send_at
    return True, None


def next_timer(s: SenderState) -> float | None:
    """When the scheduler must send this sender a :class:`Tick` (probe slot or verdict), or None."""
    if s.state != COOLDOWN:
        return None
    assert s.exit_at is not None
    if s.end_probe and s.probe_in_flight and s.probe_sent_at is not None:
        return s.probe_sent_at + END_PROBE_WAIT  # its answer moves it on (Rule 8); this is the backstop
    if s.probe_at is not None and s.probe_sent_at is None and not s.probe_in_flight:
        return min(s.probe_at, s.exit_at)
    return s.exit_at
