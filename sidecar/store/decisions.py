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
* Rows come back as dicts ``{"at", "type", "source", "outcome", "task_id", "detail"}`` ordered by
  (``at``, ``id``): the order the decisions were taken.  Times are unix seconds (UTC).
"""
from __future__ import annotations

import sqlite3
from pathlib import Path

from .rows import decode_json

DB_NAME = "sidecar.db"
_SELECT = ("SELECT at, type, source, outcome, task_id, detail FROM decisions"
           " WHERE tu = ? AND ru = ? AND at >= ? ORDER BY at, id")


class DecisionLogUnavailable(Exception):
    """The data dir holds no readable decision log; the message says why."""


def read_decisions(conn: sqlite3.Connection, tu: str, ru: str,
                   since: float | None = None) -> list[dict]:
    """The pair's decisions at or after ``since`` (unix seconds; None = all kept)."""
    lo = float("-inf") if since is None else since
    return [{"at": r[0], "type": r[1], "source": r[2], "outcome": r[3], "task_id": r[4],
             "detail": decode_json(r[5])}
            for r in conn.execute(_SELECT, (tu, ru, lo))]


def read_data_dir(data_dir: Path | str, tu: str, ru: str,
                  since: float | None = None) -> list[dict]:
    """:func:`read_decisions` on ``<data_dir>/sidecar.db`` opened read-only.

    Raises :class:`DecisionLogUnavailable` (missing file, schema without the log, unreadable)."""
    path = Path(data_dir) / DB_NAME
    if not path.is_file():
        raise DecisionLogUnavailable(f"no sidecar database at {path}")
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise DecisionLogUnavailable(f"cannot open {path}: {exc}") from exc
    try:
        conn.execute("PRAGMA busy_timeout = 5000")
        has = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'decisions'"
                           ).fetchone()
        if has is None:
            raise DecisionLogUnavailable(
                f"{path} has no decision log yet (written by an older sidecar; it starts with the "
                "next run)")
        return read_decisions(conn, tu, ru, since)
    except sqlite3.Error as exc:
        raise DecisionLogUnavailable(f"cannot read {path}: {exc}") from exc
    finally:
        conn.close()
