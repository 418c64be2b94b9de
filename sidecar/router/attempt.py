"""One delivery attempt: the gate every attempt goes through, outcomes and what follows from
them — classification, the retry ladder, TTL (DESIGN §10 "Retries", "Outcomes are classified",
sender health's plug; seed 002 ``RETRY_DELAYS``, ``retry_due``; seed 000 §1).

Rules / theory of operation
---------------------------
* An :class:`Outcome` is ``delivered``, ``retryable``, ``flooded`` or ``terminal`` (plus
  ``held``: a batched Stack write not tried because an earlier write of its pair failed in the
  same batch — not an attempt of its own).  Channels classify with :func:`classify_status` /
  :func:`classify_exc`: retryable = connection error, timeout, HTTP 5xx, 408 (counts against the
  sender's health); flooded = HTTP 429, with its ``retry_after`` (seconds) when the receiver gave
  one; terminal = any other 4xx, a bad target, a template error (fails the delivery at once,
  never counts against the sender).
* **Flood control is not failure** (DESIGN §10 as revised): a ``flooded`` outcome (a 429) is
  not an attempt, never reported to sender health, and paces the whole target
  (:attr:`Attempts.flood_until`); the rules and numbers are :mod:`.flood`'s.
* **Ladder** (seed 002): after failed attempt k (1-based) the next try is at
  ``now + LADDER[k-1]`` = +30 s, +2 min, +10 min, +30 min; attempt 5 failing makes the delivery
  ``failed``.  A ``retry_after`` longer than the step wins.  ``stack`` deliveries never become
  ``failed`` and have a ladder of their own, :data:`STACK_LADDER` (5 s, 15 s, 30 s, 1 min,
  2 min, then 2 min forever — the old outbox's): DESIGN §10 keeps a Stack outage to minutes
  (the built-in Stack group's 1–2 min cooldown), and the generic ladder's 10 and 30 min steps
  would hold every marker of a shift that long after Stack is back.  A terminal Stack answer (a
  4xx other than 408/409/429: Stack answered and refused the write) fails that write like any
  delivery — its row keeps Stack's status (``Next.status_code``) and body (``last_error``) — so
  it holds neither its pair nor a retry forever: each marker write carries the whole marker, so
  the pair's newer write supersedes it (docs/decisions.md "A refused Stack write").
* **TTL**: a delivery whose ``expires_at`` has passed when it is about to be sent is ``failed``
  ("expired") without an attempt — checked at send time (in :meth:`Attempts.begin`), not when
  queued.
* Before an attempt, :meth:`Attempts.begin` asks the :class:`SenderHealth` "may this sender
  (target) send now?".  ``Admission.allowed`` False: the row waits — it is not an attempt and
  never counted; ``not_before`` (unix seconds) re-arms it then, ``None`` parks it until health
  releases the target (:class:`ReleaseTarget`).  Waiting rows keep their order (by
  ``next_attempt_at``, then ``seq``), and a parked row is not due, so nothing busy-loops.
* A row whose 5th attempt was claimed but never settled (a crash) is ``failed`` there too:
  five attempts is the bound even across restarts.  Otherwise the attempt is **claimed**
  (:class:`~.storage.ClaimDelivery`: attempts + 1, retry time already on the ladder) and
  committed before any byte is sent (durability: :mod:`.ops`).
* After the attempt, :meth:`Attempts.finish` turns the channel's :class:`Outcome` into the row's
  next state (:func:`after`) and reports it to health — "delivered", "failed, retryable" or
  "failed, terminal", with ``final`` set on a delivery's last attempt
  (seed 000 §1: the final retry runs the check without incrementing).  ``held`` outcomes (a
  batched Stack write not tried) are not attempts and are not reported.
* **Health counts attempts, not deliveries** (seed 000 §1 "+1 per failed send"): one HTTP request
  is one attempt.  A delivery sent alone is reported on its own (:meth:`Attempts.report`); an
  attempt that carried several — a Stack ``POST /v1/batch``, or Stack's single writes sent
  together in one round, before any of them answered — is reported ONCE
  (:meth:`Attempts.report_request`, :func:`request_outcome`): a dropped batch of 10 writes is
  one failure, not 10 (it was 10, and 3 started the Stack group's cooldown at once).
* Health answers with a :class:`Report`: store ops to commit with the outcome (its counters and
  history) and router events to emit (``sidecar/sender/...``).  Recording the outcome
  (:meth:`Attempts.settle`, pure) and telling health (:meth:`Attempts.report`, which may raise)
  are separate calls, so the pump records every outcome of a round even when health fails on
  one of them (:mod:`.io.pump`).  :class:`AlwaysOpen` is the
  default until sender health exists: always yes, reports nothing.
* Pure: no clock, no I/O; the pump (:mod:`.io.pump`) commits what these return.
"""
from __future__ import annotations

