"""A pair's whole story from the durable state (``sidecar why``; DESIGN §13).

Rules / theory of operation
---------------------------
* :func:`read_story` runs on any ``sqlite3`` connection to ``sidecar.db`` (the CLI opens it
  read-only, :func:`read_data_dir`) and merges, for one TU+RU pair, what three tables keep:

  - ``decisions`` (the decision log, :mod:`sidecar.store.decisions`, with the TU-wide rows):
    kind ``candidate`` (created / a missed roll / a found unanswered message), ``refused``
    (``refused:<reason>``), ``chain`` (source ``chain``: a Follow-up message chain step, its
    ``removed:<reason>`` end included), ``removed`` (other ``removed:<reason>``) and ``no_list``;
  - ``tasks``: kind ``created`` at ``created_at``; ``overdue`` at the ``deadline`` of an
    answer-awaiting type (DESIGN §6: "overdue at the deadline, stays open") still open at the
    state's newest instant or closed after the deadline — the store keeps no overdue instant
    (``overdue`` is derived, :class:`sidecar.domain.tasks.Task`), so the deadline is the instant;
    ``closed`` at ``closed_at`` with its reason (answered, expired, superseded, blocked, logout,
    dismissed);
  - ``deliveries`` to ``stack`` for the pair whose path is a marker write
    (``PUT …/favorites/<ru>/markers/<name>``, seed 003's Follow-up markers): kind ``marker``
    at the event time with the marker's name and the delivery's status.

* The state's newest instant ("now" for open tasks) is the newest time any of these tables holds
  — a replay's data dir runs on virtual time, so the wall clock would call every open task
  overdue.
* Entries are :class:`StoryEntry` (``at`` unix seconds UTC, ``kind``, ``text``: one sentence for a
  shift lead, ``details``: the row's fields), sorted by (``at``, order of the kinds above) so a
  created task precedes its close at the same instant.
* Errors: :class:`~sidecar.store.decisions.DecisionLogUnavailable` (no database, no decision
  log, unreadable); an older schema without ``deliveries`` simply has no marker entries.
"""
from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec

from sidecar.domain.tasks import SPECS, TaskType

from .decisions import decision_log, read_decisions
from .rows import decode_json

KINDS = ("no_list", "candidate", "refused", "chain", "removed", "created", "marker", "overdue",
         "closed")
_ORDER = {k: i for i, k in enumerate(KINDS)}
CLOSE_TEXT = {"answered": "the TU answered on the task's channel",
              "expired": "its deadline passed (a reminder does not wait)",
              "superseded": "a stronger task of the same channel replaced it",
              "blocked": "the customer was blocked or left the favorites",
              "logout": "the TU logged out",
              "dismissed": "the operator dismissed it"}


def _utc(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%H:%M:%S")


class StoryEntry(msgspec.Struct, frozen=True):
    """One step of a pair's story: ``at`` unix seconds (UTC), ``kind`` one of :data:`KINDS`."""

    at: float
    kind: str
    text: str
    details: dict[str, Any] = {}


def _decision_kind(row: dict) -> str:
    outcome = row["outcome"]
    if outcome == "no_list":
        return "no_list"
    if row["source"] == "chain":
        return "chain"
    head = outcome.partition(":")[0]
    return head if head in ("refused", "removed") else "candidate"


def _awaits_answer(type_: str) -> bool:
    try:
        return SPECS[TaskType(type_)].awaits_answer
    except ValueError:  # a type from a newer sidecar: say nothing about overdue
        return False


def _newest(conn: sqlite3.Connection) -> float:
    """The newest instant the state holds (see the module: "now" for open tasks)."""
    best = float("-inf")
    for sql in ("SELECT MAX(at) FROM decisions", "SELECT MAX(MAX(created_at), MAX(COALESCE(closed_at, 0))) FROM tasks",
                "SELECT MAX(updated_at) FROM deliveries"):
        try:
            (v,) = conn.execute(sql).fetchone()
        except sqlite3.OperationalError:  # an older schema: no such table
            continue
        if v is not None:
            best = max(best, float(v))
    return best


def _task_entries(conn: sqlite3.Connection, tu: str, ru: str, now: float) -> list[StoryEntry]:
    try:
        rows = conn.execute("SELECT task_id, type, source, created_at, deadline, closed_at, reason, meta"
                            " FROM tasks WHERE tu = ? AND ru = ?", (tu, ru)).fetchall()
    except sqlite3.OperationalError:  # a decision log copied without its tasks: nothing to add
        return []
    out = []
    for tid, type_, source, created, deadline, closed, reason, meta in rows:
        d = {"task_id": tid, "type": type_, "source": source, "deadline": deadline, "meta": decode_json(meta)}
        out.append(StoryEntry(created, "created", f"task {tid} on the list: {type_} ({source}), deadline "
                                                   f"{_utc(deadline)} UTC", d))
        if _awaits_answer(type_) and (closed if closed is not None else now) > deadline:
            out.append(StoryEntry(deadline, "overdue", f"{type_} task {tid} became overdue (deadline "
                                                       "passed, still unanswered)", d))
        if closed is not None:
            why = CLOSE_TEXT.get(reason or "", reason or "no reason kept")
            out.append(StoryEntry(closed, "closed", f"{type_} task {tid} closed: {reason} — {why}",
                                  {**d, "reason": reason}))
    return out


def _marker_entries(conn: sqlite3.Connection, tu: str, ru: str) -> list[StoryEntry]:
    try:
        rows = conn.execute("SELECT event_at, path, status, attempts, last_error FROM deliveries"
                            " WHERE target = 'stack' AND pair = ? AND method = 'PUT'"
                            " AND path LIKE '%/markers/%' ORDER BY seq", (f"{tu}/{ru}",)).fetchall()
    except sqlite3.OperationalError:  # before the router's tables: no marker rows to show
        return []
    out = []
    for at, path, status, attempts, err in rows:
        name = path.rsplit("/markers/", 1)[1]
        tail = f" (last error: {err})" if err and status != "delivered" else ""
        out.append(StoryEntry(at, "marker", f"marker {name} written to Stack: {status}{tail}",
                              {"marker": name, "status": status, "attempts": attempts}))
    return out


def read_story(conn: sqlite3.Connection, tu: str, ru: str) -> list[StoryEntry]:
    """The pair's story, oldest first (see the module for kinds and order)."""
    from sidecar.runtime.decisions import explain

    entries = [StoryEntry(r["at"], _decision_kind(r), explain(r),
                          {k: r[k] for k in ("type", "source", "outcome", "task_id", "detail")})
               for r in read_decisions(conn, tu, ru)]
    entries += _task_entries(conn, tu, ru, _newest(conn))
    entries += _marker_entries(conn, tu, ru)
    return sorted(entries, key=lambda e: (e.at, _ORDER[e.kind]))


def read_data_dir(data_dir: Path | str, tu: str, ru: str) -> list[StoryEntry]:
    """:func:`read_story` on ``<data_dir>/sidecar.db`` opened read-only (no lock, no migration).

    Raises :class:`DecisionLogUnavailable` (missing file, schema without the log, unreadable)."""
    with decision_log(data_dir) as conn:
        return read_story(conn, tu, ru)
