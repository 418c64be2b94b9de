"""``sidecar report --data-dir DIR --html OUT``: the HTML view of a sidecar's durable state — what a
shift lead is sent when an operator says "I got no task" (DESIGN §5 the one store; §6 tasks;
§10 deliveries; seed 000 §5 sender health).

Rules / theory of operation
---------------------------
1. Read-only: ``<data_dir>/sidecar.db`` is opened by :func:`sidecar.store.integrity.open_checked`
   (a damaged file raises :class:`~sidecar.store.errors.DatabaseDamaged`: one line and exit 7, as
   ``why``, ``deliveries`` and ``senders`` do); nothing is written beside it.  A missing file or a
   schema without the tables: a sentence and exit 2.
2. The report has the JSON report's shape (``series``: tasks, deliveries, sender rows; times in
   seconds from the earliest row, ``start_utc`` that row's instant), so one renderer
   (:mod:`sidecar.cli.report_html`) draws both; ``--json OUT`` writes it for
   ``sidecar-stub report OUT --html …`` (the frozen binary has no plotly: ``--html`` there says so).
3. Tasks: every row of ``tasks`` (``overdue_at`` is the deadline when the task was still open
   past it or closed after it — the durable state keeps no overdue instant).  Deliveries: every
   row of ``deliveries`` at its ``event_at``, by target and status.  Senders: ``sender_history``
   rows, the state after each code (100/106 active, 101/102 cooldown, 103 Need Check; others keep
   the state).  Decisions: counts by outcome, shown in the checks table.
"""
from __future__ import annotations

import argparse
import json
import sqlite3
import sys
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

STATE_AFTER = {100: "active", 106: "active", 101: "cooldown", 102: "cooldown", 103: "need_check"}


def add_parser(sub: argparse._SubParsersAction) -> None:
    r = sub.add_parser("report", help="write the HTML view of a data dir's tasks, decisions, deliveries and senders")
    r.add_argument("--data-dir", type=Path, help="the sidecar's data dir (default: per-OS app data)")
    r.add_argument("--html", help="the self-contained HTML file to write")
    r.add_argument("--json", help="the report as JSON (sidecar-stub report FILE --html OUT draws it)")


def _rows(conn: sqlite3.Connection, sql: str) -> list[sqlite3.Row]:
    try:
        return conn.execute(sql).fetchall()
    except sqlite3.OperationalError:  # an older schema without the table: nothing of that kind
        return []


def read(data_dir: Path) -> dict[str, Any]:
    """The report of ``data_dir`` (shape: module docstring, rule 2).  Raises FileNotFoundError
    (no database), DatabaseDamaged (rule 1)."""
    from sidecar.store.integrity import open_checked

    path = data_dir / "sidecar.db"
    if not path.is_file():
        raise FileNotFoundError(f"no sidecar database at {path}")
    conn = open_checked(path)
    conn.row_factory = sqlite3.Row
    try:
        tasks = _rows(conn, "SELECT task_id, tu, type, created_at, deadline, closed_at, reason FROM tasks")
        deliveries = _rows(conn, "SELECT event_at, target, status FROM deliveries ORDER BY event_at, seq")
        history = _rows(conn, "SELECT sender, at, code, note FROM sender_history ORDER BY at, id")
        decisions = _rows(conn, "SELECT outcome, COUNT(*) AS n FROM decisions GROUP BY outcome")
    finally:
        conn.close()
    instants = ([t["created_at"] for t in tasks] + [d["event_at"] for d in deliveries] + [h["at"] for h in history])
    start = min(instants) if instants else 0.0
    ends = instants + [t["closed_at"] for t in tasks if t["closed_at"] is not None]
    end = max(ends) - start if ends else 0.0
    state: dict[str, str] = {}
    senders = []
    for h in history:
        before = state.get(h["sender"], "active")
        state[h["sender"]] = STATE_AFTER.get(h["code"], before)
        senders.append({"at": h["at"] - start, "sender": h["sender"], "from": before, "to": state[h["sender"]],
                        "code": h["code"], "note": h["note"]})
    rows = [{"task_id": t["task_id"], "tu": t["tu"], "type": t["type"], "created_at": t["created_at"] - start,
             "closed_at": None if t["closed_at"] is None else t["closed_at"] - start, "reason": t["reason"],
             "deadline": t["deadline"] - start,
             "overdue_at": (t["deadline"] - start if (t["closed_at"] or start + end) > t["deadline"] else None)}
            for t in tasks]
    outcomes = {d["outcome"]: d["n"] for d in decisions}
    return {"scenario": f"data dir {data_dir}",
            "start_utc": datetime.fromtimestamp(start, timezone.utc).isoformat().replace("+00:00", "Z"),
            "verdict": f"{len(rows)} tasks ({sum(1 for t in rows if t['closed_at'] is None)} open), "
                       f"{len(deliveries)} deliveries, {len(state)} senders",
            "exit_code": 0, "timeline": [],
            "series": {"end_s": end, "tasks": rows, "senders": senders,
                       "deliveries": [{"at": d["event_at"] - start, "target": d["target"], "status": d["status"]}
                                      for d in deliveries]},
            "expectations": {"by_kind": {f"decisions {k}": v for k, v in sorted(outcomes.items())}, "failed": []},
            "consistency": {"violations": 0, "examples": []},
            "deliveries_by_status": dict(Counter(d["status"] for d in deliveries))}


def run(args: argparse.Namespace) -> int:
    from sidecar.config import default_data_dir

    if not args.html and not args.json:
        print("sidecar report: give --html OUT and/or --json OUT", file=sys.stderr)
        return 2
    data_dir = Path(args.data_dir or default_data_dir())
    try:
        summary = read(data_dir)  # DatabaseDamaged: one line and exit 7 (sidecar.cli.main)
    except FileNotFoundError as exc:
        print(f"sidecar report: {exc}", file=sys.stderr)
        return 2
    if args.json:
        Path(args.json).write_text(json.dumps(summary, ensure_ascii=False, indent=1), encoding="utf-8")
    if args.html:
        try:
            from sidecar.cli.report_html import write_html
            write_html(summary, args.html)
        except ImportError as exc:  # the frozen binary leaves plotly out (kept lean)
            print(f"sidecar report: --html needs plotly ({exc.name}), not in this build: write --json "
                  "and draw it with sidecar-stub report FILE --html OUT", file=sys.stderr)
            return 2
        print(f"html: {args.html}")
    return 0