import enum
from typing import Protocol

import msgspec

from sidecar.store.ops import Op, register

from .flood import FLOOD_STATUS, flood_lead, flood_wait
from .model import Delivery, RoutingEvent, Status
from .ops import ClaimDelivery, SettleDelivery

#: Seconds before retry 1, 2, 3, 4 (seed 002 ``RETRY_DELAYS``).
LADDER: tuple[float, ...] = (30.0, 120.0, 600.0, 1800.0)
MAX_ATTEMPTS = len(LADDER) + 1  # 5 attempts in all
#: Seconds before Stack retry 1, 2, …; the last step repeats forever (see module rules).
STACK_LADDER: tuple[float, ...] = (5.0, 15.0, 30.0, 60.0, 120.0)


def ladder_for(channel: str) -> tuple[float, ...]:
    """The retry ladder of a channel's deliveries."""
    return STACK_LADDER if channel == "stack" else LADDER


def retry_step(channel: str, attempts: int) -> float:
    """Seconds from failed attempt number ``attempts`` (1-based) to the next try."""
    ladder = ladder_for(channel)
    return ladder[min(max(attempts, 1), len(ladder)) - 1]
RETRYABLE_STATUSES = frozenset({408})

#: Seconds a row waits when sender health raised asking "may it send?" (a bug, logged).
HEALTH_ERROR_WAIT_S = 30.0


class Kind(str, enum.Enum):
    DELIVERED = "delivered"
    RETRYABLE = "retryable"
    FLOODED = "flooded"  # a 429: pace the target, not an attempt, not a failure
    TERMINAL = "terminal"
    HELD = "held"


class Outcome(msgspec.Struct, frozen=True, kw_only=True):
    kind: str  # Kind value
    error: str | None = None  # one line, secrets already scrubbed
    status: int | None = None  # HTTP status when there was one
    retry_after: float | None = None  # seconds, from a 429 (``flooded``)

    @property
    def ok(self) -> bool:
        return self.kind == Kind.DELIVERED.value


DELIVERED = Outcome(kind=Kind.DELIVERED.value)


def retryable(error: str, status: int | None = None, retry_after: float | None = None) -> Outcome:
    return Outcome(kind=Kind.RETRYABLE.value, error=error, status=status, retry_after=retry_after)


def flooded(error: str, retry_after: float | None = None, status: int = FLOOD_STATUS) -> Outcome:
    """A 429 (flood control), ``retry_after`` seconds when the receiver said (DESIGN §10)."""
    return Outcome(kind=Kind.FLOODED.value, error=error, status=status, retry_after=retry_after)


def terminal(error: str, status: int | None = None) -> Outcome:
    return Outcome(kind=Kind.TERMINAL.value, error=error, status=status)


def held(error: str) -> Outcome:
    return Outcome(kind=Kind.HELD.value, error=error)


def classify_status(status: int, detail: str = "", retry_after: float | None = None) -> Outcome:
    """An HTTP answer → outcome (2xx delivered; 5xx/408 retryable; 429 flooded with
    ``retry_after`` seconds; other codes terminal)."""
    if 200 <= status < 300:
        return DELIVERED
    text = f"HTTP {status}" + (f": {detail[:200]}" if detail else "")
    if status == FLOOD_STATUS:
        return flooded(text, retry_after)
    if status >= 500 or status in RETRYABLE_STATUSES:
        return retryable(text, status)
    return terminal(text, status)


def classify_exc(exc: BaseException) -> Outcome:
    """A transport failure (connection refused/reset, timeout, protocol error) → retryable."""
    return retryable(f"{type(exc).__name__}: {exc}"[:300])


class Next(msgspec.Struct, frozen=True, kw_only=True):
    """The row's state after an outcome."""

    status: str
    attempts: int
    next_attempt_at: float | None
    last_error: str | None
    delivered_at: float | None = None
    final: bool = False  # this attempt was the delivery's last one (sender health: seed 000 §1)
    status_code: int | None = None  # the receiver's HTTP status of a terminal answer (a refusal)


