"""``sidecar why TU RU``: the whole story of a pair from the data dir, for a shift lead (DESIGN §13).

Reads ``<data dir>/sidecar.db`` read-only (:func:`sidecar.store.story.read_data_dir`), so it
works while the sidecar runs and changes nothing.  The story merges the decision log
(candidates, refusals, chain steps), the tasks (created, overdue at the deadline, closed with
the reason) and the pair's marker writes to Stack, oldest first: a table (``rich``) of time
(UTC), kind and a sentence; ``--json`` prints one JSON object per line instead (``tu``, ``ru``,
``at`` unix seconds, ``kind``, ``text``, ``details``).  ``--since``/``--until`` take the one time
syntax of :mod:`sidecar.cli.when` (an ISO-8601 instant, naive = UTC, or a span back from now:
``90m``, ``1h30m``) — a span counts from the wall clock, so for a replay's data dir (virtual
time) give the instant.

When nothing is printed it says which of two cases it is: the pair has **no entries at all**,
or it has entries but **none in the window** (then it names how many there are and the newest
one's time).  A data dir without ``sidecar.db`` whose sub-folders hold one (a replay's
``--data-dir``: one folder per machine, ``m1``, ``m2``…) is named in the error.  The table keeps
ids and times on one line (``no_wrap``) and folds only the sentence, also when piped.

Exit codes: 0 (also when the pair has no entries: the text says so), 2 bad arguments or no
readable decision log in the data dir (one line on stderr).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import msgspec

from sidecar.cli.when import add_window, utc as _utc
from sidecar.core.clock import WallClock
from sidecar.runtime.decisions import RETENTION_S

_STYLE = {"created": "green", "closed": "cyan", "overdue": "bold yellow", "refused": "yellow",
          "removed": "yellow", "no_list": "bold red", "marker": "magenta"}


def add_parser(sub: argparse._SubParsersAction) -> None:
    w = sub.add_parser("why", help="print a TU+RU pair's story: decisions, tasks created, overdue and "
                                   "closed, chain steps and markers")
    w.add_argument("tu", help="the profile (TU) id")
    w.add_argument("ru", help="the customer (RU) id")
    w.add_argument("--data-dir", type=Path, help="the sidecar's data dir (default: per-OS app data)")
    add_window(w, WallClock().now, "entries",
               without=f"every entry the data dir holds for the pair (the decision log keeps "
                       f"{RETENTION_S / 86400:.0f} days)")  # the one clock (DESIGN §5); a span is wall time
    w.add_argument("--json", action="store_true", help="JSON lines instead of a table")


def no_rows_sentence(tu: str, ru: str, every: list, since: float | None,
                     until: float | None = None) -> str:
    """Why nothing is shown: the pair has no entries at all, or none in the window (unix s)."""
    days = RETENTION_S / 86400
    if not every:
        return (f"No decisions at all for TU {tu} and RU {ru} in this database, and no tasks or markers "
                f"(the decision log keeps {days:.0f} days; check the ids and the data dir).")
    window = (f"since {_utc(since)} UTC" if since is not None else "") + \
             (f"{' and ' if since is not None else ''}before {_utc(until)} UTC" if until is not None else "")
    return (f"No decisions for TU {tu} and RU {ru} {window}; the database has "
            f"{len(every)} entries for this pair, the newest at {_utc(every[-1].at)} UTC (a replay runs on "
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


def run(args: argparse.Namespace) -> int:
    from sidecar.config import default_data_dir
    from sidecar.store.decisions import DecisionLogUnavailable
    from sidecar.store.story import read_data_dir

    since, until = getattr(args, "since", None), getattr(args, "until", None)
    data_dir = Path(args.data_dir or default_data_dir())
    try:
        every = read_data_dir(data_dir, args.tu, args.ru)
    except DecisionLogUnavailable as exc:
        print(f"sidecar why: {exc}{_machine_hint(data_dir)}", file=sys.stderr)
        return 2
    rows = [e for e in every if (since is None or e.at >= since) and (until is None or e.at < until)]
    if args.json:
        enc = msgspec.json.Encoder()
        for e in rows:
            sys.stdout.write(enc.encode({"tu": args.tu, "ru": args.ru, **msgspec.structs.asdict(e)}).decode() + "\n")
        return 0
    from rich.table import Table

    # piped or in a file: wide enough that no id is cut; a terminal folds only the sentence
    console = pipe_console_class()(width=None if sys.stdout.isatty() else 200)
    if not rows:
        console.print(no_rows_sentence(args.tu, args.ru, every, since, until), soft_wrap=True)
        return 0
    table = Table(title=f"Why: TU {args.tu} · RU {args.ru} — the pair's story, oldest first",
                  title_justify="left")
    for col in ("time (UTC)", "kind", "outcome"):
        table.add_column(col, no_wrap=True)  # ids and times stay whole, also when piped
    table.add_column("what happened", overflow="fold", min_width=30)
    for e in rows:
        outcome = e.details.get("outcome") or e.details.get("reason") or e.details.get("status") or ""
        table.add_row(_utc(e.at), e.kind, outcome, e.text, style=_STYLE.get(e.kind))
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

