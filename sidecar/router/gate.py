"""The one place every delivery attempt goes through (DESIGN §10: sender health, seed 000, plugs
in here without changing the router).

Rules / theory of operation
---------------------------
* Before an attempt, :meth:`Attempts.begin` asks the :class:`SenderHealth` "may this sender
  (target) send now?".  ``Admission.allowed`` False: the row waits — it is not an attempt and
  never counted; ``not_before`` (unix seconds) re-arms it then, ``None`` parks it until health
  releases the target (:class:`ReleaseTarget`).  Waiting rows keep their order (by
  ``next_attempt_at``, then ``seq``), and a parked row is not due, so nothing busy-loops.
* A row whose TTL has passed is ``failed`` there and then, without an attempt (§10: checked
  when sent); so is a row whose 5th attempt was claimed but never settled (a crash): five
  attempts is the bound even across restarts.  Otherwise the attempt is **claimed** (:class:`~.storage.ClaimDelivery`: attempts
  + 1, retry time already on the ladder) and committed before any byte is sent (durability:
  ``sidecar.router.storage``).
* After the attempt, :meth:`Attempts.finish` turns the channel's :class:`~.policy.Outcome` into
  the row's next state (:func:`~.policy.after`) and reports it to health — "delivered",
  "failed, retryable" or "failed, terminal", with ``final`` set on a delivery's last attempt
  (seed 000 §1: the final retry runs the check without incrementing).  ``held`` outcomes (a
  batched Stack write not tried) are not attempts and are not reported.
* Health answers with a :class:`Report`: store ops to commit with the outcome (its counters and
  history) and router events to emit (``sidecar/sender/...``).  :class:`AlwaysOpen` is the
  default until sender health exists: always yes, reports nothing.
* Pure: no clock, no I/O; the pump (:mod:`.pump`) commits what these return.
"""
from __future__ import annotations

from typing import Protocol

import msgspec

from sidecar.store.ops import Op, register

from .model import Delivery, Event
from .policy import LADDER, MAX_ATTEMPTS, Kind, Next, Outcome, after, expire, expired
from .storage import ClaimDelivery, SettleDelivery


class Admission(msgspec.Struct, frozen=True, kw_only=True):
    allowed: bool
    not_before: float | None = None  # when to ask again; None = wait for ReleaseTarget
    reason: str | None = None  # e.g. "cooldown until …" (shown in the row's last_error)


class Report(msgspec.Struct, frozen=True, kw_only=True):
    ops: tuple[Op, ...] = ()
    events: tuple[Event, ...] = ()


YES = Admission(allowed=True)
NOTHING = Report()


class SenderHealth(Protocol):
    """What the router needs from sender health (seed 000); a sender is one target."""

    def may_send(self, target: str, channel: str, now: float) -> Admission: ...

    def report(self, target: str, channel: str, outcome: Outcome, now: float, *,
               final: bool) -> Report: ...


class AlwaysOpen:
    """Sender health before it exists: every sender may always send; nothing is recorded."""

    def may_send(self, target: str, channel: str, now: float) -> Admission:
        return YES

    def report(self, target: str, channel: str, outcome: Outcome, now: float, *,
               final: bool) -> Report:
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
register(ReleaseTarget,
         "UPDATE deliveries SET next_attempt_at=?, updated_at=? WHERE status='pending' AND target=?"
         " AND next_attempt_at IS NULL",
         lambda o: (o.at, o.at, o.target))


class Begin(msgspec.Struct, frozen=True, kw_only=True):
    """What to do with a due row: ``send`` (commit ``ops`` first), ``wait`` or ``expired``."""

    action: str  # "send" | "wait" | "expired"
    ops: tuple[Op, ...]
    attempt: int = 0  # the attempt number being made (send)


class Finish(msgspec.Struct, frozen=True, kw_only=True):
    next: Next
    ops: tuple[Op, ...]
    events: tuple[Event, ...] = ()


class Attempts:
    """The gate (see module rules).  ``health`` defaults to :class:`AlwaysOpen`."""

    def __init__(self, health: SenderHealth | None = None) -> None:
        self.health: SenderHealth = health if health is not None else AlwaysOpen()

    def begin(self, row: Delivery, now: float) -> Begin:
        if expired(row, now):
            nxt = expire(row, now)
            return Begin(action="expired", ops=(_settle(row, nxt, now),))
        if row.channel != "stack" and row.attempts >= MAX_ATTEMPTS:
            # the last attempt was claimed and the process died before its outcome was recorded:
            # it counted (it may even have arrived), and there is no sixth
            nxt = Next(status="failed", attempts=row.attempts, next_attempt_at=None, final=True,
                       last_error=f"failed: attempt {row.attempts} of {MAX_ATTEMPTS} ended without an outcome")
            return Begin(action="expired", ops=(_settle(row, nxt, now),))
        adm = self.health.may_send(row.target, row.channel, now)
        if not adm.allowed:
            return Begin(action="wait", ops=(DeferDelivery(row.id, adm.not_before,
                                                           adm.reason or "sender unavailable", now),))
        k = row.attempts + 1
        step = LADDER[min(k, len(LADDER)) - 1]
        return Begin(action="send", attempt=k, ops=(ClaimDelivery(row.id, k, now + step, now),))

    def finish(self, row: Delivery, outcome: Outcome, now: float, *, attempt: int) -> Finish:
        """``attempt`` is the number :meth:`begin` claimed."""
        nxt = after(row, outcome, now, attempts=attempt)
        ops: list[Op] = [_settle(row, nxt, now)]
        events: tuple[Event, ...] = ()
        if outcome.kind != Kind.HELD.value:
            final = nxt.final or (row.channel != "stack" and attempt >= MAX_ATTEMPTS)
            rep = self.health.report(row.target, row.channel, outcome, now, final=final)
            ops.extend(rep.ops)
            events = rep.events
        return Finish(next=nxt, ops=tuple(ops), events=events)


def _settle(row: Delivery, nxt: Next, now: float) -> SettleDelivery:
    return SettleDelivery(row.id, nxt.status, nxt.attempts, nxt.next_attempt_at, nxt.last_error,
                          nxt.delivered_at, now)