def after(row: Delivery, outcome: Outcome, now: float, *, attempts: int | None = None) -> Next:
    """The row's next state after attempt number ``attempts`` (default ``row.attempts + 1``)
    ended with ``outcome`` at ``now`` (unix seconds)."""
    k = row.attempts + 1 if attempts is None else attempts
    if outcome.kind == Kind.DELIVERED.value:
        return Next(status=Status.DELIVERED.value, attempts=k, next_attempt_at=None,
                    last_error=None, delivered_at=now)
    stack = row.channel == "stack"
    ladder = ladder_for(row.channel)
    if outcome.kind == Kind.HELD.value:  # not an attempt: back to where it was, due with the head
        return Next(status=Status.PENDING.value, attempts=k - 1, next_attempt_at=now + ladder[0],
                    last_error=outcome.error)
    if outcome.kind == Kind.FLOODED.value:  # not an attempt, not a failure (module rules)
        wait, why = flood_wait(retry_step(row.channel, k), outcome.retry_after)
        return Next(status=Status.PENDING.value, attempts=k - 1,
                    next_attempt_at=now + wait + flood_lead(row.priority),
                    last_error=f"flood control: {outcome.error or 'HTTP 429'}; {why}",
                    status_code=outcome.status)
    error = f"{outcome.kind}: {outcome.error}" if outcome.error else outcome.kind
    if outcome.kind == Kind.TERMINAL.value:
        # a Stack write too: Stack answered and refused it — retrying the same bytes under the
        # same key cannot change the answer (docs/decisions.md "A refused Stack write")
        return Next(status=Status.FAILED.value, attempts=k, next_attempt_at=None, last_error=error,
                    final=True, status_code=outcome.status)
    if not stack and k >= MAX_ATTEMPTS:
        return Next(status=Status.FAILED.value, attempts=k, next_attempt_at=None, last_error=error,
                    final=True)
    step = retry_step(row.channel, k)
    return Next(status=Status.PENDING.value, attempts=k, next_attempt_at=now + step,
                last_error=error)


def request_outcome(outcomes: list[Outcome]) -> Outcome | None:
    """The outcome of ONE attempt that carried several deliveries, for sender health (seed 000
    §1 counts failed *sends*; DESIGN §9: "a write's failure fails only that write and the
    pair's later writes in the same batch"; DESIGN §10 outcome classes):

    * any delivery delivered → delivered: the sender delivered (``failed_in_row`` back to 0);
      the writes that failed beside it are that write's failure, retried on their own ladder,
      not the sender's — one poisoned write must not park every pair behind a cooldown;
    * else any retryable (the request failed as a whole — no answer, 5xx, 429 — or every write
      that was tried answered 5xx/408/429) → that one retryable failure: +1, once;
    * else any terminal (4xx per write) → terminal: never counts;
    * only ``held`` or ``flooded`` (not attempts, not failures) or nothing → None: nothing to
      report."""
    kinds = {o.kind for o in outcomes}
    if Kind.DELIVERED.value in kinds:
        return DELIVERED
    for kind in (Kind.RETRYABLE.value, Kind.TERMINAL.value):  # flooded: not a failure
        for o in outcomes:
            if o.kind == kind:
                return o
    return None


def expired(row: Delivery, now: float) -> bool:
    """The row's TTL has passed at ``now`` (checked at send time)."""
    return row.expires_at is not None and now >= row.expires_at


def expire(row: Delivery, now: float) -> Next:
    return Next(status=Status.FAILED.value, attempts=row.attempts, next_attempt_at=None,
                last_error=f"expired: ttl passed at {row.expires_at:.3f}, not sent", final=True)


# ---- the gate: the one place every attempt goes through ---------------------------------------

class Admission(msgspec.Struct, frozen=True, kw_only=True):
    allowed: bool
    not_before: float | None = None  # when to ask again; None = wait for ReleaseTarget
    reason: str | None = None  # e.g. "cooldown until …" (shown in the row's last_error)


class Report(msgspec.Struct, frozen=True, kw_only=True):
    ops: tuple[Op, ...] = ()
    events: tuple[RoutingEvent, ...] = ()


YES = Admission(allowed=True)
NOTHING = Report()


