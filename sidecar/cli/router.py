"""``sidecar rules`` and ``sidecar deliveries``: the router's rules and delivery audit from the
data dir, for a shift lead (DESIGN §10 "Management").

Reads ``<data dir>/sidecar.db`` **read-only** (like ``sidecar why``), so it works beside a
running sidecar and changes nothing.  ``rules`` prints the rules in application order (weight,
then name); ``deliveries`` first **summarises** the audit (
:mod:`sidecar.router.io.audit_summary`): counts per target and status, the oldest pending row and
its age, the failure reasons grouped and counted.  The rows follow on request (``--rows``, or a
paging option ``--limit``/``--after``): oldest first, filtered by ``--status``, ``--target``,
``--since`` and ``--until`` (the one time syntax, :mod:`sidecar.cli.when`: an ISO-8601 instant or
a span back from now: ``90m``, ``1h30m``, ``2d``; the filters apply to the summary too), at most
``--limit`` rows (the newest — the output then says when older rows exist and how to page from
the oldest; or, with ``--after SEQ``, the first after that seq — the output then ends with the
``--after`` of the next page).  ``--json`` prints one JSON object per line instead of a table
(times in unix seconds); without ``--rows`` it is one JSON object, the summary.  Rows hold target names only: no URL or secret is ever stored, so none
is printed.  Changing rules goes through the bridge (``rules.create/patch/delete``) of the
running sidecar.

Exit codes: 0; 2 bad arguments or no readable router tables in the data dir (one line on stderr).
"""
from __future__ import annotations

import argparse
import json
import sqlite3
import sys
from datetime import UTC, datetime
from pathlib import Path
from collections.abc import Callable
from typing import Any

from sidecar.cli.when import add_window, utc
from sidecar.core.clock import WallClock
from sidecar.domain.errors import IOFailure
from sidecar.protocol.paging import INT64_MAX
from sidecar.store.integrity import open_checked

STATUSES = ("pending", "delivered", "failed", "skipped", "duplicate")
_COLS = ("seq", "id", "event_at", "source", "subject", "action", "priority", "rule", "target",
         "channel", "status", "attempts", "next_attempt_at", "last_error", "note", "delivered_at")


class Unavailable(IOFailure):
    """The data dir has no readable router tables; the message says why."""


MAX_ROWS = 100_000  # --limit: rows one command prints
DEFAULT_LIMIT = 200


def _bounded(lo: int, hi: int) -> Callable[[str], int]:
    """An argparse ``type``: an integer in ``lo..hi`` (a cursor past SQLite's int64 was an
    OverflowError traceback; ``--limit 0`` printed a row) — else one line and exit 2."""
    def parse(text: str) -> int:
        try:
            n = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if not lo <= n <= hi:
            raise argparse.ArgumentTypeError(f"{text} is not in {lo}..{hi}")
        return n
    return parse


def add_parsers(sub: argparse._SubParsersAction) -> None:
    r = sub.add_parser("rules", help="print the routing rules (read-only, from the data dir)")
    r.add_argument("--data-dir", type=Path, help="the sidecar's data dir (default: per-OS app data)")
    r.add_argument("--json", action="store_true", help="JSON lines instead of a table")
    d = sub.add_parser("deliveries", help="print the delivery audit (read-only, from the data dir)")
    d.add_argument("--data-dir", type=Path, help="the sidecar's data dir (default: per-OS app data)")
    d.add_argument("--status", choices=STATUSES, help="only rows with this status")
    d.add_argument("--target", help="only rows to this target (e.g. stack, ops-telegram)")
    add_window(d, WallClock().now, "events")  # the one time syntax (sidecar.cli.when)
    d.add_argument("--rows", action="store_true", help="after the summary, print the rows too "
                                                      "(--limit/--after imply it)")
    d.add_argument("--limit", type=_bounded(1, MAX_ROWS),
                   help=f"rows: at most this many (1..{MAX_ROWS}): the newest, or the first after "
                        f"--after (default {DEFAULT_LIMIT})")
    d.add_argument("--after", type=_bounded(0, INT64_MAX), metavar="SEQ",
                   help="page forward: the rows after this seq, oldest first (the 'more rows' hint gives it)")
    d.add_argument("--json", action="store_true", help="JSON lines instead of a table")


def _connect(data_dir: Path) -> sqlite3.Connection:
    path = Path(data_dir) / "sidecar.db"
    if not path.is_file():
        raise Unavailable(f"no sidecar database at {path}")
    try:
        conn = open_checked(path)  # DatabaseDamaged: one line and exit 7 (sidecar.cli)
        if conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='deliveries'").fetchone() is None:
            raise Unavailable(f"{path} has no router tables yet (written by an older sidecar)")
    except sqlite3.Error as exc:
        raise Unavailable(f"cannot read {path}: {exc}") from exc
    return conn


