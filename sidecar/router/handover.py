"""Handed-over deliveries: a TU's pending outward deliveries follow it through Stack to the next
machine that logs it in (DESIGN §9 "Handed-over deliveries", §10 "A shift change strands
nothing").  Sans-I/O: values and store ops; the app reads and commits them
(:mod:`sidecar.app.inputs` at logout and login, :mod:`sidecar.app.closing` at shutdown).

Rules / theory of operation
---------------------------
* **Which deliveries.**  A delivery is the TU's when its event's payload names it (``"tu"``, a
  string: the column ``tu`` of a non-Stack row, set at routing).  At the TU's logout every one of
  its ``pending`` non-Stack rows is handed over (:func:`to_hand_over`); Stack's own writes are
  already Stack's, and a row of no TU (process-wide: sender alerts, Stack outages) stays with
  its machine and is listed at shutdown (:func:`stays_summary`).
* **The handover is a Stack write like any other** (:func:`handover_ops`): a pending ``stack`` row
  ``PUT /v1/tus/{tu}/deliveries/{id}`` whose body is :func:`handover_body` (the rendered message,
  base64, with attempts and next attempt), Idempotency-Key ``handover:<tu>:<id>:put@<instant>``
  (the logout's instant, so a second handover after a re-login never reuses the first one's key).
  While Stack is down it waits in the outbox like a marker, and the local row stays ``pending``:
  this machine keeps sending it itself.  Each handed-over row gets its own lane
  (``<tu>/delivery:<id>``), so its later ``DELETE`` never overtakes its ``PUT``.
* **Release at any terminal outcome.**  :class:`PutHandover` records ``(delivery id → tu, lane,
  path)`` in ``router_handovers``; the store's trigger (schema v10,
  :mod:`sidecar.store.migrations`) queues ``DELETE /v1/tus/{tu}/deliveries/{id}`` (key
  ``handover:<tu>:<id>:delete@<instant>``) in the same transaction that settles the row
  ``delivered``, ``failed`` (incl. an expired ``ttl_s``) or anything else not ``pending`` —
  every settle path of the pump at once — and forgets the record.
* Both ops are conditional on the delivery still being ``pending`` when they commit: a row that
  settled between the read and the commit is not handed over (it has nothing left to continue).
* **Restore** (:func:`restored`): Stack's startup data lists the TU's handed-over deliveries
  (only the ones Stack acknowledged); each becomes a ``pending`` row with the same id (the
  ``webhook-id``), its attempts, next attempt (a past instant is due at once) and ``expires_at``
  — except that a row the old machine's sender health held (parked, or deferred with
  ``last_error`` ``waiting: …``: its instant was that machine's cooldown, not the row's retry
  ladder) is due at once;
  :class:`RestoreDelivery` inserts it unless a row of that id exists (a re-login on the same
  machine keeps its one row), and a :class:`PutHandover` makes its terminal outcome release it
  from Stack.  The target's health is this machine's own (nothing of the old machine's sender
  health travels): judged afresh.  A listed delivery that is not an object of the shape below,
  is a Stack write or names another TU is skipped and counted.
* Receivers dedup by ``webhook-id`` = the delivery id: a delivery both machines attempt (the
  old one kept it while Stack was down, or ran again) is received once.
"""
from __future__ import annotations

import base64
import logging
from typing import Any, Iterable, Mapping

import msgspec

from sidecar.store.ops import Op, register

from sidecar.router.model import STACK_TARGET, Delivery, Status
from sidecar.router.ops import _delivery_params

#: the router source of the handover writes (a row's ``source``; never routed as an event, so no
#: rule can match it — DESIGN §10's rules see events, not the Stack target's own rows)
SOURCE = "deliveries"
#: ``last_error`` of a row its sender's health made wait (:class:`sidecar.router.attempt.DeferDelivery`)
WAITING = "waiting: "


