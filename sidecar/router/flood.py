"""Flood control: how long a 429 holds a target back (DESIGN §10 as revised "flood control").
Our decision — seed 000 counts a device's failed sends and says nothing of
HTTP; a 429 is the receiver asking to slow down, not a failed send (docs/decisions.md "Flood
control is not failure").

Rules / theory of operation
---------------------------
* A ``flooded`` outcome (:mod:`.attempt`) is not an attempt (the row's ``attempts`` go back to what they were, so the 5 are not used up), is never reported to
  sender health (``failed_in_row`` stays as it was: repeated 429s pace the target, never cool it
  down), and is recorded on the row (``last_error`` "flood control: HTTP 429 …", the reason the
  row waits).  The TARGET's next send is at ``now + wait`` with wait = ``retry_after`` or, without
  one, the ladder's next step — capped at :data:`FLOOD_CAP_S` (1 h), the row saying so
  (:func:`flood_wait`).  :class:`.attempt.Attempts` keeps each target's ``flood_until`` (unix seconds) and
  makes every other row of that target wait for it (:meth:`.attempt.Attempts.begin`: not an attempt) — a
  ``critical`` row too (it is the receiver's rule), first in line after it: the target's other
  rows wait :data:`FLOOD_CRITICAL_LEAD_S` more (:func:`flood_lead`), so the due order puts it
  first.  The row's ``ttl_s`` still applies: an expired row is ``failed`` ("expired") when it is next due, flood or not.
* Pure: numbers in, numbers out (seconds); :mod:`.attempt` applies them.
"""
from __future__ import annotations

__all__ = ["FLOOD_CAP_S", "FLOOD_CRITICAL_LEAD_S", "FLOOD_STATUS", "flood_lead", "flood_wait"]

#: HTTP "Too Many Requests": flood control, not a failure (DESIGN §10 as revised).
FLOOD_STATUS = 429
#: The longest a 429 holds a target back, seconds (DESIGN §10: "capped at 1 h").
FLOOD_CAP_S = 3600.0
#: After flood control, a ``critical`` row is first in line: the target's other rows wait this
#: much longer (seconds), so the due order (``next_attempt_at``, then ``seq``) puts it first
#: without a new sort key (the pump's due-head read stays on its index).
FLOOD_CRITICAL_LEAD_S = 0.001


#: The least a 429 holds a target back (seconds): ``Retry-After: 0`` is valid HTTP, and waiting
#: 0 s would retry at once, again and again — a loop that hammers the receiver it was asked to spare
FLOOD_FLOOR_S = 1.0


def flood_wait(ladder_step: float, retry_after: float | None) -> tuple[float, str]:
    """Seconds a 429 holds the target back, and the row's words for it: ``retry_after``
    (seconds) or, without one, ``ladder_step`` (the ladder's step after the attempt the 429
    answered, seconds); at least :data:`FLOOD_FLOOR_S`, at most :data:`FLOOD_CAP_S`."""
    if retry_after is None:
        wait, why = ladder_step, "no retry-after: the ladder's next step"
    else:
        wait, why = float(retry_after), f"retry_after {retry_after:g} s"
    if wait < FLOOD_FLOOR_S:
        return FLOOD_FLOOR_S, f"{why}, waited at least {FLOOD_FLOOR_S:g} s"
    if wait > FLOOD_CAP_S:
        return FLOOD_CAP_S, f"{why}, capped at {FLOOD_CAP_S:g} s"
    return wait, why


def flood_lead(priority: str) -> float:
    """Seconds a row of ``priority`` waits past the end of flood control: 0 for ``critical``,
    else :data:`FLOOD_CRITICAL_LEAD_S` (the critical is first in line after it, DESIGN §10)."""
    return 0.0 if priority == "critical" else FLOOD_CRITICAL_LEAD_S
