"""The trace: what the sidecar did, as the harness saw it (``shared/scenarios/README.md``).

Rules / theory of operation
---------------------------
* :class:`Recorder` receives the sidecar's notifications (``task.created``, ``task.closed``,
  ``chain.attempt``, ``sender.state``) and the harness's own actions (``operator.sent``, ``crash``,
  ``login``, ``logout``), keeps every task by ``task_id`` and writes one JSON object per line,
  sorted by ``at`` (seconds from the scenario start, virtual time).
* **Canonical order within an instant** (:func:`line_order`), so two replays of one scenario
  write byte-identical traces (issue 11): the sidecar's notifications and the harness's own
  actions keep their arrival order — one ordered stream, deterministic, and causal (a task's
  ``task.created`` before its ``task.closed``); ``marker.acked`` lines follow them, ordered by
  pair (``tu``, ``ru``) and, within a pair, by arrival.  Stack acknowledges different pairs in
  whatever order the sidecar's concurrent sends land, but one pair's writes in order (its
  ordering lane, DESIGN §9), so this order is the same on every run and keeps each pair's
  set-then-clear sequence.
* Instants come from the notifications themselves (``created_at``, ``closed_at``, ``at``), not
  from when they arrived, so the trace is exact whatever the transport's timing.
* A task announced again with the same ``task_id`` (e.g. a restarted sidecar re-announcing its
  open tasks) is not a new task: it is counted in ``redelivered``.  A ``task.closed`` identical to
  one already seen is counted likewise; a *different* second close of one task is kept in
  ``Task.closes`` so the consistency check can report "closed twice".
* ``task.updated {overdue: true}`` (an answer-awaiting task past its deadline, DESIGN §6) sets
  ``Task.overdue_at`` and adds a ``task.updated`` line once per task (a repeat is counted in
  ``redelivered``).
* ``marker.acked`` lines come from the reference Stack's record of acknowledged marker writes
  (:meth:`Recorder.add_marker_acks`), at the virtual instant the harness was driving.
* ``platform.request`` (README revision 2): one line per request the sidecar made, with
  ``project``, ``tu``, ``method``, ``ru`` where the request names one RU (``params.ru``, or a
  one-element ``ru_ids``), ``ru_ids`` where it names several (Golden's ``chat_history``) and
  ``criteria`` for Prime's ``dialogs``; at the asking step's instant.  Within an instant they
  follow the stream's lines, ordered by TU and, within a TU, by arrival (one TU's step asks in
  order), so the trace stays byte-identical however the TUs' requests interleave.
  :meth:`Recorder.requests_of` counts them for the ``requests`` expectation.
* Keys of each line (README): ``task.created`` task_id, type, project, tu, ru, source,
  deadline (seconds from start), vip, created_at (seconds from start) [, meta];
  ``task.closed`` task_id, type, tu, ru, reason; ``operator.sent`` channel, project, tu, ru,
  task_id; ``marker.acked`` tu, ru, name, value; ``chain.attempt`` tu, ru, step, chance, hit,
  outcome; ``sender.transition`` sender, from, to, code, note.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable

import msgspec

from electron_stub import trace_json


class Task(msgspec.Struct, kw_only=True):
    """One task as the notifications told it.  Instants are unix seconds."""

    task_id: str
    type: str
    project: str
    tu: str
    ru: str
    source: str
    created_at: float
    deadline: float
    vip: str | None = None
    meta: dict = {}
    closed_at: float | None = None
    reason: str | None = None
    closes: list[tuple[float, str]] = []  # every distinct close seen: (closed_at, reason)
    overdue_at: float | None = None  # when the sidecar announced it overdue (task.updated)

    @property
    def is_open(self) -> bool:
        return self.closed_at is None


def _rel(t: float | None, start: float) -> float | None:
    return None if t is None else round(t - start, 3)


class Recorder:
    """Collects the trace of one replay; ``start`` is the scenario start (unix seconds)."""

    def __init__(self, start: float) -> None:
        self.start = start
        self.tasks: dict[str, Task] = {}
        # open tasks by (tu, ru, type): the replay asks after every RU message whether one is
        # open, and a scan of every task ever recorded made that O(n²) over a shift
        self._open: dict[tuple[str, str, str], list[Task]] = {}
        self.lines: list[dict[str, Any]] = []
        # platform requests by (tu, method): [(at unix s, RUs named)] for the requests expectation
        self._requests: dict[tuple[str, str], list[tuple[float, tuple[str, ...]]]] = {}
        self.redelivered = 0
        self.unknown_closes: list[str] = []
        self._sender_state: dict[str, str] = {}
        self.counts = {"task.created": 0, "task.closed": 0, "task.updated": 0, "chain.attempt": 0,
                       "sender.state": 0}

    def _add(self, at: float, event: str, **keys: Any) -> None:
        self.lines.append({"at": _rel(at, self.start), "event": event, **keys})

    # ---- notifications --------------------------------------------------------------------

    def task_created(self, params: dict[str, Any]) -> Task | None:
        """``task.created {seq, task: TaskView}``; returns the new Task, or None when the id is
        already known (a re-announcement)."""
        v = params.get("task", params)
        if v["task_id"] in self.tasks:
            self.redelivered += 1
            return None
        t = Task(task_id=v["task_id"], type=v["type"], project=v.get("project", ""), tu=v["tu"], ru=v["ru"],
                 source=v.get("source", ""), created_at=float(v["created_at"]), deadline=float(v["deadline"]),
                 vip=v.get("vip"), meta=v.get("meta") or {})
        self.tasks[t.task_id] = t
        self._open.setdefault((t.tu, t.ru, t.type), []).append(t)
        self.counts["task.created"] += 1
        keys = dict(task_id=t.task_id, type=t.type, project=t.project, tu=t.tu, ru=t.ru, source=t.source,
                    deadline=_rel(t.deadline, self.start), vip=t.vip, created_at=_rel(t.created_at, self.start))
        if t.meta:
            keys["meta"] = t.meta
        self._add(t.created_at, "task.created", **keys)
        return t

    def task_closed(self, params: dict[str, Any]) -> Task | None:
        """``task.closed {seq, task_id, type, tu, ru, reason, closed_at}``."""
        tid, reason, at = params["task_id"], params.get("reason", ""), float(params["closed_at"])
        t = self.tasks.get(tid)
        if t is None:
            self.unknown_closes.append(tid)
            t = self.tasks[tid] = Task(task_id=tid, type=params.get("type", ""), project="", tu=params.get("tu", ""),
                                       ru=params.get("ru", ""), source="", created_at=at, deadline=at)
        if (at, reason) in t.closes:
            self.redelivered += 1
            return None
        t.closes.append((at, reason))
        if t.closed_at is None:
            t.closed_at, t.reason = at, reason
            still = self._open.get((t.tu, t.ru, t.type))
            if still is not None and t in still:
                still.remove(t)
        self.counts["task.closed"] += 1
        self._add(at, "task.closed", task_id=tid, type=t.type, tu=t.tu, ru=t.ru, reason=reason)
        return t

    def task_updated(self, params: dict[str, Any], now: float) -> Task | None:
        """``task.updated {seq, task_id, type, tu, ru, overdue, deadline, at}``; returns the task
        when this is the first overdue announcement of it."""
        t = self.tasks.get(params.get("task_id", ""))
        if t is None or not params.get("overdue"):
            return None
        if t.overdue_at is not None:
            self.redelivered += 1
            return None
        at = float(params.get("at") or now)
        t.overdue_at = at
        self.counts["task.updated"] += 1
        self._add(at, "task.updated", task_id=t.task_id, type=t.type, tu=t.tu, ru=t.ru, overdue=True,
                  deadline=_rel(t.deadline, self.start))
        return t

    def chain_attempt(self, params: dict[str, Any], now: float) -> None:
        self.counts["chain.attempt"] += 1
        self._add(float(params.get("at") or now), "chain.attempt", tu=params.get("tu"), ru=params.get("ru"),
                  step=params.get("step"), chance=params.get("chance"), hit=params.get("hit"),
                  outcome=params.get("outcome"))

    def sender_state(self, params: dict[str, Any], now: float) -> None:
        self.counts["sender.state"] += 1
        sender, to = params.get("sender", ""), params.get("state", "")
        frm = self._sender_state.get(sender, "active")
        self._sender_state[sender] = to
        self._add(float(params.get("at") or now), "sender.transition", sender=sender, **{"from": frm},
                  to=to, code=params.get("code", 0), note=params.get("note", ""))

    def delivery(self, params: dict[str, Any], now: float, machine: str | None = None) -> None:
        """A sidecar's ``delivery`` note: one attempt outcome, a row settled when routed, or a
        TTL expiry (``failed``, error ``expired: …``); ``machine`` (``m1``, ``m2``, …) names the
        sidecar that noted it (scenarios README revision 2)."""
        self.counts["delivery"] = self.counts.get("delivery", 0) + 1
        self._add(float(params.get("at") or now), "delivery", delivery_id=params.get("delivery_id"),
                  target=params.get("target"), channel=params.get("channel"),
                  status=params.get("status"), attempt=params.get("attempt"),
                  source=params.get("source"), subject=params.get("subject"),
                  action=params.get("action"), priority=params.get("priority"),
                  **({"reason": "expired"} if str(params.get("error") or "").startswith("expired") else {}),
                  **({"machine": machine} if machine else {}),
                  **({"error": params["error"]} if params.get("error") else {}))

    def platform_request(self, at: float, project: str, tu: str, method: str, params: Any) -> tuple:
        """One ``platform.request`` the sidecar made (``params`` as it sent them), at ``at``
        (unix seconds, the asking step's instant).  Returns a handle for
        :meth:`retract_request` (a pushed poll answer the sidecar did not use)."""
        p = params if isinstance(params, dict) else {}
        ru, ids = p.get("ru"), p.get("ru_ids")
        rus: tuple[str, ...] = ((ru,) if isinstance(ru, str) else
                                tuple(x for x in ids if isinstance(x, str)) if isinstance(ids, list) else ())
        self._requests.setdefault((tu, method), []).append((at, rus))
        keys: dict[str, Any] = {"project": project, "tu": tu, "method": method}
        if len(rus) == 1:
            keys["ru"] = rus[0]
        elif rus:
            keys["ru_ids"] = list(rus)
        if isinstance(p.get("criteria"), list):
            keys["criteria"] = p["criteria"]
        self.counts["platform.request"] = self.counts.get("platform.request", 0) + 1
        self._add(at, "platform.request", **keys)
        return self.lines[-1], (tu, method), (at, rus)

    def retract_request(self, handle: tuple) -> None:
        """Take back a :meth:`platform_request` record (its line, its count, its ``requests``
        entry): the pushed answer it stood for was not used (``pushed_polls``)."""
        line, key, entry = handle
        for i in range(len(self.lines) - 1, -1, -1):  # a recent line: search from the end
            if self.lines[i] is line:
                del self.lines[i]
                break
        made = self._requests.get(key, [])
        for i in range(len(made) - 1, -1, -1):
            if made[i] == entry:
                del made[i]
                break
        self.counts["platform.request"] -= 1

    def requests_of(self, tu: str, method: str, ru: str | None, lo: float, hi: float) -> int:
        """Platform requests of ``method`` for ``tu`` [naming ``ru``] at ``lo <= at <= hi`` (unix s)."""
        return sum(1 for at, rus in self._requests.get((tu, method), ())
                   if lo <= at <= hi and (ru is None or ru in rus))

    # ---- harness actions ------------------------------------------------------------------

    def operator_sent(self, now: float, channel: str, project: str, tu: str, ru: str, task_id: str) -> None:
        self._add(now, "operator.sent", channel=channel, project=project, tu=tu, ru=ru, task_id=task_id)

    def context(self, now: float, event: str, **keys: Any) -> None:
        """``crash`` / ``login`` / ``logout`` (and other harness context lines)."""
        self._add(now, event, **keys)

    def add_marker_acks(self, acks: Iterable[dict[str, Any]]) -> None:
        """The Stack's acknowledged marker writes (``at`` = virtual unix seconds, or None)."""
        for a in acks:
            self._add(a["at"] if a["at"] is not None else self.start, "marker.acked", tu=a["tu"], ru=a["ru"],
                      name=a["name"], value=a["value"])

    def add_webhooks(self, records: Iterable[dict[str, Any]]) -> None:
        """The loopback receivers' ``webhook.received`` records (``at`` virtual unix seconds)."""
        for r in records:
            self._add(r["at"] if r.get("at") is not None else self.start, "webhook.received",
                      target=r.get("target"), webhook_id=r.get("webhook_id"), verified=r.get("verified"))

    # ---- queries --------------------------------------------------------------------------

    def of(self, type_: str | None = None, tu: str | None = None, ru: str | None = None,
           source: str | None = None) -> list[Task]:
        """Tasks matching every given key, by creation time."""
        out = [t for t in self.tasks.values()
               if (type_ is None or t.type == type_) and (tu is None or t.tu == tu)
               and (ru is None or t.ru == ru) and (source is None or t.source == source)]
        return sorted(out, key=lambda t: (t.created_at, t.task_id))

    def open_task(self, tu: str, ru: str, type_: str) -> Task | None:
        """The earliest-created open task of ``type_`` for (``tu``, ``ru``), or None; O(open tasks
        of that pair and type), whatever the length of the run."""
        still = self._open.get((tu, ru, type_))
        return min(still, key=lambda t: (t.created_at, t.task_id)) if still else None

    def sorted_lines(self) -> list[dict[str, Any]]:
        """The lines in trace order: by ``at``, then :func:`line_order` within an instant."""
        # the same order as sorting (index, line) by line_order: sorted() is stable, so the
        # arrival index need not be in the key (shorter tuples: about half the sort's CPU)
        return sorted(self.lines, key=_line_key)

    def write(self, path: str | Path) -> int:
        """Write the trace as JSON lines sorted by ``at``; returns the line count."""
        lines = self.sorted_lines()
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(trace_json.text(lines))
        return len(lines)


def line_order(item: tuple[int, dict[str, Any]]) -> tuple:
    """Sort key of ``(arrival index, line)``: ``at`` (None as 0), then the stream's lines in
    arrival order, then ``marker.acked`` lines by (tu, ru, arrival), then ``platform.request``
    lines by (tu, arrival) — see the module rules."""
    i, x = item
    at = x["at"] if x["at"] is not None else 0.0
    if x["event"] == "marker.acked":
        return (at, 1, str(x.get("tu")), str(x.get("ru")), i)
    if x["event"] == "platform.request":
        return (at, 2, str(x.get("tu")), "", i)
    return (at, 0, "", "", i)


def _line_key(x: dict[str, Any]) -> tuple:
    """:func:`line_order` without the arrival index, for a stable sort of the lines."""
    at = x["at"] if x["at"] is not None else 0.0
    event = x["event"]
    if event == "marker.acked":
        return (at, 1, str(x.get("tu")), str(x.get("ru")))
    if event == "platform.request":
        return (at, 2, str(x.get("tu")))
    return (at, 0)


class TraceError(Exception):
    """A trace file that cannot be read or is not a trace; ``str()`` is ``FILE:LINE: what``."""


TRACE_EVENT_KEYS = ("event", "at")  # every trace line has these


def read(path: str | Path) -> list[dict[str, Any]]:
    """A trace file's lines.  Raises :class:`TraceError` (missing/unreadable file, a line that
    is not JSON or not a trace line — e.g. a scenario file given by mistake)."""
    out: list[dict[str, Any]] = []
    try:
        with open(path, encoding="utf-8") as fh:
            for lineno, raw in enumerate(fh, 1):
                if not raw.strip():
                    continue
                try:
                    x = json.loads(raw)
                except ValueError as exc:
                    raise TraceError(f"{path}:{lineno}: not JSON ({exc})") from None
                if not isinstance(x, dict) or any(k not in x for k in TRACE_EVENT_KEYS):
                    raise TraceError(f"{path}:{lineno}: not a trace line (no event/at; "
                                     f"is this a scenario or another file?)")
                out.append(x)
    except (OSError, UnicodeDecodeError) as exc:
        raise TraceError(f"{path}: cannot read: {getattr(exc, 'strerror', None) or exc}") from None
    return out


def task_diff(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Tasks (created, with their close) present in one trace and not the other, compared by
    ``(task_id, type, tu, ru, source, created_at, deadline, close reason, closed at)``.  Two runs of
    one scenario with and without ``crash`` lines should give no difference (DESIGN §5)."""
    def tasks(lines: list[dict[str, Any]]) -> dict[tuple, dict[str, Any]]:
        closes = {x["task_id"]: (x["reason"], x["at"]) for x in lines if x["event"] == "task.closed"}
        out = {}
        for x in lines:
            if x["event"] == "task.created":
                key = (x["task_id"], x["type"], x["tu"], x["ru"], x["source"], x["created_at"], x["deadline"],
                       *closes.get(x["task_id"], (None, None)))
                out[key] = {**x, "close": closes.get(x["task_id"])}
        return out
    ta, tb = tasks(a), tasks(b)
    by_at = lambda d: sorted(d, key=lambda x: (x["at"], x["task_id"]))  # noqa: E731
    return {"only_a": by_at(v for k, v in ta.items() if k not in tb),
            "only_b": by_at(v for k, v in tb.items() if k not in ta)}
