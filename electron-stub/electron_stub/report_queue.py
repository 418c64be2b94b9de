"""The report's operator queue per TU (issue 22 item 5): what a shift lead needs to see of each
TU's open tasks — how big the open queue got and when, how long overdue tasks waited, and the
VIP tiers — computed from the trace lines alone, with totals that add up.

Rules / theory of operation
---------------------------
* A task is *open* from its ``task.created`` ``created_at`` to its first ``task.closed`` ``at``
  (or the end of the run).  The **open queue** of a TU at an instant is the number of its tasks
  open then (every type: what Electron lists).  Per TU: the maximum and its first instant, the
  size at the end, and the size at every sample instant (:func:`sample_step`: each hour of a
  run of 4 h or more, else a quarter of the run; the end included).  A close at the same instant
  as a creation counts first (a superseding task replaces the old one: the queue does not
  blink to two).
* Per TU and in the ``total`` row, the counts add up: ``created == answered + other_closes +
  open_at_end``; ``overdue == overdue_answered + overdue_other + overdue_open`` (tasks that the
  sidecar announced overdue, ``task.updated {overdue: true}``, DESIGN §6, counted among the
  created, never beside them); ``created == vip_green + vip_yellow + vip_red + vip_none``.
* **Overdue age** of a task: from its deadline to its close (or the end, while open), seconds;
  per TU its p50 and max, and the age of the oldest overdue task still open at the end.
* The ``total`` row sums the counts; its queue figures are those of the summed queue (all TUs'
  open tasks at once), not sums of each TU's maximum.
"""
from __future__ import annotations

import math
from typing import Any

VIP_TIERS = ("green", "yellow", "red")
QUEUE_COUNTS = ("created", "answered", "other_closes", "open_at_end", "overdue", "overdue_answered",
                "overdue_other", "overdue_open", "vip_green", "vip_yellow", "vip_red", "vip_none")


def sample_step(end: float) -> float:
    """Seconds between queue samples: 1 h for a run of 4 h or more, else a quarter of the run."""
    return 3600.0 if end >= 4 * 3600 else max(end / 4, 1.0)


def _p50(values: list[float]) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(1, math.ceil(len(ordered) / 2)) - 1]


def _queue(spans: list[tuple[float, float | None]], end: float, samples: list[float]) -> dict[str, Any]:
    """Open-queue figures of (created, closed or None) spans, seconds from start."""
    points: list[tuple[float, int]] = []
    for c, x in spans:
        points.append((c, 1))
        if x is not None:
            points.append((x, -1))
    points.sort(key=lambda p: (p[0], p[1]))  # at one instant closes (-1) before creations (+1)
    size, best, best_at, i = 0, 0, None, 0
    sizes: list[int] = []
    for t in samples:
        while i < len(points) and points[i][0] <= t:
            size += points[i][1]
            if size > best:
                best, best_at = size, points[i][0]
            i += 1
        sizes.append(size)
    while i < len(points):  # anything past the last sample (a trace longer than ``end``)
        size += points[i][1]
        if size > best:
            best, best_at = size, points[i][0]
        i += 1
    return {"max": best, "max_at": best_at, "at_end": size, "samples": sizes}


def queue(lines: list[dict[str, Any]], end: float) -> dict[str, Any]:
    """Per-TU queue figures and the total row (module rules); ``end`` = the run's virtual
    length, seconds.  ``{"sample_at": [s…], "by_tu": {tu: row}, "total": row}``."""
    step = sample_step(end) if end > 0 else 1.0
    samples = [step * k for k in range(1, int(end // step) + 1)] if end > 0 else []
    if not samples or samples[-1] < end - 1e-9:
        samples.append(end)
    created: dict[str, dict[str, Any]] = {}
    closed: dict[str, dict[str, Any]] = {}
    overdue: set[str] = set()
    for x in lines:
        ev, tid = x.get("event"), x.get("task_id")
        if ev == "task.created" and tid not in created:
            created[tid] = x
        elif ev == "task.closed" and tid not in closed:
            closed[tid] = x
        elif ev == "task.updated" and x.get("overdue") is True:
            overdue.add(tid)
    rows: dict[str, dict[str, Any]] = {}
    spans: dict[str, list[tuple[float, float | None]]] = {}
    ages: dict[str, list[float]] = {}
    oldest: dict[str, float] = {}
    for tid, c in created.items():
        tu = str(c.get("tu"))
        row = rows.setdefault(tu, {k: 0 for k in QUEUE_COUNTS})
        cl = closed.get(tid)
        reason = cl.get("reason") if cl else None
        at = float(c.get("created_at") if c.get("created_at") is not None else c.get("at") or 0.0)
        closed_at = float(cl["at"]) if cl and cl.get("at") is not None else None
        spans.setdefault(tu, []).append((at, closed_at))
        row["created"] += 1
        row["answered" if reason == "answered" else "open_at_end" if cl is None else "other_closes"] += 1
        vip = c.get("vip")
        row[f"vip_{vip}" if vip in VIP_TIERS else "vip_none"] += 1
        if tid in overdue:
            row["overdue"] += 1
            row["overdue_answered" if reason == "answered" else "overdue_open" if cl is None
                else "overdue_other"] += 1
            age = max(0.0, (closed_at if closed_at is not None else end) - float(c.get("deadline") or at))
            ages.setdefault(tu, []).append(age)
            if cl is None:
                oldest[tu] = max(oldest.get(tu, 0.0), age)
    by_tu = {}
    for tu in sorted(rows):
        a = ages.get(tu, [])
        by_tu[tu] = {**rows[tu], **_queue(spans[tu], end, samples),
                     "overdue_age_p50_s": _p50(a), "overdue_age_max_s": max(a) if a else None,
                     "oldest_open_overdue_s": oldest.get(tu)}
    every = [s for tu in spans for s in spans[tu]]
    all_ages = [v for a in ages.values() for v in a]
    total = {k: sum(r[k] for r in rows.values()) for k in QUEUE_COUNTS}
    total.update(_queue(every, end, samples))
    total.update({"overdue_age_p50_s": _p50(all_ages), "overdue_age_max_s": max(all_ages) if all_ages else None,
                  "oldest_open_overdue_s": max(oldest.values()) if oldest else None})
    return {"sample_at": samples, "by_tu": by_tu, "total": total}
