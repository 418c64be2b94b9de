"""The router's store ops: what a step adds to its transaction (DESIGN §9, §10, §13 "their
state has tables of its own"; schema v2 in :mod:`sidecar.store.migrations`).  Sans-I/O: the
readers and :class:`RouterStore` are in :mod:`sidecar.router.io.storage`.

Rules / theory of operation
---------------------------
* Ops are frozen msgspec Structs registered with :func:`sidecar.store.ops.register`, so
  :meth:`Store.commit` applies them in the same ONE transaction as the step's other ops: an
  event's delivery rows are written together with the marker change that caused it.
* :class:`PutDelivery` inserts a row; a ``stack`` row whose idempotency key already has a pending
  row is ignored (a re-run step cannot queue a Stack write twice — the outbox's rule).
  :class:`ClaimDelivery` records an attempt *before* it is made (attempts + 1, next try already
  on the ladder), :class:`SettleDelivery` records its outcome: a SIGKILL between them leaves a
  pending row that is tried again at its ladder time with the same delivery id (the webhook-id /
  idempotency key), so a receiver that dedups sees it once.  Both touch only ``pending`` rows.
* No secret is ever written here: rows hold target *names*; URLs and secrets stay in the config.
"""
from __future__ import annotations

from sidecar.store.ops import Guarded, Op, register, to_json

from sidecar.router.model import Delivery, Rule, rule_dict


class PutDelivery(Op, frozen=True):
    delivery: Delivery


class ClaimDelivery(Op, frozen=True):
    """Attempt ``attempts`` of ``delivery_id`` starts at ``at``; if it never settles, retry at
    ``next_attempt_at``."""

    delivery_id: str
    attempts: int
    next_attempt_at: float
    at: float


class SettleDelivery(Op, frozen=True):
    delivery_id: str
    status: str
    attempts: int
    next_attempt_at: float | None
    last_error: str | None
    delivered_at: float | None
    at: float


class PutDedup(Op, frozen=True):
    source: str
    dedup_key: str
    accepted_at: float
    event_id: str | None = None  # the accepted event's (a duplicate answers it; seed 002)


class PutThrottle(Op, frozen=True):
    channel: str
    target: str
    last_at: float


class DropThrottle(Op, frozen=True):
    """Forget the window of (channel, target) if it still runs from ``last_at`` (the instant of a
    delivery that has just failed: seed 002 ``_throttled`` counts only pending/delivered rows)."""

    channel: str
    target: str
    last_at: float


class PutRule(Op, frozen=True):
    rule: Rule
    at: float


class DeleteRule(Op, frozen=True):
    name: str


class PutJournal(Op, frozen=True):
    delivery_id: str
    target: str
    at: float
    body: str


class PruneRouter(Op, frozen=True):
    """Forget settled deliveries of events before ``before`` (unix seconds)."""

    before: float


def _delivery_params(op: PutDelivery) -> tuple:
    d = op.delivery
    return (d.id, d.event_id, d.event_at, d.source, d.subject, d.action, d.priority, d.rule,
            d.channel, d.target, d.status, d.attempts, d.next_attempt_at, d.expires_at,
            d.last_error, d.note, bytes(d.message), d.delivered_at, d.pair, d.idem_key, d.method,
            d.path, d.tu, d.ru, d.event_at, d.channel, d.idem_key)


_COLUMNS = ("id", "event_id", "event_at", "source", "subject", "action", "priority", "rule", "channel",
            "target", "status", "attempts", "next_attempt_at", "expires_at", "last_error", "note",
            "message", "delivered_at", "pair", "idem_key", "method", "path", "tu", "ru", "updated_at")
_WIDTH = len(_COLUMNS)  # a row's values; _delivery_params then adds the guard's channel and key
_INSERT = f"INSERT INTO deliveries ({', '.join(_COLUMNS)})"
_MARKS = ",".join("?" * _WIDTH)
_PENDING_STACK_KEY = "SELECT 1 FROM deliveries WHERE status = 'pending' AND channel = 'stack' AND idem_key = ?"


