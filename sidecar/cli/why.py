"""``sidecar why TU RU``: a pair's decision log from the data dir, for a shift lead (DESIGN §13).

Reads ``<data dir>/sidecar.db`` read-only (:func:`sidecar.store.decisions.read_data_dir`), so it
works while the sidecar runs and changes nothing.  Prints a table (``rich``), oldest first:
time (UTC), task type, trigger, outcome and a sentence saying why; ``--json`` prints one JSON
object per line instead (times in unix seconds).  ``--since`` takes an ISO-8601 instant
(``2026-11-30T08:00:00Z``) or a span back from now (``90m``, ``6h``, ``2d``) — a span counts from
the wall clock, so for a replay's data dir (virtual time) give the instant.

When nothing is printed it says which of two cases it is: the pair has **no rows at all** in the
log, or it has rows but **none since** ``--since`` (then it names how many there are and the
newest one's time).  A data dir without ``sidecar.db`` whose sub-folders hold one (a replay's
``--data-dir``: one folder per machine, ``m1``, ``m2``…) is named in the error.  The table keeps
ids and times on one line (``no_wrap``) and folds only the sentence, also when piped.

Exit codes: 0 (also when the pair has no decisions: the text says so), 2 bad arguments or no
readable decision log in the data dir (one line on stderr).
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from datetime import UTC, datetime
from pathlib import Path

from sidecar.core.clock import WallClock
from sidecar.runtime.decisions import RETENTION_S, explain

_SPAN = re.compile(r"^(\d+(?:\.\d+)?)([smhd])$")
_UNIT_S = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def add_parser(sub: argparse._SubParsersAction) -> None:
    w = sub.add_parser("why", help="print a TU+RU pair's decisions (the decision log)")
    w.add_argument("tu", help="the profile (TU) id")
    w.add_argument("ru", help="the customer (RU) id")
    w.add_argument("--data-dir", type=Path, help="the sidecar's data dir (default: per-OS app data)")
    w.add_argument("--since", help="only decisions at or after: an ISO-8601 instant or a span back from "
                                   "now (90m, 6h, 2d; the wall clock — for a replay's data dir give the "
                                   "instant). Without it: every decision the log holds for the pair")
    w.add_argument("--json", action="store_true", help="JSON lines instead of a table")


def parse_since(text: str | None, now: float) -> float | None:
    """``--since`` → unix seconds; ValueError with a readable message when it is neither form."""
    if text is None:
        return None
    m = _SPAN.match(text.strip())
    if m:
        return now - float(m.group(1)) * _UNIT_S[m.group(2)]
    try:
        dt = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"--since {text!r}: not an ISO-8601 instant nor a span like 90m, 6h, 2d") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.timestamp()


def no_rows_sentence(tu: str, ru: str, every: list[dict], since: float | None) -> str:
    """Why nothing is shown: the pair has no rows at all, or none at/after ``since`` (unix s)."""
    days = RETENTION_S / 86400
    if not every:
        return (f"No decisions at all for TU {tu} and RU {ru} in this database (the log keeps "
                f"{days:.0f} days; check the ids and the data dir).")
    assert since is not None  # rows exist, none shown: only a --since can hide them
    return (f"No decisions for TU {tu} and RU {ru} since {_utc(since)} UTC; the database has "
            f"{len(every)} for this pair, the newest at {_utc(every[-1]['at'])} UTC (a replay runs on "
            "virtual time: give --since as an ISO-8601 instant).")


def _machine_hint(data_dir: Path) -> str:
    """A replay's ``--data-dir`` holds one folder per machine: name them."""
    try:
        subs = sorted(p.parent.name for p in data_dir.glob("*/sidecar.db"))
    except OSError:
        return ""
    if not subs:
        return ""
    return f" (a replay's data dir: give one machine's folder, e.g. {data_dir / subs[0]}; here: {', '.join(subs)})"


def _utc(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M:%S")


def run(args: argparse.Namespace) -> int:
    from sidecar.config import default_data_dir
    from sidecar.store.decisions import DecisionLogUnavailable, read_data_dir

    try:
        since = parse_since(args.since, WallClock().now())  # the one clock (DESIGN §5)
    except ValueError as exc:
        print(f"sidecar why: {exc}", file=sys.stderr)
        return 2
    data_dir = Path(args.data_dir or default_data_dir())
    try:
        every = read_data_dir(data_dir, args.tu, args.ru)
    except DecisionLogUnavailable as exc:
        print(f"sidecar why: {exc}{_machine_hint(data_dir)}", file=sys.stderr)
        return 2
    rows = every if since is None else [r for r in every if r["at"] >= since]
    if args.json:
        for row in rows:
            sys.stdout.write(json.dumps({"tu": args.tu, "ru": args.ru, **row, "text": explain(row)},
                                        ensure_ascii=False) + "\n")
        return 0
    from rich.table import Table

    # piped or in a file: wide enough that no id is cut; a terminal folds only the sentence
    console = pipe_console_class()(width=None if sys.stdout.isatty() else 200)
    if not rows:
        console.print(no_rows_sentence(args.tu, args.ru, every, since), soft_wrap=True)
        return 0
    table = Table(title=f"Why: TU {args.tu} · RU {args.ru}", title_justify="left")
    for col in ("time (UTC)", "task type", "trigger", "outcome"):
        table.add_column(col, no_wrap=True)  # ids and times stay whole, also when piped
    table.add_column("why", overflow="fold", min_width=30)
    for row in rows:
        outcome = row["outcome"]
        style = "green" if outcome == "created" else ("yellow" if outcome == "miss" else None)
        table.add_row(_utc(row["at"]), row["type"], row["source"], outcome, explain(row), style=style)
    console.print(table)
    return 0


def pipe_console_class() -> type:
    """rich's Console with a broken pipe raised as BrokenPipeError (rich is imported here, on
    first use, so that ``sidecar serve`` does not load it)."""
    from rich.console import Console

    class PipeConsole(Console):
        """rich's Console, but a closed output pipe raises :class:`BrokenPipeError` for
        ``sidecar.cli.main.main`` (exit 141, quietly) instead of rich's ``SystemExit(1)``."""

        def on_broken_pipe(self) -> None:
            raise BrokenPipeError("the output pipe was closed")

    return PipeConsole

