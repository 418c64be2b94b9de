"""Reading the decision log (DESIGN §13; rows written by :class:`~sidecar.store.ops.PutDecision`).

Rules / theory of operation
---------------------------
* :func:`read_decisions` runs on any ``sqlite3`` connection: the running sidecar's (through
  :meth:`Store.decisions <sidecar.store.db.Store.decisions>`, on aiosqlite's thread) and the
  CLI's own read-only one (:func:`read_data_dir`).
* :func:`read_data_dir` opens ``sidecar.db`` **read-only** and takes no lock, so ``sidecar why``
  works beside a running sidecar (WAL readers never block the writer) and never migrates or
  creates anything.  A missing file, a file from before the decision log (schema < 2) or one
  SQLite cannot read raise :class:`DecisionLogUnavailable` with a sentence for the user.
* Rows come back as dicts ``{"id", "at", "type", "source", "outcome", "task_id", "detail"}``
  ordered by (``at``, ``id``): the order the decisions were taken.  A page of ``why`` starts
  after the row ``after_id`` in that order (its id is the cursor; a row pruned meanwhile starts
  the page at the beginning of what is kept).  Times are unix seconds (UTC).
* A pair's rows include the TU-wide ones (``ru`` ``""``, :data:`sidecar.runtime.decisions.TU_WIDE`:
  e.g. Stack had no favorites list at login), in the same order.
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
import sqlite3
from pathlib import Path

from sidecar.domain.errors import IOFailure

from .integrity import open_checked
from .rows import decode_json

DB_NAME = "sidecar.db"
_SELECT = ("SELECT id, at, type, source, outcome, task_id, detail FROM decisions"
           " WHERE tu = ? AND ru IN (?, '') AND at >= ?"
           " AND (at, id) > (COALESCE((SELECT at FROM decisions WHERE id = ?), -1e308), ?)"
           " ORDER BY at, id LIMIT ?")


class DecisionLogUnavailable(IOFailure):
    """The data dir holds no readable decision log; the message says why."""


def read_decisions(conn: sqlite3.Connection, tu: str, ru: str, since: float | None = None, *,
                   after_id: int | None = None, limit: int = -1) -> list[dict]:
    """The pair's decisions (and the TU-wide ones) at or after ``since`` (unix seconds; None = all kept) with an id
    after ``after_id``, at most ``limit`` (-1: all)."""
    lo = float("-inf") if since is None else since
    return [{"id": r[0], "at": r[1], "type": r[2], "source": r[3], "outcome": r[4],
             "task_id": r[5], "detail": decode_json(r[6])}
            for r in conn.execute(_SELECT, (tu, ru, lo, after_id or 0, after_id or 0, limit))]


@contextmanager
def decision_log(data_dir: Path | str) -> Iterator[sqlite3.Connection]:
    """``<data_dir>/sidecar.db`` opened read-only (no lock, no migration) for a reader of the
    decision log; closed on exit.  Raises :class:`DecisionLogUnavailable` (missing file, schema
    without the log, unreadable — an ``sqlite3.Error`` inside the block included)."""
    path = Path(data_dir) / DB_NAME
    if not path.is_file():
        raise DecisionLogUnavailable(f"no sidecar database at {path}")
    try:
        conn = open_checked(path)  # DatabaseDamaged: one line and exit 7 (sidecar.cli)
    except sqlite3.Error as exc:
        raise DecisionLogUnavailable(f"cannot open {path}: {exc}") from exc
    try:
        has = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'decisions'"
                           ).fetchone()
        if has is None:
            raise DecisionLogUnavailable(
                f"{path} has no decision log yet (written by an older sidecar; it starts with the "
                "next run)")
        yield conn
    except sqlite3.Error as exc:
        raise DecisionLogUnavailable(f"cannot read {path}: {exc}") from exc
    finally:
        conn.close()


def read_data_dir(data_dir: Path | str, tu: str, ru: str,
                  since: float | None = None) -> list[dict]:
    """:func:`read_decisions` on ``<data_dir>/sidecar.db`` opened read-only.

    Raises :class:`DecisionLogUnavailable` (missing file, schema without the log, unreadable)."""
    with decision_log(data_dir) as conn:
        return read_decisions(conn, tu, ru, since)
