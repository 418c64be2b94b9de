"""Sender health ← SQLite: the readers that rebuild a :class:`~sidecar.senders.manage.Registry`
at start and page the history (schema v2 in :mod:`sidecar.store.migrations`; the write ops are
:mod:`sidecar.senders.store`).  Readers are synchronous ``fn(sqlite3.Connection)`` for
:meth:`Store.read`; a restart loads each ``SenderState`` whole (DESIGN §10: "A restart never
resets or re-draws a cooldown")."""
from __future__ import annotations

import sqlite3

import msgspec

from sidecar.senders.groups import Group
from sidecar.senders.health import History, SenderState
from sidecar.senders.manage import Registry

_state = msgspec.json.Decoder(SenderState)
_group = msgspec.json.Decoder(Group)


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
