"""Sender health ↔ SQLite (schema v2 in :mod:`sidecar.store.migrations`): the write ops for a
step or a manage call and the readers that rebuild a :class:`~.manage.Registry` at start.

A restart loads each ``SenderState`` whole, including the stored ``cooldown_end``/``exit_at`` and
the probe slot, so nothing is re-drawn (DESIGN §10: "A restart never resets or re-draws a
cooldown").  Readers are synchronous ``fn(sqlite3.Connection)`` for :meth:`Store.read`.
"""
from __future__ import annotations

import sqlite3

import msgspec

from sidecar.store.ops import (AddSenderHistory, DeleteAssignments, DeleteGroup, Op, PutAssignment,
                               PutGroup, PutSender)

from .groups import Group
from .health import History, SenderState, Step
from .manage import Registry

_state = msgspec.json.Decoder(SenderState)
_group = msgspec.json.Decoder(Group)


def sender_ops(state: SenderState, history: list[History] | None = None) -> list[Op]:
    """Ops that persist a sender's new state and its history rows (one transaction)."""
    ops: list[Op] = [PutSender(state.sender, state.state, state.cooldown_end, msgspec.to_builtins(state))]
    ops += [AddSenderHistory(r.sender, r.at, r.code, r.note) for r in history or ()]
    return ops


def step_ops(step: Step) -> list[Op]:
    return sender_ops(step.state, step.history)


def registry_ops(before: Registry, after: Registry, history: list[History] | None = None) -> list[Op]:
    """The ops that turn the stored ``before`` into ``after`` (a manage call's result)."""
    ops: list[Op] = []
    for gid in before.groups.keys() - after.groups.keys():
        ops.append(DeleteGroup(gid))
    for g in (g for gid, g in after.groups.items() if before.groups.get(gid) != g):
        ops.append(PutGroup(g.id, g.priority, msgspec.to_builtins(g)))
    for sender in before.assignments.keys() | after.assignments.keys():
        new = after.assignments.get(sender, ())
        if before.assignments.get(sender, ()) != new:
            ops.append(DeleteAssignments(sender))
            ops += [PutAssignment(sender, gid) for gid in new]
    for name, s in after.senders.items():
        if before.senders.get(name) != s:
            ops += sender_ops(s)
    ops += [AddSenderHistory(r.sender, r.at, r.code, r.note) for r in history or ()]
    return ops


def load_registry(conn: sqlite3.Connection) -> Registry:
    """Rebuild the registry: groups, assignments, sender states."""
    groups = {gid: _group.decode(d) for gid, d in conn.execute("SELECT id, data FROM sender_groups")}
    assignments: dict[str, tuple[str, ...]] = {}
    for sender, gid in conn.execute("SELECT sender, group_id FROM sender_assignments ORDER BY sender, group_id"):
        assignments[sender] = (*assignments.get(sender, ()), gid)
    senders = {s: _state.decode(d) for s, d in conn.execute("SELECT sender, data FROM sender_state")}
    return Registry(groups=groups, assignments=assignments, senders=senders)


def load_history(conn: sqlite3.Connection, sender: str, since: float = 0.0, limit: int = 500) -> list[History]:
    """The rows of ``sender`` since ``since`` (unix s), oldest first (:func:`history_page`)."""
    return [h for _, h in history_page(conn, sender, since, None, limit)]


def history_page(conn: sqlite3.Connection, sender: str, since: float = 0.0, after_id: int | None = None,
                 limit: int = 500) -> list[tuple[int, History]]:
    """``senders.history``: ``(id, row)`` of ``sender`` since ``since`` (unix s) with an id after
    ``after_id`` (the page cursor), oldest first: by (at, id), starting after the row ``after_id``
    in that order."""
    rows = conn.execute("SELECT id, sender, at, code, note FROM sender_history WHERE sender = ? AND at >= ?"
                        " AND (at, id) > (COALESCE((SELECT at FROM sender_history WHERE id = ?), -1e308), ?)"
                        " ORDER BY at, id LIMIT ?", (sender, since, after_id or 0, after_id or 0, limit))
    return [(r[0], History(*r[1:])) for r in rows]
