"""The router's tables: readers and :class:`RouterStore` (the ops a step adds to its
transaction are in :mod:`sidecar.router.ops`; DESIGN §9, §10, §13 "their state has tables of its own"; schema v2 in :mod:`sidecar.store.migrations`).

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
* Readers are plain functions over a ``sqlite3.Connection``, run on the store's thread through
  :meth:`Store.read` (:class:`RouterStore` wraps them); they never write.
* Stack per-pair order: :func:`due_stack` returns, per pair whose oldest pending row (its head)
  is due, the run of that pair's pending rows from the head while each is due — a batch may
  carry a whole run, because Stack fails the later writes of a pair whose earlier write failed.
* No secret is ever written here: rows hold target *names*; URLs and secrets stay in the config.
"""
from __future__ import annotations

import sqlite3
from typing import Any

import msgspec

from sidecar.store.ops import Op
from sidecar.store.rows import decode_json

from sidecar.router import ops as _ops  # noqa: F401 - the ops register with the store on import, as before
from sidecar.router import handover as _handover  # noqa: F401 - its ops register too
from sidecar.router.model import Delivery, Rule

_COLS = ("seq, id, event_id, event_at, source, subject, action, priority, rule, channel, target,"
         " status, attempts, next_attempt_at, expires_at, last_error, note, message, delivered_at,"
         " pair, idem_key, method, path, tu, ru")


# ---------------------------------------------------------------------------------- readers

def delivery_from_row(r: tuple) -> Delivery:
    """A row of ``_COLS`` as a :class:`Delivery`, built positionally in the struct's field order
    (:data:`~.model.DELIVERY_FIELDS`; 25 keywords cost ~5x more — the pump reads every row)."""
    return Delivery(r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10], r[11],
                    bytes(r[17]), r[12], r[13], r[14], r[15], r[16], r[18], r[19], r[20], r[21],
                    r[22], r[23], r[24], r[0])


class Loaded(msgspec.Struct, frozen=True):
    rules: dict[str, Rule]
    dedup: dict[tuple[str, str], float]
    last_real: dict[tuple[str, str], float]
    next_seq: int
    dedup_ids: dict[tuple[str, str], str] = {}  # (source, key) -> the accepted event's id


def load(conn: sqlite3.Connection, now: float, dedup_window_s: float) -> Loaded:
    """Everything :class:`~sidecar.router.route.RouterState` keeps in memory."""
    rules = {}
    for name, data in conn.execute("SELECT name, data FROM router_rules ORDER BY name"):
        rules[name] = msgspec.convert(decode_json(data), Rule)
    dedup: dict[tuple[str, str], float] = {}
    dedup_ids: dict[tuple[str, str], str] = {}
    for s, k, at, eid in conn.execute(
            "SELECT source, dedup_key, accepted_at, event_id FROM router_dedup WHERE accepted_at > ?",
            (now - dedup_window_s,)):
        dedup[(s, k)] = at
        if eid is not None:
            dedup_ids[(s, k)] = eid
    last = {(c, t): at for c, t, at in conn.execute("SELECT channel, target, last_at FROM router_throttle")}
    row = conn.execute("SELECT value FROM meta WHERE key = 'router.next_seq'").fetchone()
    return Loaded(rules, dedup, last, int(row[0]) if row else 1, dedup_ids)


def due_other(conn: sqlite3.Connection, now: float, limit: int) -> list[Delivery]:
    """Pending non-Stack rows due at ``now``, oldest first."""
    sql = (f"SELECT {_COLS} FROM deliveries WHERE status = 'pending' AND channel != 'stack'"
           " AND next_attempt_at <= ? ORDER BY next_attempt_at, seq LIMIT ?")
    return [delivery_from_row(r) for r in conn.execute(sql, (now, limit))]


_STACK_PENDING = "status = 'pending' AND channel = 'stack'"
_HEAD = (f"SELECT {_COLS} FROM deliveries INDEXED BY deliveries_head WHERE status = 'pending'"
         " AND target = ? AND channel != 'stack' AND next_attempt_at <= ? ORDER BY next_attempt_at, seq LIMIT ?")