def _stack_key(row: tuple) -> tuple | None:
    # the one statement's guard: a Stack row's key, probed only for a Stack row
    return (row[_WIDTH + 1],) if row[_WIDTH] == "stack" else None


# a Stack row whose key is already pending is not stored (one key, one pending write): a guarded
# insert (sidecar.store.ops, Rule 5) — the one statement below, run as its probe and a plain insert
register(PutDelivery,
         Guarded(f"{_INSERT} SELECT {_MARKS} WHERE NOT (? = 'stack' AND EXISTS ({_PENDING_STACK_KEY}))",
                 insert=f"{_INSERT} VALUES ({_MARKS})", probe=_PENDING_STACK_KEY, width=_WIDTH,
                 guard=_stack_key),
         _delivery_params)
register(ClaimDelivery,
         "UPDATE deliveries SET attempts=?, next_attempt_at=?, last_error=?, updated_at=?"
         " WHERE id=? AND status='pending'",
         lambda o: (o.attempts, o.next_attempt_at, f"in flight: attempt {o.attempts}", o.at,
                    o.delivery_id))
register(SettleDelivery,
         "UPDATE deliveries SET status=?, attempts=?, next_attempt_at=?, last_error=?, delivered_at=?,"
         " updated_at=? WHERE id=? AND status='pending'",
         lambda o: (o.status, o.attempts, o.next_attempt_at, o.last_error, o.delivered_at, o.at,
                    o.delivery_id))
register(PutDedup,
         "INSERT INTO router_dedup (source, dedup_key, accepted_at, event_id) VALUES (?,?,?,?)"
         " ON CONFLICT (source, dedup_key) DO UPDATE SET accepted_at=excluded.accepted_at,"
         " event_id=excluded.event_id",
         lambda o: (o.source, o.dedup_key, o.accepted_at, o.event_id))
register(PutThrottle,
         "INSERT INTO router_throttle (channel, target, last_at) VALUES (?,?,?)"
         " ON CONFLICT (channel, target) DO UPDATE SET last_at=max(last_at, excluded.last_at)",
         lambda o: (o.channel, o.target, o.last_at))
register(DropThrottle, "DELETE FROM router_throttle WHERE channel=? AND target=? AND last_at=?",
         lambda o: (o.channel, o.target, o.last_at))
register(PutRule,
         "INSERT INTO router_rules (name, data, created_at, updated_at) VALUES (?,?,?,?)"
         " ON CONFLICT (name) DO UPDATE SET data=excluded.data, updated_at=excluded.updated_at",
         lambda o: (o.rule.name, to_json(rule_dict(o.rule)), o.at, o.at))
register(DeleteRule, "DELETE FROM router_rules WHERE name=?", lambda o: (o.name,))
register(PutJournal,
         "INSERT OR IGNORE INTO router_journal (delivery_id, target, at, body) VALUES (?,?,?,?)",
         lambda o: (o.delivery_id, o.target, o.at, o.body))
register(PruneRouter, "DELETE FROM deliveries WHERE status != 'pending' AND event_at < ?",
         lambda o: (o.before,))


class PruneDedup(Op, frozen=True):
    before: float


class PruneJournal(Op, frozen=True):
    before: float


register(PruneDedup, "DELETE FROM router_dedup WHERE accepted_at < ?", lambda o: (o.before,))
register(PruneJournal, "DELETE FROM router_journal WHERE at < ?", lambda o: (o.before,))


def prune_ops(now: float, keep_s: float, dedup_window_s: float) -> list[Op]:
    """Ops that forget settled deliveries and journal rows older than ``keep_s`` and dedup keys
    whose window has passed."""
    return [PruneRouter(now - keep_s), PruneDedup(now - dedup_window_s),
            PruneJournal(now - keep_s)]
