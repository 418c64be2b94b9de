"""The delivery audit summarised for a shift lead (``sidecar deliveries``).

Rules / theory of operation
---------------------------
* :func:`summarise` runs on a ``sqlite3`` connection to ``sidecar.db`` (the CLI's read-only one)
  and answers, for the rows matching the filters (``target``, ``status``, event time
  ``since <= event_at < until``, unix seconds UTC), in three aggregate queries — each machine of
  a shift holds ~40,000 rows, so nothing is read row by row:

  - ``counts``: ``{target: {status: n}}`` (statuses of DESIGN §10's audit: pending, delivered,
    failed, skipped, duplicate);
  - ``oldest_pending``: the pending row with the smallest ``event_at`` (``id``, ``target``,
    ``event_at``, ``attempts``, ``last_error``) and ``age_s`` = ``as_of - event_at``, or None;
  - ``reasons``: failed rows' ``last_error`` and pending rows' last retry error, grouped by
    (target, status, text), counted, most first (at most ``top``; ``reasons_more`` counts the
    groups left out).
* ``as_of`` is the audit's newest write (``MAX(updated_at)`` over every row): a replay's data dir
  runs on virtual time, so the wall clock would age every row by months; on a live sidecar the
  router writes every few seconds, so it is "now" to within them.
"""
from __future__ import annotations

import sqlite3
from typing import Any

STATUS_ORDER = ("pending", "failed", "delivered", "skipped", "duplicate")


def _where(target: str | None, status: str | None, since: float | None,
           until: float | None) -> tuple[str, list[Any]]:
    sql, args = " WHERE 1", []
    for col, val, op in (("target", target, "="), ("status", status, "="), ("event_at", since, ">="),
                         ("event_at", until, "<")):
        if val is not None:
            sql += f" AND {col} {op} ?"
            args.append(val)
    return sql, args


def summarise(conn: sqlite3.Connection, *, target: str | None = None, status: str | None = None,
              since: float | None = None, until: float | None = None, top: int = 10) -> dict[str, Any]:
    """The summary (shape: the module docstring).  Raises ``sqlite3.Error`` (the caller's sentence)."""
    where, args = _where(target, status, since, until)
    counts: dict[str, dict[str, int]] = {}
    total = 0
    for tgt, st, n in conn.execute(f"SELECT target, status, COUNT(*) FROM deliveries{where}"
                                   " GROUP BY target, status ORDER BY target", args):
        counts.setdefault(tgt, {})[st] = n
        total += n
    (as_of,) = conn.execute("SELECT MAX(updated_at) FROM deliveries").fetchone()
    row = conn.execute(f"SELECT id, target, event_at, attempts, last_error FROM deliveries{where}"
                       " AND status = 'pending' ORDER BY event_at, seq LIMIT 1", args).fetchone()
    oldest = None
    if row is not None:
        oldest = {"id": row[0], "target": row[1], "event_at": row[2], "attempts": row[3],
                  "last_error": row[4], "age_s": max(0.0, (as_of or row[2]) - row[2])}
    groups = conn.execute(
        f"SELECT target, status, last_error, COUNT(*) AS n FROM deliveries{where}"
        " AND last_error IS NOT NULL AND status IN ('failed', 'pending')"
        " GROUP BY target, status, last_error ORDER BY n DESC, target, last_error", args).fetchall()
    return {"as_of": as_of, "total": total, "counts": counts, "oldest_pending": oldest,
            "reasons": [{"target": t, "status": s, "reason": r, "count": n} for t, s, r, n in groups[:top]],
            "reasons_more": max(0, len(groups) - top)}
