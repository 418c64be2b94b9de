"""The report's "what happened and when": a replay's timeline in words, at virtual times.

Rules / theory of operation
---------------------------
* :func:`timeline` reads the trace lines (``shared/scenarios/README.md``) — logins, logouts and
  shift changes, crashes, Stack faults as one episode each, sender health rows — and returns
  plain items ``{at, clock, what, detail}`` ordered by time; :mod:`electron_stub.report`
  puts them in the summary and :mod:`electron_stub.report_view` draws them.
* Sender health rows read as what they are (:func:`_sender_row`): only a row whose code
  changes the sender's state reads ``from → to``; a failed send (a counter), a warm-up or an
  extension reads ``crm-hook failed send`` — the trace lines themselves are unchanged.
* Instants: ``at`` is seconds from the scenario's start; :func:`clock_of` / :func:`whole_s`
  round them the same way for the clock and "+s" columns.
"""
from __future__ import annotations

import math
from datetime import datetime, timezone
from typing import Any


def whole_s(at: float | None) -> int:
    """A trace instant rounded to whole seconds, half up — the one rounding both the clock column
    and the ``+s`` column use, so they always agree."""
    return math.floor((at or 0.0) + 0.5)


def clock_of(start: float, at: float | None, *, seconds: bool = True) -> str:
    """A trace instant (seconds from the start) as the UTC wall time of the scenario, HH:MM:SS
    (``seconds=False``: HH:MM), rounded like :func:`whole_s`."""
    t = datetime.fromtimestamp(start + whole_s(at), timezone.utc)
    return t.strftime("%H:%M:%S" if seconds else "%H:%M")


def _span(start: float, a: float, b: float | None) -> tuple[str, str]:
    """(``08:06``, ``08:12``) of a fault from ``a`` to ``b`` (None: it lasted to the end)."""
    return clock_of(start, a, seconds=False), ("the end" if b is None else clock_of(start, b, seconds=False))


def _stack_fault(start: float, mode: str, value: float, a: float, b: float | None) -> dict[str, Any]:
    """One Stack fault episode in words, e.g. "Stack: 30 % of writes failing from 08:06 to 08:12"."""
    fr, to = _span(start, a, b)
    if mode == "down":
        sep = "–" if b is not None else " until "
        return {"what": "Stack down", "detail": f"Stack down {fr}{sep}{to} (writes refused, queued and retried)"}
    if mode == "error_rate":
        return {"what": "Stack errors", "detail": f"Stack: {value * 100:.0f} % of writes failing from {fr} to {to}"}
    return {"what": "Stack slow", "detail": f"Stack: answers {value:g} s late from {fr} to {to}"}


#: sender history codes (seed 000's and ours, sidecar.senders.health) in words
SENDER_CODES = {109: "failed send", 104: "warm-up sent", 105: "warm-up confirmed",
                102: "cooldown extended", 101: "cooldown started", 100: "cooldown finished",
                103: "Need Check", 106: "recovered by hand"}
#: the codes whose row is the sender's state change; the others count or note within a state
SENDER_STATE_CODES = frozenset({100, 101, 103, 106})


def _sender_row(x: dict[str, Any], state: dict[str, str]) -> dict[str, Any]:
    """One ``sender.transition`` trace line as a timeline item.  Every line of a health step
    carries the state AFTER the step, so a failed send at the threshold read ``active →
    cooldown`` and the cooldown's own start ``cooldown → cooldown``, and a failed send below it
    ``active → active``: here only a row whose code changes the state (:data:`SENDER_STATE_CODES`)
    reads ``from → to``, from the state such rows left (``state``, updated); a failed send,
    a warm-up or an extension reads as what it is (``crm-hook failed send``, detail
    ``failed_in_row=1``).  An unknown code that changes the state still shows the change."""
    sender, to, code = x.get("sender"), x.get("to"), x.get("code")
    before = state.setdefault(str(sender), x.get("from") or "active")  # its first row: as traced
    label = SENDER_CODES.get(code) if isinstance(code, int) else None
    note = x.get("note") or ""
    if code in SENDER_STATE_CODES or (label is None and to != before):
        state[str(sender)] = str(to)
        head = label or f"code {code}"
        if to != before:
            return {"what": f"{sender} {before} → {to}", "detail": f"{head}: {note}" if note else head}
        return {"what": f"{sender} {head} ({to}, counters reset)" if code == 106 else f"{sender} {head} ({to})",
                "detail": note}
    return {"what": f"{sender} {label or f'code {code}'}", "detail": note}


def timeline(lines: list[dict[str, Any]], start: float) -> list[dict[str, Any]]:
    """What happened and when, in words: logins and logouts (machine, project, TU, operator; a new
    operator on a TU = shift change), crashes (with the restart), Stack faults as one episode each
    ("Stack down 08:41–08:44", "Stack: 30 % of writes failing from 08:06 to 08:12", latency
    likewise; ``up`` ends ``down``, a rate or latency of 0 ends that fault), sender health rows
    (:func:`_sender_row`: state changes as ``a → b``, the rest as what they are).  Items are
    ordered by their (start) time."""
    out: list[dict[str, Any]] = []
    operator_of: dict[str, str] = {}
    fault_since: dict[str, tuple[float, float]] = {}  # mode -> (at, value) of the open episode
    sender_state: dict[str, str] = {}  # sender -> its state as the state-changing rows left it

    def add(at: float | None, item: dict[str, Any]) -> None:
        out.append({"at": at, "clock": clock_of(start, at), **item})

    for x in lines:
        ev, at = x.get("event"), x.get("at")
        where = f"{x.get('machine') or '?'}: {x.get('project')} {x.get('tu')}"
        if ev == "login":
            tu, op = x.get("tu"), x.get("operator")
            before = operator_of.get(tu)
            operator_of[tu] = op
            if before is not None and before != op:
                add(at, {"what": "shift change", "detail": f"{where}: {before} → {op}"})
            else:
                add(at, {"what": "login", "detail": f"{where}: {op} logged in"})
        elif ev == "logout":
            add(at, {"what": "logout", "detail": f"{where}: {operator_of.get(x.get('tu')) or '?'} logged out"})
        elif ev == "crash":
            machines = ", ".join(x.get("machines") or []) or "no sidecar running"
            add(at, {"what": "crash", "detail": f"{machines} killed; restarted and logged in again"})
        elif ev == "stack":
            mode, value = x.get("mode"), float(x.get("value") or 0.0)
            key = "down" if mode in ("down", "up") else str(mode)
            ends = mode == "up" or (mode in ("error_rate", "latency") and value == 0.0)
            if key in fault_since:  # a new value or the end closes the open episode
                a, v = fault_since.pop(key)
                add(a, _stack_fault(start, key, v, a, at))
            if not ends:
                fault_since[key] = (at or 0.0, value)
        elif ev == "sender.transition":
            add(at, _sender_row(x, sender_state))
    for key, (a, v) in fault_since.items():
        add(a, _stack_fault(start, key, v, a, None))
    out.sort(key=lambda item: item["at"] or 0.0)
    return out