class SenderHealth(Protocol):
    """What the router needs from sender health (seed 000); a sender is one target."""

    def may_send(self, target: str, channel: str, now: float) -> Admission: ...

    def report(self, target: str, channel: str, outcome: Outcome, now: float, *,
               final: bool) -> Report: ...

    def probes_due(self, now: float) -> list[str]:
        """Targets whose warm-up probe is to be sent now (seed 000 §3); each is returned once."""
        ...

    def probe_result(self, target: str, outcome: Outcome, now: float) -> Report:
        """The answer of a probe :meth:`probes_due` asked for."""
        ...


class AlwaysOpen:
    """Sender health before it exists: every sender may always send; nothing is recorded."""

    def may_send(self, target: str, channel: str, now: float) -> Admission:
        return YES

    def report(self, target: str, channel: str, outcome: Outcome, now: float, *,
               final: bool) -> Report:
        return NOTHING

    def probes_due(self, now: float) -> list[str]:
        return []

    def probe_result(self, target: str, outcome: Outcome, now: float) -> Report:
        return NOTHING


class DeferDelivery(Op, frozen=True):
    """Not an attempt: try ``delivery_id`` again at ``next_attempt_at`` (None = parked)."""

    delivery_id: str
    next_attempt_at: float | None
    reason: str
    at: float


class ReleaseTarget(Op, frozen=True):
    """Health released ``target``: its parked rows become due at ``at``."""

    target: str
    at: float


register(DeferDelivery,
         "UPDATE deliveries SET next_attempt_at=?, last_error=?, updated_at=? WHERE id=? AND status='pending'",
         lambda o: (o.next_attempt_at, f"waiting: {o.reason}", o.at, o.delivery_id))
class RefreshWaiting(Op, frozen=True):
    """The sender's state changed while rows wait for it (a cooldown extended, Need Check): the
    rows health made wait get the new reason — never a stale instant in ``last_error``."""

    target: str
    reason: str
    at: float


#: rows that wait for their sender (health's DeferDelivery wrote their ``last_error``)
_WAITING = "last_error LIKE 'waiting: %'"
register(ReleaseTarget,
         # parked rows, and rows health deferred to a later instant (the planned exit plus the
         # rest, say), become due at the release: their "waiting: cooldown … until X" is stale
         # from now on and is cleared (the next attempt writes its own outcome)
         "UPDATE deliveries SET next_attempt_at=?, updated_at=?,"
         f" last_error=CASE WHEN {_WAITING} THEN NULL ELSE last_error END"
         " WHERE status='pending' AND target=? AND (next_attempt_at IS NULL"
         f" OR ({_WAITING} AND next_attempt_at >= ?))",
         lambda o: (o.at, o.at, o.target, o.at))
register(RefreshWaiting,
         f"UPDATE deliveries SET last_error=?, updated_at=? WHERE status='pending' AND target=? AND {_WAITING}",
         lambda o: (f"waiting: {o.reason}", o.at, o.target))


class Begin(msgspec.Struct, frozen=True, kw_only=True):
    """What to do with a due row: ``send`` (commit ``ops`` first), ``wait`` or ``expired``."""

    action: str  # "send" | "wait" | "expired"
    ops: tuple[Op, ...]
    attempt: int = 0  # the attempt number being made (send)
    next: Next | None = None  # the row's terminal state (expired): a delivery note tells it


class Finish(msgspec.Struct, frozen=True, kw_only=True):
    next: Next
    ops: tuple[Op, ...]
    events: tuple[RoutingEvent, ...] = ()