class HandedOver(msgspec.Struct, kw_only=True):
    """One handed-over delivery as Stack stores it (the ``PUT`` body; instants unix seconds)."""

    id: str  # the delivery id = the webhook-id
    event_id: str
    event_at: float
    source: str
    subject: str
    action: str
    priority: str
    rule: str | None = None
    channel: str
    target: str
    message_b64: str  # the rendered message, exactly the bytes the channel sends
    attempts: int = 0
    next_attempt_at: float | None = None
    expires_at: float | None = None
    last_error: str | None = None
    tu: str
    ru: str | None = None


class PutHandover(Op, frozen=True):
    """Remember that ``delivery_id`` is handed over (its Stack copy is released at its terminal
    outcome by the store's trigger) — only while that row is ``pending``."""

    delivery_id: str
    tu: str
    pair: str
    path: str
    at: float


class HandoverWrite(Op, frozen=True):
    """Queue a handover's Stack ``PUT`` row, only while ``of_id`` is ``pending``; a row of the
    same id already there (a re-run step) is kept."""

    delivery: Delivery
    of_id: str


class RestoreDelivery(Op, frozen=True):
    """Insert a handed-over delivery unless a row of its id exists (module rules)."""

    delivery: Delivery


_INSERT = ("INSERT OR IGNORE INTO deliveries (id, event_id, event_at, source, subject, action,"
           " priority, rule, channel, target, status, attempts, next_attempt_at, expires_at,"
           " last_error, note, message, delivered_at, pair, idem_key, method, path, tu, ru,"
           " updated_at) SELECT ?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?")
_IS_PENDING = " WHERE EXISTS (SELECT 1 FROM deliveries WHERE id = ? AND status = 'pending')"

register(PutHandover,
         "INSERT OR REPLACE INTO router_handovers (delivery_id, tu, pair, path, at)"
         " SELECT ?,?,?,?,?" + _IS_PENDING,
         lambda o: (o.delivery_id, o.tu, o.pair, o.path, o.at, o.delivery_id))
register(HandoverWrite, _INSERT + _IS_PENDING,
         lambda o: (*_delivery_params(o)[:25], o.of_id))
register(RestoreDelivery, _INSERT, lambda o: _delivery_params(o)[:25])


def _seg(value: str) -> str:
    from sidecar.stack.writes import seg  # the one quoting of Stack path segments
    return seg(value)


def lane(tu: str, delivery_id: str) -> str:
    """The ordering lane of one handed-over delivery's Stack writes (``PUT`` then ``DELETE``)."""
    return f"{tu}/delivery:{delivery_id}"


def path_of(tu: str, delivery_id: str) -> str:
    """``/v1/tus/{tu}/deliveries/{id}`` (DESIGN §9), segments percent-quoted."""
    return f"/v1/tus/{_seg(tu)}/deliveries/{_seg(delivery_id)}"


def to_hand_over(rows: Iterable[Delivery], tu: str) -> list[Delivery]:
    """The rows a logout of ``tu`` hands over: ``pending``, not Stack's, the TU's own."""
    return [d for d in rows if d.status == Status.PENDING.value and d.channel != STACK_TARGET
            and d.tu == tu]


def handover_body(d: Delivery) -> bytes:
    """The ``PUT`` body: :class:`HandedOver` of ``d`` as JSON."""
    return msgspec.json.encode(HandedOver(
        id=d.id, event_id=d.event_id, event_at=d.event_at, source=d.source, subject=d.subject,
        action=d.action, priority=d.priority, rule=d.rule, channel=d.channel, target=d.target,
        message_b64=base64.b64encode(bytes(d.message)).decode("ascii"), attempts=d.attempts,
        next_attempt_at=d.next_attempt_at, expires_at=d.expires_at, last_error=d.last_error,
        tu=d.tu or "", ru=d.ru))


