"""The report's plot data: the per-task, per-delivery and per-sender rows the HTML view draws
(:mod:`electron_stub.report_html`), kept in the JSON report (key ``series``) so that
``sidecar-stub report FILE --html OUT`` redraws a saved run without replaying it.

Rules / theory of operation
---------------------------
* Computed from the trace lines alone (the format of ``shared/scenarios/README.md``); times are
  virtual seconds from the run's start, as in the trace.
* ``tasks``: one row per ``task.created`` — ``{task_id, tu, type, created_at, closed_at, reason,
  deadline, overdue_at}``; ``closed_at``/``reason`` are None while open at the end.
* ``deliveries``: one row per ``delivery`` line — ``{at, target, status}``.
* ``senders``: one row per ``sender.transition`` line — ``{at, sender, from, to, code, note}``.
* ``end_s``: the run's virtual length (open tasks and the last sender state reach it).
"""
from __future__ import annotations

from typing import Any


def series(lines: list[dict[str, Any]], end: float) -> dict[str, Any]:
    """The plot rows of one run (see the module docstring for the shapes)."""
    tasks: dict[str, dict[str, Any]] = {}
    deliveries: list[dict[str, Any]] = []
    senders: list[dict[str, Any]] = []
    for x in lines:
        ev, tid = x.get("event"), x.get("task_id")
        if ev == "task.created" and tid not in tasks:
            at = x.get("created_at") if x.get("created_at") is not None else x.get("at")
            tasks[tid] = {"task_id": tid, "tu": str(x.get("tu")), "type": x.get("type"),
                          "created_at": float(at or 0.0), "closed_at": None, "reason": None,
                          "deadline": x.get("deadline"), "overdue_at": None}
        elif ev == "task.closed" and tid in tasks and tasks[tid]["closed_at"] is None:
            tasks[tid].update(closed_at=float(x.get("at") or 0.0), reason=x.get("reason"))
        elif ev == "task.updated" and x.get("overdue") is True and tid in tasks and tasks[tid]["overdue_at"] is None:
            tasks[tid]["overdue_at"] = float(x.get("at") or 0.0)
        elif ev == "delivery":
            deliveries.append({"at": float(x.get("at") or 0.0), "target": str(x.get("target")),
                               "status": str(x.get("status"))})
        elif ev == "sender.transition":
            senders.append({"at": float(x.get("at") or 0.0), "sender": str(x.get("sender")),
                            "from": x.get("from"), "to": x.get("to"), "code": x.get("code"),
                            "note": x.get("note") or ""})
    return {"end_s": end, "tasks": list(tasks.values()), "deliveries": deliveries, "senders": senders}