class Attempts:
    """The gate (see module rules).  ``health`` defaults to :class:`AlwaysOpen`."""

    def __init__(self, health: SenderHealth | None = None) -> None:
        self.health: SenderHealth = health if health is not None else AlwaysOpen()
        #: target → unix seconds before which it is not sent to (a 429's flood control).  In
        #: memory: after a restart a flooded target's first send may meet one more 429, which
        #: paces it again — never a failure (module rules).
        self.flood_until: dict[str, float] = {}

    def flooded_until(self, target: str, now: float) -> float | None:
        """The instant ``target``'s flood control ends, if it is still on at ``now``."""
        until = self.flood_until.get(target)
        return until if until is not None and until > now else None

    def begin(self, row: Delivery, now: float) -> Begin:
        """Claim, wait or expire ``row`` at ``now``.  Raises what sender health raises (the pump
        makes the row wait then: :meth:`health_error`)."""
        if expired(row, now):
            nxt = expire(row, now)
            return Begin(action="expired", ops=(_settle(row, nxt, now),), next=nxt)
        if row.channel != "stack" and row.attempts >= MAX_ATTEMPTS:
            # the last attempt was claimed and the process died before its outcome was recorded:
            # it counted (it may even have arrived), and there is no sixth
            nxt = Next(status="failed", attempts=row.attempts, next_attempt_at=None, final=True,
                       last_error=f"failed: attempt {row.attempts} of {MAX_ATTEMPTS} ended without an outcome")
            return Begin(action="expired", ops=(_settle(row, nxt, now),), next=nxt)
        until = self.flooded_until(row.target, now)
        if until is not None:  # the receiver asked to slow down: wait, not an attempt (a critical too)
            return Begin(action="wait", ops=(DeferDelivery(
                row.id, until + flood_lead(row.priority), f"flood control until {until:.3f} (the target answered 429)",
                now),))
        adm = self.health.may_send(row.target, row.channel, now)
        if not adm.allowed:
            return Begin(action="wait", ops=(DeferDelivery(row.id, adm.not_before,
                                                           adm.reason or "sender unavailable", now),))
        k = row.attempts + 1
        return Begin(action="send", attempt=k,
                     ops=(ClaimDelivery(row.id, k, now + retry_step(row.channel, k), now),))

    def finish(self, row: Delivery, outcome: Outcome, now: float, *, attempt: int) -> Finish:
        """:meth:`settle` then :meth:`report` (``attempt`` is the number :meth:`begin` claimed).
        Raises what sender health raises; the pump calls the two apart so that it never does."""
        nxt, settle = self.settle(row, outcome, now, attempt=attempt)
        rep = self.report(row, outcome, nxt, now, attempt=attempt)
        return Finish(next=nxt, ops=(settle, *rep.ops), events=rep.events)

    def settle(self, row: Delivery, outcome: Outcome, now: float, *,
               attempt: int) -> tuple[Next, SettleDelivery]:
        """The row's next state after attempt ``attempt`` ended with ``outcome``, and the op
        recording it.  Pure: never raises for a well-formed row."""
        nxt = after(row, outcome, now, attempts=attempt)
        if outcome.kind == Kind.FLOODED.value and nxt.next_attempt_at is not None:
            until = nxt.next_attempt_at - flood_lead(row.priority)
            self.flood_until[row.target] = max(until, self.flood_until.get(row.target, 0.0))
        return nxt, _settle(row, nxt, now)

    def report(self, row: Delivery, outcome: Outcome, nxt: Next, now: float, *,
               attempt: int) -> Report:
        """Tell sender health how the attempt ended (``held`` is no attempt and ``flooded`` no
        failure: nothing — ``failed_in_row`` stays as it was).  Raises what health raises."""
        if outcome.kind in (Kind.HELD.value, Kind.FLOODED.value):
            return NOTHING
        final = nxt.final or (row.channel != "stack" and attempt >= MAX_ATTEMPTS)
        return self.health.report(row.target, row.channel, outcome, now, final=final)

    def report_request(self, target: str, channel: str, outcomes: list[Outcome], now: float) -> Report:
        """Tell sender health how ONE attempt of ``target`` ended when it carried several
        deliveries (a Stack batch, or Stack's single writes sent together in one round):
        :func:`request_outcome` of their outcomes, reported once.  Never ``final`` (only
        ``stack`` sends several deliveries in one attempt, and its deliveries never fail).
        Raises what health raises."""
        agg = request_outcome(outcomes)
        if agg is None:
            return NOTHING
        return self.health.report(target, channel, agg, now, final=False)

    @staticmethod
    def health_error(row: Delivery, exc: BaseException, now: float) -> Begin:
        """Sender health raised asking about ``row``: the row waits :data:`HEALTH_ERROR_WAIT_S`
        — not an attempt — and the other targets go on."""
        why = f"sender health error ({type(exc).__name__}), asked again in {HEALTH_ERROR_WAIT_S:g} s"
        return Begin(action="wait", ops=(DeferDelivery(row.id, now + HEALTH_ERROR_WAIT_S, why, now),))


def _settle(row: Delivery, nxt: Next, now: float) -> SettleDelivery:
    return SettleDelivery(row.id, nxt.status, nxt.attempts, nxt.next_attempt_at, nxt.last_error,
                          nxt.delivered_at, now)