def read_rules(data_dir: Path) -> list[dict[str, Any]]:
    conn = _connect(data_dir)
    try:
        rules = [json.loads(d) for (d,) in conn.execute("SELECT data FROM router_rules")]
    finally:
        conn.close()
    return sorted(rules, key=lambda r: (r.get("weight", 0), r.get("name", "")))


def read_deliveries(data_dir: Path, *, status: str | None = None, target: str | None = None,
                    since: float | None = None, after_seq: int | None = None,
                    limit: int = DEFAULT_LIMIT, until: float | None = None) -> tuple[list[dict[str, Any]], int | None, bool]:
    """The audit's rows as dicts of :data:`_COLS`, oldest first, through the bridge method's own
    reader (:func:`sidecar.router.io.storage.list_deliveries`): the newest ``limit`` rows, or with
    ``after_seq`` the first ``limit`` rows after it.  Returns ``(rows, next, older)``: ``next`` =
    the ``--after`` of the following page (None: no more rows; always None for the newest rows),
    ``older`` = the newest rows were cut: older rows match too (always False with ``after_seq``)."""
    from sidecar.router.io.storage import list_deliveries

    limit = max(1, limit)
    conn = _connect(data_dir)
    try:
        found = list_deliveries(conn, status=status, target=target, since=since,
                                after_seq=after_seq, limit=limit + 1,
                                newest=after_seq is None, until=until)
    except sqlite3.Error as exc:
        raise Unavailable(f"cannot read the deliveries of {data_dir}: {exc}") from exc
    finally:
        conn.close()
    cut = len(found) > limit  # one row more than shown was asked for: is there more?
    if after_seq is None:  # the newest rows, oldest first: the extra one is the oldest
        rows, nxt, older = found[-limit:], None, cut
    else:
        rows, nxt, older = found[:limit], (found[limit - 1].seq if cut else None), False
    return [{c: getattr(d, c) for c in _COLS} for d in rows], nxt, older


def _utc(t: float | None) -> str:
    return "" if t is None else datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M:%S")


def _next_page(args: argparse.Namespace, data_dir: Path, nxt: int) -> str:
    """The command that prints the next page: the same data dir, filters and limit (a newcomer
    pasted the bare ``--after N`` and read the per-user default data dir instead)."""
    import shlex

    parts = ["sidecar", "deliveries", "--data-dir", str(data_dir)]
    for flag, value in (("--status", args.status), ("--target", args.target)):
        if value is not None:
            parts += [flag, str(value)]
    for flag, t in (("--since", args.since), ("--until", args.until)):  # a span would move: pin the instant
        if t is not None:
            parts += [flag, datetime.fromtimestamp(t, UTC).isoformat().replace("+00:00", "Z")]
    parts += ["--limit", str(args.limit), "--after", str(nxt)]
    return shlex.join(parts)


