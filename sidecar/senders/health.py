"""The sender health machine (seed 000 §1–§4; DESIGN §10 "Sender health").  Pure and sans-I/O.

Rules / theory of operation
---------------------------
A sender is ``active``, in ``cooldown`` or in ``need_check``.  :func:`handle` takes the state, one
event and returns a :class:`Step` (new state, history rows, facts).  Time is the event's ``at``
(unix seconds); every draw is keyed by ``(sender, cooldown number, purpose)`` through
:class:`~sidecar.core.rng.KeyedRandom`, so a restart re-derives the same durations and slots and the
stored ``cooldown_end`` never moves.

* **Trigger** (§1): a retryable failure adds 1 to ``failed_in_row`` (history 109); the final retry
  of a delivery does not add but still runs the check; terminal failures never count.  Any
  delivery and leaving a cooldown set it to 0.  Threshold: the active group's ``failed_in_row``
  (0 = default 2, 1 = every failure).
* **Check** (§2): at the threshold a cooldown starts (101) with ``cooldown_times`` + 1: #1–#3
  U(60, 120) min, #4–#5 U(12, 14) h, then Need Check path A (103).  A group with both delays > 0
  replaces the durations.  Below the threshold — and only there — ``cooldown_times`` resets to 0
  when the sender had ≥ 11 deliveries in the last 14 h.
* **Warm-up gate** (§3): the slot is planned at start: no earlier than +20–30 min (long) or
  +5–10 min (short, < 60 min) and sent in the last 75 min before the end; when the slot is not
  before the end there is none.  The probe is sent (104) by a :class:`Tick` at its slot, exactly
  one in flight; a success within 3 h of sending confirms (105).  ONE probe per slot: a failed
  one is not resent inside its slot — §3 «одна … відправка (warm-up)», the extension is the
  seed's answer (docs/decisions.md "Sender health").
* **Verdict** (§3) at the scheduler's step after ``cooldown_end`` (the real exit lags the plan by a
  keyed 0–7 min: step 2 min + jitter ≤ 5): confirmed → release ``proven``; no slot → ``neutral``;
  probe failed terminally → Need Check path B (103); otherwise up to 2 extensions of U(55, 70) min
  (102, a new probe each), then release ``fail-open``.  A release (100, verdict in the note) sets
  ``failed_in_row`` 0, keeps ``cooldown_times``, and rests the sender 10 more min — except
  the built-in Stack group, which rests 0 (:meth:`~.groups.Group.rest_after_release_s`; decided
  with the cooldown, at its start, like its duration).
* **Late results**: an outcome of a delivery started before the current (or last) cooldown began
  changes neither the probe nor the ladder.
* **Stack** (DESIGN §10): a group with ``never_need_check`` cycles its fifth step instead of path A
  and raises the ``need_check`` fact each time.
* **Manual recovery** (106) from cooldown or Need Check resets both counters.
* **Pacing**: :class:`Sent` (a delivery attempt starts) sets ``next_send_at`` by the active group's
  send interval; :func:`may_send` answers "may this sender send now, and when next?".

Transitions (``TRANSITIONS``; state × event kind → new state, history code):
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Literal, Union

import msgspec
from msgspec.structs import replace

from sidecar.core.rng import KeyedRandom

from .groups import Group

MIN = 60.0
HOUR = 3600.0
StateName = Literal["active", "cooldown", "need_check"]
ACTIVE: StateName = "active"
COOLDOWN: StateName = "cooldown"
NEED_CHECK: StateName = "need_check"

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
STEP_LAG = (0.0, 7 * MIN)  # scheduler step 2 min + jitter up to 5 min

# history codes: the seed's (109, 104, 105, 100) and ours (101, 102, 103, 106)
FAILED, WARMUP_SENT, WARMUP_OK, FINISHED = 109, 104, 105, 100
STARTED, EXTENDED, NEED_CHECK_CODE, RECOVERED = 101, 102, 103, 106


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


@dataclass(frozen=True)
class Failed:
    """A delivery attempt failed.  ``retryable`` per DESIGN §10; ``final`` = the delivery's last
    retry; ``started_at`` = when the attempt began; ``group`` = active group now."""

    at: float
    started_at: float
    retryable: bool = True
    final: bool = False
    group: Group | None = None


@dataclass(frozen=True)
class Delivered:
    at: float
    started_at: float


@dataclass(frozen=True)
class Sent:
    """A delivery attempt starts now (pacing by ``group``'s send interval)."""

    at: float
    group: Group | None = None


@dataclass(frozen=True)
class ProbeResult:
    at: float
    ok: bool
    terminal: bool = False


@dataclass(frozen=True)
class Tick:
    """The scheduler's timer for this sender fired (probe slot or verdict)."""

    at: float


@dataclass(frozen=True)
class Recover:
    at: float
    by: str = "manual"


Event = Union[Failed, Delivered, Sent, ProbeResult, Tick, Recover]


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
class Step:
    state: SenderState
    history: list[History] = field(default_factory=list)
    facts: list[Fact] = field(default_factory=list)
    send_probe: bool = False  # the runtime sends one probe on the sender's channel


#: Every transition: (state, event kind, outcome) → (new state, history code or None).
TRANSITIONS: dict[tuple[str, str, str], tuple[str, int | None]] = {
    (ACTIVE, "Failed", "below threshold"): (ACTIVE, FAILED),
    (ACTIVE, "Failed", "final retry below threshold"): (ACTIVE, None),
    (ACTIVE, "Failed", "terminal"): (ACTIVE, None),
    (ACTIVE, "Failed", "threshold"): (COOLDOWN, STARTED),
    (ACTIVE, "Failed", "ladder exhausted"): (NEED_CHECK, NEED_CHECK_CODE),
    (ACTIVE, "Failed", "ladder exhausted, never need check"): (COOLDOWN, STARTED),
    (ACTIVE, "Delivered", "counted"): (ACTIVE, None),
    (ACTIVE, "Sent", "paced"): (ACTIVE, None),
    (COOLDOWN, "Failed", "late or held"): (COOLDOWN, None),
    (COOLDOWN, "Delivered", "late or held"): (COOLDOWN, None),
    (COOLDOWN, "Tick", "probe sent"): (COOLDOWN, WARMUP_SENT),
    (COOLDOWN, "ProbeResult", "confirmed"): (COOLDOWN, WARMUP_OK),
    (COOLDOWN, "ProbeResult", "failed"): (COOLDOWN, None),
    (COOLDOWN, "Tick", "proven"): (ACTIVE, FINISHED),
    (COOLDOWN, "Tick", "neutral"): (ACTIVE, FINISHED),
    (COOLDOWN, "Tick", "fail-open"): (ACTIVE, FINISHED),
    (COOLDOWN, "Tick", "extension"): (COOLDOWN, EXTENDED),
    (COOLDOWN, "Tick", "probe failed terminally"): (NEED_CHECK, NEED_CHECK_CODE),
    (COOLDOWN, "Recover", "manual"): (ACTIVE, RECOVERED),
    (NEED_CHECK, "Recover", "manual"): (ACTIVE, RECOVERED),
    (ACTIVE, "Recover", "manual"): (ACTIVE, RECOVERED),
    # events that change nothing where they arrive (stale timers and answers, held senders)
    (ACTIVE, "Tick", "stale timer"): (ACTIVE, None),
    (ACTIVE, "ProbeResult", "stale answer"): (ACTIVE, None),
    (COOLDOWN, "Tick", "nothing due"): (COOLDOWN, None),
    (COOLDOWN, "Sent", "paced"): (COOLDOWN, None),
    (NEED_CHECK, "Failed", "held"): (NEED_CHECK, None),
    (NEED_CHECK, "Delivered", "held"): (NEED_CHECK, None),
    (NEED_CHECK, "Sent", "paced"): (NEED_CHECK, None),
    (NEED_CHECK, "Tick", "stale timer"): (NEED_CHECK, None),
    (NEED_CHECK, "ProbeResult", "stale answer"): (NEED_CHECK, None),
}
__doc__ = (__doc__ or "") + "\n".join(
    f"* {s} × {e} ({o}) → {t}" + (f" [{c}]" if c else "") for (s, e, o), (t, c) in TRANSITIONS.items())


class HealthMachine:
    """The transition function with its keyed randomness (one per deployment seed)."""

    def __init__(self, rng: KeyedRandom) -> None:
        self.rng = rng

    # ---- draws: keyed by (sender, cooldown number, purpose) — a restart re-derives them ----
    def _draw(self, lo: float, hi: float, s: SenderState, *purpose: object) -> float:
        return self.rng.uniform(lo, hi, "sender", s.sender, s.cooldown_no, *purpose)

    def handle(self, s: SenderState, ev: Event) -> Step:
        """Apply one event.  Events that do not apply in the current state leave it unchanged."""
        if isinstance(ev, Failed):
            return self._failed(s, ev)
        if isinstance(ev, Delivered):
            if s.state != ACTIVE or self._late(s, ev.started_at):
                return Step(s)
            times = (*s.deliveries, ev.at)[-RESET_DELIVERIES:]
            return Step(replace(s, failed_in_row=0, deliveries=times))
        if isinstance(ev, Sent):
            return Step(self._pace(s, ev))
        if isinstance(ev, ProbeResult):
            return self._probe_result(s, ev)
        if isinstance(ev, Tick):
            return self._tick(s, ev.at)
        return self._recover(s, ev)

    @staticmethod
    def _late(s: SenderState, started_at: float) -> bool:
        start = s.cooldown_start if s.cooldown_start is not None else s.last_cooldown_start
        return start is not None and started_at < start

    def _pace(self, s: SenderState, ev: Sent) -> SenderState:
        g = ev.group
        gap = 0.0
        if g is not None and g.send_to_message_interval > 0:
            lo = g.send_from_message_interval
            gap = self.rng.uniform(lo, max(lo, g.send_to_message_interval), "sender", s.sender, "pace", s.sent)
        return replace(s, sent=s.sent + 1, next_send_at=max(s.next_send_at, ev.at + gap))

    def _failed(self, s: SenderState, ev: Failed) -> Step:
        if s.state != ACTIVE or self._late(s, ev.started_at) or not ev.retryable:
            return Step(s)  # held, late (changes nothing) or terminal (never counts)
        hist: list[History] = []
        if not ev.final:
            s = replace(s, failed_in_row=s.failed_in_row + 1)
            hist.append(History(s.sender, ev.at, FAILED, f"failed_in_row={s.failed_in_row}"))
        threshold = ev.group.threshold() if ev.group is not None else DEFAULT_THRESHOLD
        if s.failed_in_row >= threshold:
            step = self._start(s, ev.at, ev.group)
            return Step(step.state, hist + step.history, step.facts)
        # below the threshold, and only here, the ladder may reset (seed 000 §2)
        recent = [t for t in s.deliveries if t > ev.at - RESET_WINDOW]
        if s.cooldown_times and len(recent) >= RESET_DELIVERIES:
            s = replace(s, cooldown_times=0)
            if hist:
                hist[-1] = History(s.sender, ev.at, FAILED, hist[-1].note + "; cooldown_times reset")
        return Step(s, hist)

    def _start(self, s: SenderState, now: float, g: Group | None) -> Step:
        n = s.cooldown_times + 1
        cycling = n > LADDER_STEPS and g is not None and g.never_need_check
        if n > LADDER_STEPS and not cycling:
            s = replace(s, state=NEED_CHECK, need_check_path="A", cooldown_times=n - 1)
            return Step(s, [History(s.sender, now, NEED_CHECK_CODE, "path A: ladder exhausted")],
                        [self._fact("need_check", s, path="A")])
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
        s = replace(s, state=COOLDOWN, cooldown_start=now, last_cooldown_start=now, cooldown_end=end, rest_s=rest,
                    exit_at=end + self._draw(*STEP_LAG, s, "step", 0), extensions=0, probe_at=probe_at,
                    had_slot=probe_at is not None, probe_sent_at=None, probe_in_flight=False,
                    probe_confirmed=False, probe_failed_terminal=False)
        facts = [self._fact("cooldown", s, number=n, end=end)]
        if cycling:
            facts.append(self._fact("need_check", s, path="A", cycling=True))
        note = f"#{n} {_until(end, s.exit_at, now)}" + (", cycling last step" if cycling else "")
        return Step(s, [History(s.sender, now, STARTED, note)], facts)

    def _probe_result(self, s: SenderState, ev: ProbeResult) -> Step:
        if s.state != COOLDOWN or not s.probe_in_flight:
            return Step(s)
        sent_at = s.probe_sent_at
        assert sent_at is not None
        s = replace(s, probe_in_flight=False)
        if ev.ok and ev.at - sent_at <= CONFIRM_WINDOW:
            return Step(replace(s, probe_confirmed=True), [History(s.sender, ev.at, WARMUP_OK)])
        if not ev.ok and ev.terminal:
            s = replace(s, probe_failed_terminal=True)
        return Step(s)

    def _tick(self, s: SenderState, now: float) -> Step:
        if s.state != COOLDOWN:
            return Step(s)
        assert s.exit_at is not None and s.cooldown_end is not None
        if now >= s.exit_at:
            return self._verdict(s, now)
        if s.probe_at is not None and now >= s.probe_at and not s.probe_in_flight and s.probe_sent_at is None:
            s = replace(s, probe_in_flight=True, probe_sent_at=now)
            # the note names the warm-up: the cooldown's own slot, or the extension it checks
            which = f"extension {s.extensions}" if s.extensions else "warm-up slot"
            return Step(s, [History(s.sender, now, WARMUP_SENT, which)], send_probe=True)
        return Step(s)

    def _verdict(self, s: SenderState, now: float) -> Step:
        if s.probe_confirmed:
            return self._release(s, now, "proven")
        if s.probe_failed_terminal:
            s = replace(s, state=NEED_CHECK, need_check_path="B", cooldown_start=None, probe_in_flight=False)
            return Step(s, [History(s.sender, now, NEED_CHECK_CODE, "path B: warm-up failed terminally")],
                        [self._fact("need_check", s, path="B")])
        if not s.had_slot:
            return self._release(s, now, "neutral")
        if s.extensions < EXTENSIONS:
            k = s.extensions + 1
            end = now + self._draw(*EXTENSION, s, "extension", k)
            # a new probe for the extension, unless the earlier one is still in flight (one at a time)
            s = replace(s, extensions=k, cooldown_end=end, exit_at=end + self._draw(*STEP_LAG, s, "step", k),
                        probe_at=now, probe_sent_at=s.probe_sent_at if s.probe_in_flight else None)
            return Step(s, [History(s.sender, now, EXTENDED, f"{k} {_until(end, s.exit_at, now)}")])
        return self._release(s, now, "fail-open")

    def _release(self, s: SenderState, now: float, verdict: str) -> Step:
        s = replace(s, state=ACTIVE, failed_in_row=0, cooldown_start=None, cooldown_end=None, exit_at=None,
                    probe_at=None, probe_in_flight=False, next_send_at=max(s.next_send_at, now + s.rest_s))
        return Step(s, [History(s.sender, now, FINISHED, verdict)], [self._fact("recovered", s, verdict=verdict)])

    def _recover(self, s: SenderState, ev: Recover) -> Step:
        was = s.state
        s = replace(s, state=ACTIVE, failed_in_row=0, cooldown_times=0, cooldown_start=None, cooldown_end=None,
                    exit_at=None, probe_at=None, probe_in_flight=False, need_check_path=None)
        return Step(s, [History(s.sender, ev.at, RECOVERED, f"from {was} by {ev.by}")],
                    [self._fact("recovered", s, verdict="manual")])

    @staticmethod
    def _fact(action: str, s: SenderState, **payload: object) -> Fact:
        return Fact(action, "critical" if action == "need_check" else "high",
                    {"sender": s.sender, "state": s.state, **payload})


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
    if s.probe_at is not None and s.probe_sent_at is None and not s.probe_in_flight:
        return min(s.probe_at, s.exit_at)
    return s.exit_at