def due_heads(conn: sqlite3.Connection, now: float, targets: tuple[str, ...], skip: frozenset[str],
              limit: int, per_target: int = 1) -> list[Delivery]:
    """The due head of each of ``targets`` but ``skip`` — its ``per_target`` oldest pending rows
    due at ``now`` (one statement per target through the ``deliveries_head`` index with a LIMIT:
    a backlog elsewhere, or of that target beyond its head, costs nothing) — for at most
    ``limit`` targets, the targets whose first row is oldest first, each target's rows in order
    (by ``next_attempt_at``, then ``seq``); when ``targets`` is empty, nothing."""
    heads: list[list[Delivery]] = []
    for t in targets:
        if t in skip:
            continue
        rows = [delivery_from_row(r) for r in conn.execute(_HEAD, (t, now, per_target))]
        if rows:
            heads.append(rows)
    heads.sort(key=lambda rows: (rows[0].next_attempt_at, rows[0].seq))
    return [r for rows in heads[:limit] for r in rows]


def orphans(conn: sqlite3.Connection, now: float, targets: tuple[str, ...], limit: int) -> list[Delivery]:
    """Pending non-Stack rows due at ``now`` whose target is none of ``targets`` (left by an
    earlier config; routing fails such a row at once, so the pump asks once per process)."""
    marks = ",".join("?" * len(targets))
    sql = (f"SELECT {_COLS} FROM deliveries WHERE status = 'pending' AND channel != 'stack'"
           f" AND target NOT IN ({marks}) AND next_attempt_at <= ? ORDER BY next_attempt_at, seq LIMIT ?")
    return [delivery_from_row(r) for r in conn.execute(sql, (*targets, now, limit))]


def others_due(conn: sqlite3.Connection, targets: tuple[str, ...], skip: frozenset[str]) -> float | None:
    """The earliest next attempt of the pending rows of ``targets`` but ``skip`` (unix seconds;
    None = none): one index probe per target."""
    sql = ("SELECT MIN(next_attempt_at) FROM deliveries INDEXED BY deliveries_head"
           " WHERE status = 'pending' AND target = ? AND channel != 'stack'")
    vals = [conn.execute(sql, (t,)).fetchone()[0] for t in targets if t not in skip]
    dues = [v for v in vals if v is not None]
    return min(dues) if dues else None


def due_stack(conn: sqlite3.Connection, now: float, limit: int) -> list[list[Delivery]]:
    """Runs of due Stack rows per pair (see module rules), pairs by their head's seq; at most
    ``limit`` rows in all (a run may be cut, never reordered)."""
    sql = (f"SELECT {_COLS} FROM deliveries d WHERE d.{_STACK_PENDING.replace(' AND ', ' AND d.')}"
           f" AND d.pair IN (SELECT h.pair FROM deliveries h WHERE h.{_STACK_PENDING.replace(' AND ', ' AND h.')}"
           " AND h.next_attempt_at <= ? AND NOT EXISTS (SELECT 1 FROM deliveries p"
           f" WHERE p.{_STACK_PENDING.replace(' AND ', ' AND p.')} AND p.pair = h.pair AND p.seq < h.seq))"
           " ORDER BY d.seq")
    runs: dict[str, list[Delivery]] = {}
    closed: set[str] = set()
    total = 0
    for r in conn.execute(sql, (now,)):
        d = delivery_from_row(r)
        key = d.pair or ""
        if key in closed or total >= limit:
            continue
        if d.next_attempt_at is not None and d.next_attempt_at > now:
            closed.add(key)  # a later row not yet due ends the run
            continue
        runs.setdefault(key, []).append(d)
        total += 1
    return list(runs.values())


def next_due(conn: sqlite3.Connection, stack: bool = True) -> float | None:
    """The earliest instant a pending row may be tried (Stack: pairs' heads only; ``stack``
    False: not Stack's rows — no Stack is configured, they wait for one)."""
    a = conn.execute("SELECT MIN(next_attempt_at) FROM deliveries WHERE status = 'pending'"
                     " AND channel != 'stack'").fetchone()[0]
    if not stack:
        return a
    b = conn.execute(f"SELECT MIN(h.next_attempt_at) FROM deliveries h WHERE h.{_STACK_PENDING.replace(' AND ', ' AND h.')}"
                     " AND NOT EXISTS (SELECT 1 FROM deliveries p WHERE"
                     f" p.{_STACK_PENDING.replace(' AND ', ' AND p.')} AND p.pair = h.pair AND p.seq < h.seq)"
                     ).fetchone()[0]
    dues = [x for x in (a, b) if x is not None]
    return min(dues) if dues else None