def handover_ops(rows: Iterable[Delivery], tu: str, now: float) -> list[Op]:
    """At ``tu``'s logout (``now``, unix seconds): for each of :func:`to_hand_over`'s rows, its
    record and its Stack ``PUT`` row (module rules)."""
    out: list[Op] = []
    for d in to_hand_over(rows, tu):
        key = f"handover:{tu}:{d.id}:put@{now:.3f}"
        pair, path = lane(tu, d.id), path_of(tu, d.id)
        out.append(PutHandover(d.id, tu, pair, path, now))
        out.append(HandoverWrite(Delivery(
            key, d.event_id, now, SOURCE, "handover", "put", d.priority, None, STACK_TARGET,
            STACK_TARGET, Status.PENDING.value, handover_body(d), 0, now, None, None,
            f"handover of {d.id} ({d.target})", None, pair, key, "PUT", path, tu, d.ru), d.id))
    return out


def restored(tu: str, listed: Any, now: float) -> tuple[list[Op], int]:
    """Stack's startup ``deliveries`` for ``tu`` → (ops continuing them here, rows skipped)
    (module rules); ``listed`` None or absent: Stack lists none."""
    ops: list[Op] = []
    skipped = 0
    for item in listed if isinstance(listed, list) else ():
        try:
            h = msgspec.convert(item, HandedOver)
            message = base64.b64decode(h.message_b64, validate=True)
        except (msgspec.ValidationError, ValueError):
            skipped += 1
            continue
        if h.tu != tu or h.channel == STACK_TARGET or h.target == STACK_TARGET or h.attempts < 0:
            skipped += 1
            continue
        # the old machine's health held it (parked: None; deferred: "waiting: …" with the
        # cooldown's end, not a ladder step of its own): judged afresh here, due at once
        waited = h.next_attempt_at is None or (h.last_error or "").startswith(WAITING)
        due = now if waited else h.next_attempt_at
        ops.append(RestoreDelivery(Delivery(
            h.id, h.event_id, h.event_at, h.source, h.subject, h.action, h.priority, h.rule,
            h.channel, h.target, Status.PENDING.value, message, h.attempts, due, h.expires_at,
            h.last_error, f"continued from a handover through Stack at {now:.3f}", None, None,
            None, None, None, tu, h.ru)))
        ops.append(PutHandover(h.id, tu, lane(tu, h.id), path_of(tu, h.id), now))
    return ops, skipped


def stays_summary(rows: Iterable[Delivery], handed: Mapping[str, bool] | None = None) -> tuple[int, str] | None:
    """The closing line for the pending non-Stack rows that stay with this machine, with its
    logging level; None when there are none.

    ``handed``: the ids handed over through Stack → whether Stack acknowledged the handover
    (:func:`sidecar.router.io.storage.handed_over`).  The line says how many rows, how many are
    process-wide (no TU), how many a TU's, of those how many Stack holds (the next machine
    continues them; this one keeps sending them too) and how many wait for Stack to take the
    handover — those go out only when this machine runs again (a logout while Stack was down,
    then a stop: DESIGN §9), so the line is a WARNING then and INFO otherwise; at most 20 ids
    are named, the waiting ones first."""
    rows = [d for d in rows if d.status == Status.PENDING.value and d.channel != STACK_TARGET]
    if not rows:
        return None
    handed = dict(handed or {})
    wide = [d.id for d in rows if d.tu is None]
    tus = len(rows) - len(wide)
    held = sum(1 for d in rows if handed.get(d.id) is True)
    waiting = sum(1 for d in rows if handed.get(d.id) is False)

    def named(d: Delivery) -> str:
        if d.tu is None:
            return d.id
        got = handed.get(d.id)
        state = "" if got is None else ", handed over" if got else ", handover waiting for Stack"
        return f"{d.id} (TU {d.tu}{state})"
    first = sorted(rows, key=lambda d: handed.get(d.id) is not False)  # stable: waiting ones first
    more = f" and {len(rows) - 20} more" if len(rows) > 20 else ""
    line = (f"{len(rows)} pending deliveries stay with this machine ({len(wide)} process-wide,"
            f" {tus} of TUs, {held} of them handed over through Stack")
    if waiting:
        line += (f", {waiting} whose handover Stack has not taken: they go out only when this"
                 " machine runs again")
    line += "): " + ", ".join(named(d) for d in first[:20]) + more
    return (logging.WARNING if waiting else logging.INFO), line
