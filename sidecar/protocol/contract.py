"""The parts of the bridge contract (DESIGN §3–§4) that are no method's params or
answer: the ready line ``sidecar serve`` prints, the error ``data`` object, the capabilities the
``auth`` answer lists (:data:`CAPABILITIES`; the version is :data:`sidecar.PROTOCOL_VERSION`), and the exit codes'
table (``sidecar serve --help``, the README and ``sidecar schema``'s ``ExitCode``,
:mod:`sidecar.cli.schema_tables`) — here, below the command line, so the schema reads it without
an import circle."""
from __future__ import annotations

from typing import Literal

import msgspec


EXIT_CODES = """\
exit codes:
  0    shutdown (sidecar.shutdown, SIGTERM, SIGINT, SIGHUP, stdin EOF, parent death) within 2 s; the log names any abandoned close
  1    unexpected internal error (logged with its traceback)
  2    bad setting or command line (one line on stderr names it); nothing was started
  3    the data dir is locked by another running sidecar
  4    the database cannot be opened (unreadable, or a newer schema; it is left untouched)
  5    shutdown did not finish within 1.5 s and was forced (unsent Stack writes stay queued)
  6    a step could not be saved (or crashed): nothing of it was kept; a restart restores it all
  7    the database is damaged (PRAGMA quick_check); nothing was written to it: run `sidecar repair`
  128+N  a second signal N during shutdown ended the process at once (143 SIGTERM, 130 SIGINT)
"""


#: what this sidecar supports beyond its protocol's minor, named in the ``auth`` answer's
#: ``capabilities`` (DESIGN §4): name → meaning (``sidecar schema``'s ``Capability``).  A new
#: one is a row here (and a minor bump); a client lists in its own ``capabilities`` those it serves.
CAPABILITIES: dict[str, str] = {
    "platform.requests": "the sidecar asks a step's several platform requests in ONE platform.requests"
                         " round trip (virtual clock); a client that lists it serves them, one that sends"
                         " capabilities without it is asked one platform.request at a time",
    "platform.events": "a burst of raw events may go as one platform.events {events: [...]} request",
    "shutdown": "sidecar.shutdown stops the sidecar gracefully: answered once the store is closed, then"
                " the connection closes 1001 and the process exits 0 (DESIGN §3; the graceful path on"
                " Windows, where child.kill() is a hard kill)",
    "logs": "logs.subscribe {level} sends this connection the sidecar's log records as `log` notifications"
            " outside the stream (no seq, never replayed; a reconnecting client subscribes again)",
}


class ReadyLine(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """The one JSON line ``sidecar serve`` prints on stdout when it listens (DESIGN §3); logs go
    to stderr.  ``port``: the bridge's loopback port; ``protocol``: the contract's MAJOR as an
    integer (unchanged since before versioning, so older readers keep reading it; the whole
    ``"MAJOR.MINOR"`` is the ``auth`` answer's)."""

    event: Literal["ready"]
    port: int
    pid: int
    version: str
    protocol: int


class ErrorData(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    """An error's ``data``.  ``field`` (every -32602: ``InputError.field``, :mod:`sidecar.domain.errors`): the refused
    params field — a dotted path for nested items (``items.0.sender``), a JSON pointer into the
    params for a raw event's value (``/data/sentAt``), ``params`` for the request as a whole;
    ``now`` / ``next_due``: the clock
    after a partial ``clock.advance_to`` and its next timer (unix seconds); ``taken``: events of
    a ``platform.events`` handled before it was refused; ``supported``: the protocol versions
    the sidecar speaks (an ``auth`` refused for its ``protocol``, then close 4426)."""

    field: str | msgspec.UnsetType = msgspec.UNSET
    now: float | None | msgspec.UnsetType = msgspec.UNSET
    next_due: float | None | msgspec.UnsetType = msgspec.UNSET
    taken: int | msgspec.UnsetType = msgspec.UNSET
    supported: list[str] | msgspec.UnsetType = msgspec.UNSET
