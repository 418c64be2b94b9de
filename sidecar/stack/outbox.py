"""The outbox pump: delivers queued Stack writes (DESIGN §9, §10; architecture "Stack sync").

Rules / theory of operation
---------------------------
* Every Stack write is an outbox row written in the same transaction as the change that caused it
  (:mod:`.writes`).  :meth:`OutboxPump.run_due` is called by the runtime with ``now`` (unix seconds
  from the one clock) and sends what is due; it never reads a clock and never sleeps.
* **Per-pair order.**  Only the head of each pair (its lowest id) may be sent.  A pair whose head
  is failing or not yet due blocks its later rows, even due ones: a later write for a dialog never
  overtakes an earlier one (e.g. a marker ``clear`` never lands before the ``set`` it undoes, a
  task's ``closed`` never before its ``created``).  Other pairs are unaffected.
* A pass works in rounds: fetch up to ``concurrency`` due heads, send them at once, commit the
  round's ``Ack`` (row deleted) and ``Retry`` ops in one store transaction, repeat.  An ack makes
  the pair's next row its head, so a due follow-up write goes out in the same call.  The pass ends
  when no due head is left.  Rows are acknowledged only after the commit; a crash between send
  and commit resends the row later with the same ``Idempotency-Key``, which Stack answers with its
  first answer — harmless.
* **Backoff ladder** (default 5, 15, 30, 60, 120 s): a retryable failure (:class:`StackUnavailable`)
  re-arms the row at ``now + ladder[min(attempts, len(ladder) - 1)]`` with ``attempts + 1``.  The
  ladder is short on purpose: DESIGN §10 puts the Stack sender in a group with a 1–2 min cooldown
  so that an outage delays markers by minutes, not hours; a longer local ladder would undo that.
  Optional jitter is a keyed draw (``KeyedRandom``) so a restart re-derives the same times.
* **Nothing is dropped.**  A :class:`StackRejected` (4xx) row is *not* discarded: DESIGN §9 says a
  failed write stays queued and nothing is dropped, and §10 says Stack marker writes are never
  ``failed``.  A 4xx is usually a Stack-side contract or deployment problem that a fix on either
  side resolves; dropping the write would lose a chain's state for the next shift for good, while
  keeping it costs one request per ladder top.  So it is retried at the last ladder step and logged
  at ERROR every time, loud enough to be fixed.  Because of per-pair order it also holds back the
  later writes of its pair — that is deliberate: delivering them past a lost write would leave Stack
  in a state the sidecar never had.  Unexpected client exceptions are treated the same way.
* **Outage stop.**  If a round gets no response at all (every send ended without an HTTP status:
  refused, reset, timed out) and nothing succeeded, Stack is unreachable: the pass stops instead of
  walking the whole queue into timeouts.  Rows not tried stay due (not counted as attempts) and
  ``next_due`` is the earliest retry of the rows that were tried, so the caller comes back then.
* ``run_due`` passes are serialised by a lock: two concurrent calls never send the same row.
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from sidecar.core.rng import KeyedRandom
from sidecar.store.db import Store
from sidecar.store.ops import Ack, Op, Retry
from sidecar.store.rows import OutboxRow

from .client import StackClient
from .errors import StackError, StackRejected, StackUnavailable
from .writes import (StackWrite, candidate, followup_chat_key, followup_mail_key, marker_key,
                     marker_write, pair_of, task_event)

__all__ = ["OutboxPump", "PumpResult", "DEFAULT_LADDER", "StackWrite", "candidate",
           "followup_chat_key", "followup_mail_key", "marker_key", "marker_write", "pair_of",
           "task_event"]

log = logging.getLogger("sidecar.stack.outbox")

#: Seconds before retry number 1, 2, 3, …; the last step repeats forever.
DEFAULT_LADDER: tuple[float, ...] = (5, 15, 30, 60, 120)


@dataclass(frozen=True, slots=True)
class PumpResult:
    """What one :meth:`OutboxPump.run_due` pass did."""

    acked: list[OutboxRow] = field(default_factory=list)  # delivered and deleted, in send order
    failed: list[tuple[OutboxRow, StackError]] = field(default_factory=list)  # re-armed rows
    next_due: float | None = None  # when to call again (unix seconds); None = queue empty
    stalled: bool = False  # the pass stopped early because Stack was unreachable


class OutboxPump:
    """Sends due outbox rows of ``store`` through ``client``.

    ``concurrency``: sends in flight at once (≥ 1).  ``ladder``: backoff seconds (each > 0).
    ``rng``/``jitter``: optional keyed jitter, delay × (1 + jitter × u) with u ∈ [0, 1) drawn for
    ``("outbox", idem_key, attempts)``.
    """

    def __init__(self, store: Store, client: StackClient, *, concurrency: int = 8,
                 ladder: Sequence[float] = DEFAULT_LADDER, rng: KeyedRandom | None = None,
                 jitter: float = 0.0) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        if not ladder or any(step <= 0 for step in ladder):
            raise ValueError("ladder needs at least one step, every step > 0 seconds")
        if jitter and rng is None:
            raise ValueError("jitter needs a KeyedRandom")
        self.store = store
        self.client = client
        self.concurrency = concurrency
        self.ladder = tuple(float(s) for s in ladder)
        self._rng = rng
        self._jitter = jitter
        self._lock = asyncio.Lock()

    def delay(self, row: OutboxRow, retryable: bool) -> float:
        """Seconds until the next attempt of ``row`` after a failure."""
        if retryable:
            step = self.ladder[min(row.attempts, len(self.ladder) - 1)]
        else:
            step = self.ladder[-1]
        if self._rng is not None and self._jitter:
            step *= 1.0 + self._jitter * self._rng.unit("outbox", row.idem_key, row.attempts)
        return step

    async def run_due(self, now: float) -> PumpResult:
        """One pass at ``now`` (unix seconds): send every sendable due row (see module rules).

        Raises :class:`~sidecar.store.errors.StoreError` if the store fails; Stack failures are
        never raised, they are in ``failed``.
        """
        async with self._lock:
            acked: list[OutboxRow] = []
            failed: list[tuple[OutboxRow, StackError]] = []
            tried: set[int] = set()
            retry_at: list[float] = []
            stalled = False
            while True:
                rows = await self.store.outbox_due(now, self.concurrency, heads_only=True)
                rows = [r for r in rows if r.id not in tried]
                if not rows:
                    break
                tried.update(r.id for r in rows)
                results = await asyncio.gather(*(self._send(r) for r in rows))
                ops: list[Op] = []
                for row, err in zip(rows, results):
                    if err is None:
                        ops.append(Ack(row.id))
                        acked.append(row)
                        continue
                    at = now + self.delay(row, err.retryable)
                    ops.append(Retry(row.id, row.attempts + 1, at, err.short()[:500]))
                    failed.append((row, err))
                    retry_at.append(at)
                await self.store.commit(ops)
                if all(_no_answer(e) for e in results):
                    stalled = True  # no HTTP answer at all: Stack is unreachable
                    break
            next_due: float | None
            if stalled:
                next_due = min(retry_at)
            else:
                next_due = await self.store.outbox_next_due()
            return PumpResult(acked=acked, failed=failed, next_due=next_due, stalled=stalled)

    async def _send(self, row: OutboxRow) -> StackError | None:
        try:
            await self.client.send(row.method, row.path, row.body, row.idem_key)
        except StackUnavailable as exc:
            log.warning("stack write %s failed (attempt %d), will retry: %s",
                        row.idem_key, row.attempts + 1, exc.short())
            return exc
        except StackRejected as exc:
            log.error("STACK REJECTED write %s (%s %s) with HTTP %s: %s — kept in the outbox and "
                      "retried every %gs; pair %s is held until it is accepted",
                      row.idem_key, row.method, row.path, exc.status, exc.detail or exc,
                      self.ladder[-1], row.pair)
            return exc
        except Exception as exc:  # a bug must not drop the write either
            log.exception("stack write %s raised unexpectedly; kept and retried", row.idem_key)
            return StackError(f"{type(exc).__name__}: {exc}", method=row.method, path=row.path)
        return None


def _no_answer(err: StackError | None) -> bool:
    """The send got no HTTP answer at all (refused, reset, timed out)."""
    return isinstance(err, StackUnavailable) and err.status is None
