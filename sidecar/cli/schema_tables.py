"""The tables of the bridge contract that are not a method's params or answer (DESIGN §3–§4): the
websocket close codes, the process exit codes, the JSON-RPC error codes and
the closed enums of the values the sidecar sends; the ready line and the error ``data`` object
are Structs of :mod:`sidecar.protocol.contract`.  :mod:`sidecar.cli.schema` puts them all into
``sidecar schema`` (in ``cli/``: the export stands on the bridge, the router and the senders,
which ``protocol/`` may not import).

* Close and error codes are the bridge's own constants (:mod:`bridge.errors`), described here
  once for the Electron team; exit codes are read from ``sidecar serve --help``'s table.
* :data:`ENUMS` closes a field of an outbound ``$def`` to the values the code can produce: each
  set is the code's own (``TaskType``, ``CloseReason``, the router's priorities and statuses, the
  senders' states), except the task sources, which are string literals spread over the services —
  :data:`TASK_SOURCES` lists them and a test scans the services for a literal missing here.
  The wire Structs keep ``str`` (a value outside the set would fail a step at ``to_wire``, exit 6);
  the frames a replay captures are validated against these enums instead.
"""
from __future__ import annotations

import re
from typing import Any

from bridge import errors as E
from sidecar.domain.tasks import CloseReason, TaskType
from sidecar.protocol.contract import CAPABILITIES, EXIT_CODES as EXIT_TEXT, ErrorData, ReadyLine  # noqa: F401 - re-exported
from sidecar.router.model import CHANNELS, PRIORITIES, Status
from sidecar.senders.health import StateName


CLOSE_CODES: dict[int, str] = {
    E.CLOSE_GOING_AWAY: "the sidecar shuts down: every request read was answered first",
    E.CLOSE_TOO_BIG: "a frame exceeded the hard frame cap (sent by the websocket library)",
    E.CLOSE_UNAUTHORIZED: "the first frame was missing, malformed, not auth, or the token was wrong",
    E.CLOSE_FORBIDDEN_ORIGIN: "reserved, not sent: a foreign Origin / non-loopback Host gets HTTP 403",
    E.CLOSE_AUTH_TIMEOUT: "no auth frame within the auth timeout",
    E.CLOSE_REPLACED: "a newer connection authenticated: one client at a time; do not reconnect",
    E.CLOSE_UNSUPPORTED_PROTOCOL: "the auth's protocol names a major this sidecar does not speak (error"
                                  " data.supported lists what it does): do not reconnect, surface the error",
}

def _exit_codes() -> dict[int, str]:
    """``sidecar serve --help``'s table (:data:`sidecar.protocol.contract.EXIT_CODES`), the one source: each
    ``  N  meaning`` row, and the ``128+N`` row as its two usual values (SIGINT, SIGTERM)."""
    text = EXIT_TEXT
    rows = {int(n): m.strip() for n, m in re.findall(r"^  (\d+)\s+(.*)$", text, re.M)}
    signal_row = re.search(r"^  128\+N\s+(.*)$", text, re.M)
    if signal_row:
        for n, name in ((130, "SIGINT"), (143, "SIGTERM")):
            rows[n] = f"128 + {n - 128} ({name}): {signal_row[1].strip()}"
    return rows


EXIT_CODES: dict[int, str] = _exit_codes()

ERROR_CODES: dict[int, str] = {
    E.PARSE_ERROR: "the frame is not JSON (or not UTF-8, or nested too deep)",
    E.INVALID_REQUEST: "JSON but not a JSON-RPC 2.0 object (a batch array included), or auth again",
    E.METHOD_NOT_FOUND: "unknown method",
    E.INVALID_PARAMS: "bad params: data.field names the field; nothing was changed",
    E.INTERNAL_ERROR: "a step failed: nothing of it was kept; the sidecar exits 6 (restart it, it restores clean)",
    E.SHUTTING_DOWN: "the sidecar is stopping: nothing of this request was done (send it to the next process)",
    E.CUT_SHORT: "the sidecar stopped during this request: what it did is kept, data says how far"
                 " (now: the clock it reached; taken: the events it took)",
    E.UNAUTHORIZED: "the first frame was not a valid auth (the connection closes with 4401)",
}

#: every ``source`` a task (and a decision row) can carry: the services' triggers (seed 003/001)
TASK_SOURCES: tuple[str, ...] = (
    "socket", "stats", "check_chat", "check_mail", "scroll_all", "scroll_new", "scroll_active",
    "dialog_created", "chain", "over_60m", "notification", "follow_up_pass",
    "post_chat", "mail_read", "burst", "last_mail_6h",
)
PROJECTS: tuple[str, ...] = ("golden", "chathouse", "prime")
TASK_TYPES = tuple(t.value for t in TaskType)
CLOSE_REASONS = tuple(r.value for r in CloseReason)
VIPS = ("green", "yellow", "red")
SENDER_STATES: tuple[str, ...] = StateName.__args__  # type: ignore[attr-defined]
DELIVERY_STATUSES = tuple(s.value for s in Status)
STACK_WAITING = ("cooldown", "need_check", "resting", "retry")


def _enum(values: tuple[Any, ...], *, null: bool = False) -> dict:
    schema: dict = {"enum": list(values)}
    return {"anyOf": [schema, {"type": "null"}]} if null else schema


#: ``$def`` name → field → the closed schema that replaces msgspec's ``{"type": "string"}``
ENUMS: dict[str, dict[str, dict]] = {
    "TaskView": {"type": _enum(TASK_TYPES), "project": _enum(PROJECTS), "source": _enum(TASK_SOURCES),
                 "vip": _enum(VIPS, null=True)},
    "TaskClosed": {"type": _enum(TASK_TYPES), "reason": _enum(CLOSE_REASONS)},
    "TaskUpdated": {"type": _enum(TASK_TYPES)},
    "SenderState": {"state": _enum(SENDER_STATES), "previous": _enum(("", *SENDER_STATES))},
    "SenderView": {"state": _enum(SENDER_STATES)},
    "DeliveryNote": {"status": _enum(DELIVERY_STATUSES), "priority": _enum(PRIORITIES),
                     "channel": _enum(CHANNELS)},
    "DeliveryRow": {"status": _enum(DELIVERY_STATUSES), "priority": _enum(PRIORITIES),
                    "channel": _enum(CHANNELS)},
    "DecisionRow": {"type": _enum(TASK_TYPES)},
    "StackWaiting": {"state": _enum(STACK_WAITING)},
    "PlatformRequest": {"project": _enum(PROJECTS)},
    "StatusAnswer": {"clock": _enum(("wall", "virtual"))},
    "RulesAnswer": {"match_mode": _enum(("all", "first"))},
}

#: notifications of the resumable stream: ``seq`` (1-based, no gaps) is stamped by the bridge,
#: so the wire Structs default it; on the wire it is always there.  ``log`` is not one: it goes
#: outside the stream, without ``seq`` (:mod:`sidecar.app.log_feed`)
STREAM_METHODS = ("task.created", "task.closed", "task.updated", "chain.attempt", "sender.state", "delivery")


def code_table(codes: dict[Any, str]) -> dict:
    """A closed integer enum whose every value carries its meaning (``oneOf`` of ``const``)."""
    return {"oneOf": [{"const": c, "description": d} for c, d in codes.items()]}
