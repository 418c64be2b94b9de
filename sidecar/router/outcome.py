"""A delivery attempt's outcome and what follows from it for the row: classification, the
retry ladder, TTL (DESIGN §10 "Retries", "Outcomes are classified"; seed 002 ``RETRY_DELAYS``,
``retry_due``; seed 000 §1).  Pure values and functions: no clock, no I/O.

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
  (:attr:`.attempt.Attempts.flood_until`); the rules and numbers are :mod:`.flood`'s.
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
  ("expired") without an attempt — checked at send time (:func:`expired`, asked by the gate),
  not when queued.
* **Health counts attempts, not deliveries** (seed 000 §1 "+1 per failed send"): an attempt
  that carried several deliveries (a Stack ``POST /v1/batch``) is told to sender health ONCE,
  as :func:`request_outcome` of its deliveries' outcomes.
"""
from __future__ import annotations

import enum

import msgspec

from .flood import FLOOD_STATUS, flood_lead, flood_wait
from .model import Delivery, Status

__all__ = ["DELIVERED", "FLOOD_STATUS", "LADDER", "MAX_ATTEMPTS", "RETRYABLE_STATUSES", "STACK_LADDER",
           "Kind", "Next", "Outcome", "after", "classify_exc", "classify_status", "expire", "expired",
           "flooded", "held", "ladder_for", "request_outcome", "retry_step", "retryable", "terminal"]

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


#: HTTP statuses below 500 that are retryable (408 Request Timeout).
RETRYABLE_STATUSES = frozenset({408})


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
    * else any retryable (the request failed as a whole — no answer, 5xx — or every write
      that was tried answered 5xx/408) → that one retryable failure: +1, once;
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