def stack_heads(conn: sqlite3.Connection) -> tuple[float | None, float | None, int]:
    """Stack's pending writes for the flush cadence (:mod:`.cadence`): the earliest due instant
    of the pairs' heads still waiting for a first attempt, the earliest of those waiting for a
    retry (unix seconds, None = none), and how many Stack writes are pending in all."""
    fresh, retry = conn.execute(
        "SELECT MIN(CASE WHEN h.attempts = 0 THEN h.next_attempt_at END),"
        " MIN(CASE WHEN h.attempts > 0 THEN h.next_attempt_at END)"
        f" FROM deliveries h WHERE h.{_STACK_PENDING.replace(' AND ', ' AND h.')}"
        " AND NOT EXISTS (SELECT 1 FROM deliveries p WHERE"
        f" p.{_STACK_PENDING.replace(' AND ', ' AND p.')} AND p.pair = h.pair AND p.seq < h.seq)"
    ).fetchone()
    count = conn.execute(f"SELECT COUNT(*) FROM deliveries WHERE {_STACK_PENDING}").fetchone()[0]
    return fresh, retry, count


class PassEnd(msgspec.Struct, frozen=True):
    """What a pump pass ends with: the earliest due non-Stack row (``next_due(stack=False)``) and,
    with a Stack configured, :func:`stack_heads` (else ``(None, None, 0)``)."""

    other_due: float | None
    stack_heads: tuple[float | None, float | None, int] = (None, None, 0)


class Due(msgspec.Struct, frozen=True):
    """One round's read of the pump (:func:`due`): the due rows and, when none was due, what the
    pass ends with — so a pass's last, empty round and its end cost one thread hop, not four."""

    other: list[Delivery]  # :func:`due_other`
    stack: list[list[Delivery]]  # :func:`due_stack` (empty when not asked)
    end: PassEnd | None = None  # read only when neither kind had a due row


def pass_end(conn: sqlite3.Connection, stack: bool, targets: tuple[str, ...] | None = None,
             skip: frozenset[str] = frozenset()) -> PassEnd:
    """:class:`PassEnd`; ``stack``: a Stack is configured (its heads are read); ``targets``: the
    configured ones (their heads alone, but ``skip``: :func:`others_due`)."""
    other = next_due(conn, stack=False) if targets is None else others_due(conn, targets, skip)
    return PassEnd(other, stack_heads(conn) if stack else (None, None, 0))


def due(conn: sqlite3.Connection, now: float, other_limit: int, stack_limit: int | None,
        stack: bool, targets: tuple[str, ...] | None = None, skip: frozenset[str] = frozenset(),
        with_orphans: bool = True, per_target: int = 1) -> Due:
    """A pump round's rows in one read: :func:`due_other` (``other_limit``) — or, given the
    configured ``targets``, their due heads (:func:`due_heads`, not ``skip``: targets whose
    attempts are all in flight) plus, ``with_orphans``, :func:`orphans` — and, unless
    ``stack_limit`` is None, :func:`due_stack`; when both are empty, :func:`pass_end` too
    (``stack``: a Stack is configured).  ``per_target``: rows per target's head (the wall
    clock's pump sends a small batch per target per pass)."""
    if targets is None:
        other = due_other(conn, now, other_limit)
    else:
        other = due_heads(conn, now, targets, skip, other_limit, per_target)
        if with_orphans:
            other = orphans(conn, now, targets, other_limit) + other
    runs = due_stack(conn, now, stack_limit) if stack_limit is not None else []
    if other or runs:
        return Due(other, runs, None)
    return Due(other, runs, pass_end(conn, stack, targets, skip))


def last_live(conn: sqlite3.Connection, channel: str, target: str) -> float | None:
    """The event instant (unix seconds) of the latest ``pending`` or ``delivered`` row to
    (channel, target) — where a throttle window runs from once a later row failed (seed 002
    ``_throttled``).  Read only when a delivery fails (at most once per row)."""
    row = conn.execute("SELECT max(event_at) FROM deliveries WHERE channel = ? AND target = ?"
                       " AND status IN ('pending', 'delivered')", (channel, target)).fetchone()
    return None if row is None or row[0] is None else float(row[0])


def list_deliveries(conn: sqlite3.Connection, *, status: str | None = None, target: str | None = None,
                    since: float | None = None, after_seq: int | None = None, limit: int = 1000,
                    newest: bool = False, until: float | None = None) -> list[Delivery]:
    """The audit (``deliveries.list``, ``sidecar deliveries``): at most ``limit`` rows by seq,
    filtered by status, target, event time (``since <= event_at < until``) and the page cursor
    (``seq > after_seq``); ``newest``: the newest ``limit`` of them (still oldest first).  The
    one reader of the audit: the bridge method and the CLI both use it."""
    sql = f"SELECT {_COLS} FROM deliveries WHERE 1"
    args: list[Any] = []
    for col, val, op in (("status", status, "="), ("target", target, "="), ("event_at", since, ">="),
                         ("event_at", until, "<"), ("seq", after_seq, ">")):
        if val is not None:
            sql += f" AND {col} {op} ?"
            args.append(val)
    sql += f" ORDER BY seq {'DESC' if newest else ''} LIMIT ?"
    args.append(max(limit, 0))
    rows = [delivery_from_row(r) for r in conn.execute(sql, args)]
    return rows[::-1] if newest else rows


