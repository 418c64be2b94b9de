"""One delivery attempt's gate: the one place every attempt goes through — TTL, flood control
and sender health decide whether a due row is sent, waits or ends, and an attempt's outcome
becomes the row's next state and what sender health is told (DESIGN §10 "Retries", "Outcomes are
classified", sender health's plug; seed 002 ``RETRY_DELAYS``; seed 000 §1).  The outcomes,
the ladder and TTL are :mod:`.outcome`'s; what health is asked and told, as lists, is
:mod:`.exchange`'s.

Rules / theory of operation
---------------------------
* :meth:`Attempts.admit` takes a round's due rows, in order, and decides each: a row whose TTL
  has passed is ``expired`` (``failed`` without an attempt, checked at send time); a row whose
  5th attempt was claimed but never settled (a crash) is ``failed`` there too (five attempts is
  the bound even across restarts); a row of a target under flood control (a 429,
  :attr:`Attempts.flood_until`) waits for it — a ``critical`` one too, first in line after it
  (:mod:`.flood`) — not an attempt.  The rest are sender health's: ONE admission for the
  round (:class:`~.exchange.Want` per target: how many rows it could send).  An admitted row is
  **claimed** (:class:`~.ops.ClaimDelivery`: attempts + 1, retry time already on the ladder)
  and committed before any byte is sent (durability: :mod:`.ops`); a refused one waits
  (:class:`DeferDelivery`: not an attempt, never counted; ``not_before`` re-arms it, ``None``
  parks it until health releases the target, :class:`ReleaseTarget`).  A target whose row
  waits is not decided on its later rows in the round — they stay behind it, in order (by
  ``next_attempt_at``, then ``seq``); ``stack``'s rows are each decided (each pair keeps its
  own order).  A parked row is not due, so nothing busy-loops.
* Sender health raising when asked (a bug) makes the row wait :data:`HEALTH_ERROR_WAIT_S` — not
  an attempt — and is handed back to the pump to log; the other targets go on.
* After the attempt, :meth:`Attempts.settle` turns the channel's outcome into the row's next
  state (:func:`~.outcome.after`) and its op — pure, never raising, so the pump records every
  outcome of a round even when health fails — and :meth:`Attempts.told` /
  :meth:`Attempts.request_told` say what health is told of it: one
  :class:`~.exchange.Told` per ATTEMPT (one HTTP request: a Stack batch is one, a dropped
  batch of 10 writes is one failure, not 10 — :func:`~.outcome.request_outcome`), ``final`` on
  a delivery's last attempt (seed 000 §1: the final retry runs the check without
  incrementing); nothing for ``held`` (no attempt) and ``flooded`` (no failure).  The round's
  told items go to health in ONE settlement (:meth:`Attempts.tell`), which answers the store
  ops to commit with the outcomes and the router events to emit (``sidecar/sender/...``).
* ``health`` defaults to :class:`~.exchange.AlwaysOpen` until sender health exists: always
  yes, tells nothing.
* Pure: no clock, no I/O; the pump (:mod:`.io.pump`) commits what these return.
"""
from __future__ import annotations

from collections.abc import Sequence

import msgspec

from sidecar.store.ops import Op, register

from .exchange import (NOTHING, YES, Admission, AlwaysOpen, BatchHealth, Grant, Report, SenderHealth, Settlement, Told,
                       Want, as_batch, told_of)
from .flood import flood_lead
from .model import Delivery
from .ops import ClaimDelivery, SettleDelivery
from .outcome import (DELIVERED, FLOOD_STATUS, LADDER, MAX_ATTEMPTS, RETRYABLE_STATUSES, STACK_LADDER, Kind,
                      Next, Outcome, after, classify_exc, classify_status, expire, expired, flooded, held,
                      ladder_for, request_outcome, retry_step, retryable, terminal)

