"""Outcomes of a delivery attempt and what follows from them: classification, the retry ladder,
TTL (DESIGN §10 "Retries", "Outcomes are classified"; seed 002 ``RETRY_DELAYS``, ``retry_due``).

Rules / theory of operation
---------------------------
* An :class:`Outcome` is ``delivered``, ``retryable`` or ``terminal`` (plus ``held``: a batched
  Stack write not tried because an earlier write of its pair failed in the same batch — not an
  attempt of its own).  Channels classify with :func:`classify_status` / :func:`classify_exc`:
  retryable = connection error, timeout, HTTP 5xx, 408, 429 (counts against the sender's
  health); terminal = any other 4xx, a bad target, a template error (fails the delivery at once,
  never counts against the sender).  A 429's ``retry_after`` (seconds) is carried along.
* **Ladder** (seed 002): after failed attempt k (1-based) the next try is at
  ``now + LADDER[k-1]`` = +30 s, +2 min, +10 min, +30 min; attempt 5 failing makes the delivery
  ``failed``.  A ``retry_after`` longer than the step wins.  ``stack`` deliveries never become
  ``failed``: after the 5th they keep the last step (30 min) forever, and a terminal Stack
  answer is retried at the last step too (DESIGN §9 "nothing is dropped").
* **TTL**: a delivery whose ``expires_at`` has passed when it is about to be sent is ``failed``
  ("expired") without an attempt — checked at send time, not when queued.
* Pure functions over (row, outcome, now): no clock, no I/O.
"""
from __future__ import annotations

import enum

import msgspec

from .model import Delivery, Status

#: Seconds before retry 1, 2, 3, 4 (seed 002 ``RETRY_DELAYS``).
LADDER: tuple[float, ...] = (30.0, 120.0, 600.0, 1800.0)
MAX_ATTEMPTS = len(LADDER) + 1  # 5 attempts in all
RETRYABLE_STATUSES = frozenset({408, 429})


class Kind(str, enum.Enum):
    DELIVERED = "delivered"
    RETRYABLE = "retryable"
    TERMINAL = "terminal"
    HELD = "held"


class Outcome(msgspec.Struct, frozen=True, kw_only=True):
    kind: str  # Kind value
    error: str | None = None  # one line, secrets already scrubbed
    status: int | None = None  # HTTP status when there was one
    retry_after: float | None = None  # seconds, from a 429

    @property
    def ok(self) -> bool:
        return self.kind == Kind.DELIVERED.value


DELIVERED = Outcome(kind=Kind.DELIVERED.value)


def retryable(error: str, status: int | None = None, retry_after: float | None = None) -> Outcome:
    return Outcome(kind=Kind.RETRYABLE.value, error=error, status=status, retry_after=retry_after)


def terminal(error: str, status: int | None = None) -> Outcome:
    return Outcome(kind=Kind.TERMINAL.value, error=error, status=status)


def held(error: str) -> Outcome:
    return Outcome(kind=Kind.HELD.value, error=error)


def classify_status(status: int, detail: str = "", retry_after: float | None = None) -> Outcome:
    """An HTTP answer → outcome (2xx delivered; 5xx/408/429 retryable; other codes terminal)."""
    if 200 <= status < 300:
        return DELIVERED
    text = f"HTTP {status}" + (f": {detail[:200]}" if detail else "")
    if status >= 500 or status in RETRYABLE_STATUSES:
        return retryable(text, status, retry_after if status == 429 else None)
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


def after(row: Delivery, outcome: Outcome, now: float, *, attempts: int | None = None) -> Next:
    """The row's next state after attempt number ``attempts`` (default ``row.attempts + 1``)
    ended with ``outcome`` at ``now`` (unix seconds)."""
    k = row.attempts + 1 if attempts is None else attempts
    if outcome.kind == Kind.DELIVERED.value:
        return Next(status=Status.DELIVERED.value, attempts=k, next_attempt_at=None,
                    last_error=None, delivered_at=now)
    stack = row.channel == "stack"
    if outcome.kind == Kind.HELD.value:  # not an attempt: back to where it was, due with the head
        return Next(status=Status.PENDING.value, attempts=k - 1, next_attempt_at=now + LADDER[0],
                    last_error=outcome.error)
    error = f"{outcome.kind}: {outcome.error}" if outcome.error else outcome.kind
    if outcome.kind == Kind.TERMINAL.value and not stack:
        return Next(status=Status.FAILED.value, attempts=k, next_attempt_at=None, last_error=error,
                    final=True)
    if not stack and k >= MAX_ATTEMPTS:
        return Next(status=Status.FAILED.value, attempts=k, next_attempt_at=None, last_error=error,
                    final=True)
    step = LADDER[-1] if outcome.kind == Kind.TERMINAL.value else LADDER[min(k, len(LADDER)) - 1]
    if outcome.retry_after is not None and outcome.retry_after > step:
        step = outcome.retry_after
    return Next(status=Status.PENDING.value, attempts=k, next_attempt_at=now + step,
                last_error=error)


def expired(row: Delivery, now: float) -> bool:
    """The row's TTL has passed at ``now`` (checked at send time)."""
    return row.expires_at is not None and now >= row.expires_at


def expire(row: Delivery, now: float) -> Next:
    return Next(status=Status.FAILED.value, attempts=row.attempts, next_attempt_at=None,
                last_error=f"expired: ttl passed at {row.expires_at:.3f}, not sent", final=True)