def pending_kept(conn: sqlite3.Connection, tu: str | None = None) -> list[Delivery]:
    """Pending non-Stack rows, oldest first: of ``tu`` (what its logout hands over, through the
    ``deliveries_tu_pending`` index), or with ``tu`` None every one (the closing summary of
    what stays with this machine, :func:`sidecar.router.handover.stays_summary`)."""
    sql = f"SELECT {_COLS} FROM deliveries WHERE status = 'pending' AND channel != 'stack'"
    args: tuple = ()
    if tu is not None:
        sql, args = sql + " AND tu = ?", (tu,)
    return [delivery_from_row(r) for r in conn.execute(sql + " ORDER BY seq", args)]


def handed_over(conn: sqlite3.Connection) -> dict[str, bool]:
    """The deliveries handed over through Stack and not yet settled here (``router_handovers``,
    :mod:`sidecar.router.handover`): id → whether Stack took the handover — a ``PUT`` of it was
    delivered, or there is none here (a row continued from Stack's listing).  False while the
    ``PUT`` waits in the outbox (Stack down since the logout) or after Stack refused it.  The
    ``PUT`` rows are found by their id (= key ``handover:<tu>:<id>:put@<instant>``, the
    ``UNIQUE`` index on ``id``): a range, not a scan of the audit."""
    out: dict[str, bool] = {}
    for delivery_id, tu in conn.execute(
            "SELECT delivery_id, tu FROM router_handovers ORDER BY delivery_id").fetchall():
        prefix = f"handover:{tu}:{delivery_id}:put@"  # sidecar.router.handover.handover_ops
        states = {s for (s,) in conn.execute(
            "SELECT status FROM deliveries WHERE id >= ? AND id < ?", (prefix, prefix[:-1] + "A"))}
        out[delivery_id] = not states or "delivered" in states
    return out


def journal_rows(conn: sqlite3.Connection, target: str) -> list[dict]:
    return [{"delivery_id": d, "at": at, "body": decode_json(b)} for d, at, b in conn.execute(
        "SELECT delivery_id, at, body FROM router_journal WHERE target = ? ORDER BY n",
        (target,))]


class RouterStore:
    """Async access to the router's tables through an open :class:`~sidecar.store.db.Store`."""

    def __init__(self, store: Any) -> None:
        self.store = store

    async def load(self, now: float, dedup_window_s: float) -> Loaded:
        return await self.store.read(load, now, dedup_window_s)

    async def due_other(self, now: float, limit: int = 100) -> list[Delivery]:
        return await self.store.read(due_other, now, limit)

    async def due_stack(self, now: float, limit: int = 500) -> list[list[Delivery]]:
        return await self.store.read(due_stack, now, limit)

    async def due(self, now: float, other_limit: int, stack_limit: int | None, stack: bool,
                  targets: tuple[str, ...] | None = None, skip: frozenset[str] = frozenset(),
                  with_orphans: bool = True, per_target: int = 1) -> Due:
        return await self.store.read(due, now, other_limit, stack_limit, stack, targets, skip,
                                     with_orphans, per_target)

    async def pass_end(self, stack: bool, targets: tuple[str, ...] | None = None,
                       skip: frozenset[str] = frozenset()) -> PassEnd:
        return await self.store.read(pass_end, stack, targets, skip)

    async def next_due(self, stack: bool = True) -> float | None:
        return await self.store.read(next_due, stack)

    async def stack_heads(self) -> tuple[float | None, float | None, int]:
        return await self.store.read(stack_heads)

    async def deliveries(self, **kw: Any) -> list[Delivery]:
        return await self.store.read(lambda c: list_deliveries(c, **kw))

    async def pending_kept(self, tu: str | None = None) -> list[Delivery]:
        return await self.store.read(pending_kept, tu)

    async def handed_over(self) -> dict[str, bool]:
        return await self.store.read(handed_over)

    async def journal(self, target: str) -> list[dict]:
        return await self.store.read(journal_rows, target)

    async def last_live(self, channel: str, target: str) -> float | None:
        return await self.store.read(last_live, channel, target)

    async def commit(self, ops: list[Op]) -> None:
        await self.store.commit(ops)
