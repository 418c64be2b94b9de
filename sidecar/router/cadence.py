"""Stack's flush cadence: WHEN the delivery pump sends Stack's writes (DESIGN §9 "Batch writes").

Rules / theory of operation
---------------------------
* A Stack write (a ``stack`` delivery row) has a **due instant**: ``next_attempt_at``, the instant
  it was queued for a first attempt, or its retry instant on :data:`~.attempt.STACK_LADDER`
  (5 s, 15 s, 30 s, 1 min, 2 min after the failed attempt).  The cadence decides the **flush
  instant**: when the pump's next pass sends Stack's due writes, all in flight together (one
  ``POST /v1/batch`` where Stack has it).
* ``interval_s`` 0 (the wall clock): a write is flushed at its due instant — the pump runs off the
  critical path in its own task, so a write goes out as soon as it is queued (today's behaviour).
* ``interval_s`` N > 0 (the virtual clock, setting ``stack_flush_interval_s``, default 10 s):
  first attempts wait for the next instant of the grid ``k·N`` (unix seconds) at or after their
  due instant, so every write queued within one N-second window travels in one request — Stack
  sees at most one flush per N seconds of virtual time from new writes, whatever the driver's
  advances look like (the harness advances once per world event; one request per advance made
  batches of ~3 writes).  **Retries keep their exact ladder instants** (a failed write's retry is
  due at attempt + 5 s and is flushed then, not at the grid): the ladder and the
  ``sidecar/stack unreachable`` watch (5 min from the first failed attempt with no
  acknowledgement since, :class:`~.core.StackWatch`) keep their meaning to the second.  A flush
  sends every Stack write due by then, fresh or retry.
* Only heads of pairs count (per-pair order: a pair's later rows ride with its head).
* Where Stack's state is observed the runtime flushes at once, ignoring the cadence: the
  ``stack.flush`` bridge method (Electron or the harness before it reads Stack: a ``marker``
  expectation, the end of a replay, a fresh machine's login), ``session.logout``, the startup
  read of ``session.login`` and shutdown.  A SIGKILL flushes nothing: the rows are durable, the
  restarted process's first pass finds their flush instant in the past and sends them.
* Pure and in memory: no clock, no I/O.  :attr:`StackCadence.flush_at` is the flush instant the
  runtime knows — recomputed from SQLite after every pump pass (:meth:`after_pass`) and moved
  sooner by every step that queues Stack rows (:meth:`queued`) — so ``next_due`` (what
  ``clock.advance_to`` answers) includes it without a query.
"""
from __future__ import annotations

import math

DEFAULT_INTERVAL_S = 10.0  # virtual clock: shift.jsonl ~3 writes/s -> ~30 writes per request


def _min(*xs: float | None) -> float | None:
    vals = [x for x in xs if x is not None]
    return min(vals) if vals else None


class StackCadence:
    """When Stack's writes are flushed (module rules).  ``interval_s`` ≥ 0 seconds."""

    def __init__(self, interval_s: float = 0.0) -> None:
        if not (math.isfinite(interval_s) and interval_s >= 0):
            raise ValueError(f"interval_s must be a finite number >= 0, not {interval_s!r}")
        self.interval_s = float(interval_s)
        self.flush_at: float | None = None  # unix seconds; None = no Stack write pending

    def grid(self, due: float) -> float:
        """The flush instant of a first attempt due at ``due`` (unix seconds): the next multiple
        of the interval at or after it (``due`` itself with interval 0)."""
        n = self.interval_s
        if n <= 0:
            return due
        k = math.ceil(due / n)
        at = k * n
        return at if at >= due else (k + 1) * n  # float rounding never moves a write earlier

    def instant(self, fresh_due: float | None, retry_due: float | None) -> float | None:
        """The flush instant for pair heads whose earliest first attempt is due at ``fresh_due``
        and earliest retry at ``retry_due`` (unix seconds, None = none)."""
        return _min(None if fresh_due is None else self.grid(fresh_due), retry_due)

    def after_pass(self, fresh_due: float | None, retry_due: float | None) -> float | None:
        """A pump pass left these heads pending (from SQLite): the flush instant from now on."""
        self.flush_at = self.instant(fresh_due, retry_due)
        return self.flush_at

    def queued(self, at: float) -> float:
        """A step queued Stack writes due at ``at``: the flush instant that sends them (the one
        already planned when it is sooner)."""
        mine = self.grid(at)
        self.flush_at = mine if self.flush_at is None else min(self.flush_at, mine)
        return self.flush_at

    def due(self, now: float) -> bool:
        """Is a flush due at ``now`` (unix seconds)?"""
        return self.flush_at is not None and self.flush_at <= now