__all__ = [  # the outcome and exchange names are re-exported: importers name the gate's module
    "DELIVERED", "FLOOD_STATUS", "HEALTH_ERROR_WAIT_S", "LADDER", "MAX_ATTEMPTS", "NOTHING", "RETRYABLE_STATUSES",
    "STACK_LADDER", "YES", "Admission", "AlwaysOpen", "Attempts", "Begin", "DeferDelivery", "Kind", "Next",
    "Outcome", "RefreshWaiting", "ReleaseTarget", "Report", "SenderHealth", "after", "classify_exc",
    "classify_status", "expire", "expired", "flooded", "held", "ladder_for", "request_outcome", "retry_step",
    "retryable", "terminal"]

#: Seconds a row waits when sender health raised asking "may it send?" (a bug, logged).
HEALTH_ERROR_WAIT_S = 30.0


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


class Attempts:
    """The gate (see module rules).  ``health`` defaults to :class:`~.exchange.AlwaysOpen`;
    one that answers only per row is asked through :class:`~.exchange.PerCall`."""

    def __init__(self, health: SenderHealth | BatchHealth | None = None) -> None:
        self.health: SenderHealth | BatchHealth = health if health is not None else AlwaysOpen()
        self.batch: BatchHealth = as_batch(self.health)
        #: target → unix seconds before which it is not sent to (a 429's flood control).  In
        #: memory: after a restart a flooded target's first send may meet one more 429, which
        #: paces it again — never a failure (module rules).
        self.flood_until: dict[str, float] = {}

    def flooded_until(self, target: str, now: float) -> float | None:
        """The instant ``target``'s flood control ends, if it is still on at ``now``."""
        until = self.flood_until.get(target)
        return until if until is not None and until > now else None

    def begin(self, row: Delivery, now: float) -> Begin:
        """Claim, wait or expire one ``row`` at ``now`` (:meth:`admit` of one row).  Raises what
        sender health raised."""
        decided, faults = self.admit([row], now)
        if faults:
            raise faults[0][1]
        return decided[0][1]

    def admit(self, rows: Sequence[Delivery], now: float
              ) -> tuple[list[tuple[Delivery, Begin]], list[tuple[Delivery, BaseException]]]:
        """Decide a round's due ``rows`` (in order) at ``now``, asking sender health ONCE (module
        rules): ``(decided, faults)`` — each decided row with its :class:`Begin` (rows behind a
        waiting row of their target are left out: not decided), and the rows that wait because
        health raised, with what it raised (for the pump's log)."""
        pre: list[tuple[Delivery, Begin | None]] = []
        wants: dict[str, Want] = {}
        stopped: set[str] = set()
        for row in rows:
            if row.target in stopped and row.channel != "stack":
                continue
            b = self._before_health(row, now)
            pre.append((row, b))
            if b is None:
                w = wants.get(row.target)
                wants[row.target] = Want(row.target, row.channel, 1 if w is None else w.rows + 1)
            elif b.action == "wait":
                stopped.add(row.target)
        grants: dict[str, Grant] = {}
        if wants:
            try:
                grants = {g.target: g for g in self.batch.admit(list(wants.values()), now)}
            except Exception as exc:  # noqa: BLE001 - health's bug: every row it was asked about waits
                grants = {t: Grant(t, 0, error=exc) for t in wants}
        left = {t: g.admitted for t, g in grants.items()}
        decided: list[tuple[Delivery, Begin]] = []
        faults: list[tuple[Delivery, BaseException]] = []
        waiting: set[str] = set()
        for row, b in pre:
            if row.target in waiting and row.channel != "stack":
                continue  # behind its target's waiting row (refused or flooded): not decided
            if b is None:
                g = grants.get(row.target)
                if g is not None and left[row.target] > 0:
                    left[row.target] -= 1
                    k = row.attempts + 1
                    b = Begin(action="send", attempt=k,
                              ops=(ClaimDelivery(row.id, k, now + retry_step(row.channel, k), now),))
                elif g is None or g.error is not None or g.refusal is None:
                    err = g.error if g is not None and g.error is not None else RuntimeError(
                        f"sender health answered no grant for {row.target!r}")
                    faults.append((row, err))
                    b = self.health_error(row, err, now)
                else:
                    b = Begin(action="wait", ops=(DeferDelivery(
                        row.id, g.refusal.not_before, g.refusal.reason or "sender unavailable", now),))
            decided.append((row, b))
            if b.action == "wait":
                waiting.add(row.target)
        return decided, faults

    def _before_health(self, row: Delivery, now: float) -> Begin | None:
        """The row's fate before sender health is asked — expired, a 5th attempt that never
        ended, flood control — or None: health decides."""
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
        return None

    def settle(self, row: Delivery, outcome: Outcome, now: float, *,
               attempt: int) -> tuple[Next, SettleDelivery]:
        """The row's next state after attempt ``attempt`` ended with ``outcome``, and the op
        recording it.  Pure: never raises for a well-formed row."""
        nxt = after(row, outcome, now, attempts=attempt)
        if outcome.kind == Kind.FLOODED.value and nxt.next_attempt_at is not None:
            until = nxt.next_attempt_at - flood_lead(row.priority)
            self.flood_until[row.target] = max(until, self.flood_until.get(row.target, 0.0))
        return nxt, _settle(row, nxt, now)

    @staticmethod
    def told(row: Delivery, outcome: Outcome, nxt: Next, now: float, *, attempt: int) -> Told | None:
        """What sender health is told of ``row``'s attempt ``attempt`` sent alone (``held`` is no
        attempt and ``flooded`` no failure: nothing — ``failed_in_row`` stays as it was)."""
        final = nxt.final or (row.channel != "stack" and attempt >= MAX_ATTEMPTS)
        return told_of(row.target, row.channel, outcome, now, final=final, about=f"delivery {row.id}")

    @staticmethod
    def request_told(target: str, channel: str, outcomes: Sequence[Outcome], now: float) -> Told | None:
        """What sender health is told of ONE attempt of ``target`` that carried several
        deliveries (a Stack batch, or Stack's single writes sent together in one round):
        :func:`~.outcome.request_outcome` of their outcomes, once.  Never ``final`` (only
        ``stack`` sends several deliveries in one attempt, and its deliveries never fail)."""
        agg = request_outcome(list(outcomes))
        if agg is None:
            return None
        return told_of(target, channel, agg, now, final=False, about=f"a request of {len(outcomes)} writes")

    @staticmethod
    def probe_told(target: str, channel: str, outcome: Outcome, now: float) -> Told:
        """The answer of ``target``'s warm-up probe, for health (seed 000 §3)."""
        return Told(target=target, channel=channel, outcome=outcome, at=now, probe=True, about="probe")

    def tell(self, told: Sequence[Told], now: float) -> Settlement:
        """Tell sender health the round's ``told`` items in ONE settlement (nothing: no call)."""
        return self.batch.settle(told, now) if told else Settlement()

    def probes_due(self, now: float) -> list[str]:
        """The senders whose warm-up probe is to be sent now (each returned once)."""
        return self.batch.probes_due(now)

    @staticmethod
    def health_error(row: Delivery, exc: BaseException, now: float) -> Begin:
        """Sender health raised asking about ``row``: the row waits :data:`HEALTH_ERROR_WAIT_S`
        — not an attempt — and the other targets go on."""
        why = f"sender health error ({type(exc).__name__}), asked again in {HEALTH_ERROR_WAIT_S:g} s"
        return Begin(action="wait", ops=(DeferDelivery(row.id, now + HEALTH_ERROR_WAIT_S, why, now),))


def _settle(row: Delivery, nxt: Next, now: float) -> SettleDelivery:
    return SettleDelivery(row.id, nxt.status, nxt.attempts, nxt.next_attempt_at, nxt.last_error,
                          nxt.delivered_at, now)