def run(args: argparse.Namespace) -> int:
    from sidecar.config import default_data_dir
    from sidecar.cli.why import pipe_console_class

    name = f"sidecar {args.cmd}"
    nxt: int | None = None
    older = False
    summary: dict[str, Any] | None = None
    data_dir = Path(args.data_dir or default_data_dir())
    try:
        if args.cmd == "rules":
            rows = read_rules(data_dir)
        else:
            show_rows = args.rows or args.limit is not None or args.after is not None
            args.limit = args.limit or DEFAULT_LIMIT
            filters = dict(status=args.status, target=args.target, since=args.since, until=args.until)
            summary = read_summary(data_dir, **filters)
            rows = []
            if show_rows:
                rows, nxt, older = read_deliveries(data_dir, after_seq=args.after, limit=args.limit, **filters)
            elif args.json:
                sys.stdout.write(json.dumps(summary, ensure_ascii=False) + "\n")
                return 0
    except Unavailable as exc:
        print(f"{name}: {exc}", file=sys.stderr)
        return 2
    if args.json:
        for row in rows:
            sys.stdout.write(json.dumps(row, ensure_ascii=False) + "\n")
        if nxt is not None:
            print(f"{name}: more rows: --after {nxt}", file=sys.stderr)
        if older:
            print(f"{name}: the newest {len(rows)} rows; older rows exist: --after 0 pages from the "
                  "oldest", file=sys.stderr)
        return 0
    from rich.table import Table

    console = pipe_console_class()(width=None if sys.stdout.isatty() else 200)
    if summary is not None:
        print_summary(console, summary)  # "No deliveries match." itself when nothing does
        if not rows:
            if summary["total"] and args.after is not None:
                console.print(f"No rows after seq {args.after}.")
            return 0
    elif not rows:
        console.print("No rules.")
        return 0
    if args.cmd == "rules":
        table = Table(title="Routing rules (applied by weight, then name)", title_justify="left")
        for col in ("weight", "name", "enabled", "conditions", "actions", "throttle"):
            table.add_column(col, overflow="fold")
        for r in rows:
            cond = {k: v for k, v in (r.get("conditions") or {}).items() if v not in (None, [], {})}
            acts = ", ".join(a["target"] + (f" [{a['template']}]" if a.get("template") else "")
                             for a in r.get("actions") or [])
            thr = r.get("throttle_seconds")
            table.add_row(str(r.get("weight", 0)), r.get("name", ""), "yes" if r.get("enabled", True) else "no",
                          json.dumps(cond, ensure_ascii=False), acts, f"{thr:g} s" if thr else "")
    else:
        title = f"Deliveries: the newest {len(rows)} (oldest first)" if older else "Deliveries (oldest first)"
        table = Table(title=title, title_justify="left")
        for col in ("event (UTC)", "event", "target", "status", "tries", "rule", "id"):
            table.add_column(col, no_wrap=True)
        table.add_column("note / error", overflow="fold", min_width=20)
        styles = {"delivered": "green", "failed": "red", "pending": "yellow"}
        for r in rows:
            table.add_row(_utc(r["event_at"]), f"{r['source']}/{r['subject']}/{r['action']}",
                          r["target"], r["status"], str(r["attempts"]), r["rule"] or "(built-in)",
                          r["id"], r["last_error"] or r["note"] or "", style=styles.get(r["status"]))
    console.print(table)
    if nxt is not None:
        console.print(f"More rows: {_next_page(args, data_dir, nxt)}")
    if older:  # the newest rows were shown: say that older ones exist and how to page them
        console.print(f"Older rows exist; from the oldest: {_next_page(args, data_dir, 0)} "
                      "(or --since, a larger --limit)")
    return 0


def read_summary(data_dir: Path, **filters: Any) -> dict[str, Any]:
    """:func:`sidecar.router.io.audit_summary.summarise` on the data dir's database (read-only)."""
    from sidecar.router.io.audit_summary import summarise

    conn = _connect(data_dir)
    try:
        return summarise(conn, **filters)
    except sqlite3.Error as exc:
        raise Unavailable(f"cannot read the deliveries of {data_dir}: {exc}") from exc
    finally:
        conn.close()


def _age(seconds: float) -> str:
    """1 h 05 min / 3 min 20 s / 12 s: how a person reads an age."""
    s = int(seconds)
    if s >= 3600:
        return f"{s // 3600} h {s % 3600 // 60:02d} min"
    return f"{s // 60} min {s % 60:02d} s" if s >= 60 else f"{s} s"


def print_summary(console: Any, summary: dict[str, Any]) -> None:
    """The summary as a shift lead reads it: a target × status table, the oldest pending, the reasons."""
    from rich.table import Table

    from sidecar.router.io.audit_summary import STATUS_ORDER

    if not summary["total"]:
        console.print("No deliveries match.")
        return
    console.print(f"Deliveries: {summary['total']} rows; the audit's last write at {utc(summary['as_of'])} UTC")
    t = Table(title="By target and status", title_justify="left")
    t.add_column("target", no_wrap=True)
    for st in STATUS_ORDER:
        t.add_column(st, justify="right")
    for tgt, by in summary["counts"].items():
        t.add_row(tgt, *(str(by.get(st, "")) for st in STATUS_ORDER),
                  style="red" if by.get("failed") else ("yellow" if by.get("pending") else None))
    console.print(t)
    p = summary["oldest_pending"]
    if p is None:
        console.print("Nothing pending.")
    else:
        err = f"; last error: {p['last_error']}" if p["last_error"] else ""
        console.print(f"Oldest pending: {p['target']} {p['id']}, event at {utc(p['event_at'])} UTC, "
                      f"{_age(p['age_s'])} before the audit's last write, {p['attempts']} tries{err}",
                      soft_wrap=True)
    if summary["reasons"]:
        r = Table(title="Why deliveries failed or are retrying (grouped)", title_justify="left")
        for col in ("count", "target", "status"):
            r.add_column(col, no_wrap=True, justify="right" if col == "count" else "left")
        r.add_column("reason", overflow="fold", min_width=20)
        for g in summary["reasons"]:
            r.add_row(str(g["count"]), g["target"], g["status"], g["reason"])
        console.print(r)
        if summary["reasons_more"]:
            console.print(f"… and {summary['reasons_more']} more reasons (--json lists the top 10; "
                          "filter with --target/--status)")
    else:
        console.print("No failures.")
