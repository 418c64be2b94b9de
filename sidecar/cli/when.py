"""The one time syntax of every ``--since`` / ``--until`` of the sidecar's CLIs.

Rules / theory of operation
---------------------------
* A value is either an **ISO-8601 instant** — ``2026-11-30T08:00:00Z``, ``2026-11-30T10:00+02:00``,
  ``2026-11-30 08:00`` or a bare date ``2026-11-30`` (midnight); an instant without ``Z``/offset
  is **UTC** (the store keeps UTC; a shift lead's local time would silently shift by hours) — or
  a **span** meaning "that long ago": an amount and a unit ``s``/``m``/``h``/``d``, or several in
  order of size (``90s``, ``15m``, ``2h``, ``1d``, ``1h30m``, ``1d12h``, ``1.5h``).  A span counts
  back from ``now`` (the caller's clock: the wall clock for a live data dir; a replay's data dir
  runs on virtual time, so give it an instant).
* :func:`parse_when` returns unix seconds (UTC) and raises :class:`ValueError` whose message is the
  one line the CLI prints before exiting 2 (empty, negative, zero-length, unknown unit, a unit
  twice or out of order, a date that does not exist).
* :func:`when_type` wraps it as an argparse ``type`` so argparse prints that line and exits 2.
  Before this module ``senders history --since`` took unix seconds while ``why`` and
  ``deliveries`` took an instant or a single-unit span (docs/decisions.md).
"""
from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable
from datetime import UTC, datetime

#: seconds per span unit, largest first (the order a combined span must follow)
UNIT_S = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0}
_PART = re.compile(r"(\d+(?:\.\d+)?)([dhms])")
_SPAN = re.compile(r"^(?:\d+(?:\.\d+)?[dhms])+$")
HELP = ("an ISO-8601 instant (2026-11-30T08:00:00Z; without Z/offset = UTC) or a span back from now "
        "(90s, 15m, 2h, 1d, 1h30m)")


def parse_span(text: str) -> float:
    """``1h30m`` → 5400.0 seconds.  ValueError: not a span, zero, or units repeated/out of order."""
    t = text.strip().lower()
    if not _SPAN.match(t):
        raise ValueError(f"{text!r} is not a span like 90s, 15m, 2h, 1d, 1h30m")
    total, last = 0.0, math.inf
    for amount, unit in _PART.findall(t):
        if UNIT_S[unit] >= last:
            raise ValueError(f"{text!r}: give the units once each, largest first (like 1d2h30m)")
        last = UNIT_S[unit]
        total += float(amount) * UNIT_S[unit]
    if total <= 0:
        raise ValueError(f"{text!r}: a span must be longer than zero")
    return total


def parse_when(text: str, now: float) -> float:
    """An instant or a span (see the module) → unix seconds (UTC); ``now`` in unix seconds."""
    t = text.strip()
    if not t:
        raise ValueError("empty time: give an ISO-8601 instant or a span like 90m")
    if t[0].isdigit() and _SPAN.match(t.lower()):
        return now - parse_span(t)
    try:
        dt = datetime.fromisoformat(t[:-1] + "+00:00" if t[-1:] in "zZ" else t)
    except ValueError:
        raise ValueError(f"{text!r} is neither an ISO-8601 instant (2026-11-30T08:00:00Z) nor a span "
                         "(90s, 15m, 2h, 1d, 1h30m)") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)  # naive = UTC: the store's times are UTC
    return dt.timestamp()


def when_type(now: Callable[[], float]) -> Callable[[str], float]:
    """An argparse ``type`` for ``--since``/``--until``: unix seconds, or one line and exit 2.
    ``now`` is read when the value is parsed (the one clock, DESIGN §5)."""
    def parse(text: str) -> float:
        try:
            return parse_when(text, now())
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    return parse


def add_window(p: argparse.ArgumentParser, now: Callable[[], float], what: str,
               until: bool = True, without: str = "") -> None:
    """Add ``--since`` (and ``--until``) in the one syntax to a sub-parser; ``what`` names the rows,
    ``without`` says what is shown when the option is left out."""
    p.add_argument("--since", type=when_type(now), metavar="WHEN",
                   help=f"only {what} at or after WHEN: {HELP}" + (f". Without it: {without}" if without else ""))
    if until:
        p.add_argument("--until", type=when_type(now), metavar="WHEN",
                       help=f"only {what} before WHEN (same syntax)")


def utc(t: float | None) -> str:
    """Unix seconds → ``YYYY-MM-DD HH:MM:SS`` (UTC); ``None`` → ``—``."""
    return "—" if t is None else datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M:%S")
