"""The end-of-run report and the harness's exit code: what a shift lead reads after a replay.

Rules / theory of operation
---------------------------
* :func:`summarize` builds the report as plain data (JSON-able, ``--json FILE`` writes it), in
  reading order: the verdict in words; **what happened and when** (logins, shift changes,
  logouts with machine and operator, crashes and restarts, Stack faults as episodes in words — each
  at its virtual time); per-type task totals (created = answered + other closes + still open,
  and how many of them went overdue), then the operator's queue per TU
  (:mod:`electron_stub.report_queue`: open-queue size over time, overdue age, VIP tiers, totals
  that add up), then tasks by type × source × close reason; follow-up mails by source (seed 001's five,
  zeros shown) with the burst source's 50 % rolls; answer delay p50/p95 per type (``task.created`` → ``task.closed`` with
  reason ``answered``); overdue tasks (``task.updated {task_id, overdue: true}`` trace lines,
  DESIGN §6: answer-awaiting tasks go overdue instead of expiring) and the answer-awaiting tasks
  never answered (overdue still open, closed by logout …); markers acked; deliveries
  (``delivery`` lines, once the router exists); expectations and consistency; how every sidecar
  exited; the speed figures last.
* Everything task-related is computed from the **trace lines** (``Recorder.lines``, the format of
  ``shared/scenarios/README.md``), so new line kinds count as soon as the sidecar emits them.
* :func:`exit_code` is 0 only when every expectation and consistency check holds and every
  sidecar exited cleanly (exit code 0, in time, no process left); else 1.  (A bad scenario is
  exit 2, decided by the CLI before a run starts.)  A scenario without expectations that passes
  says so: "no expectations: consistent and exited cleanly", not a bare PASS.
* The timeline ("what happened and when") is :mod:`electron_stub.report_timeline`; rendering
  (terminal tables, colours) is :mod:`electron_stub.report_view`.
"""
from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import msgspec

from electron_stub.expect import Result, Violation
from electron_stub.report_queue import queue
from electron_stub.report_series import series
from electron_stub.report_timeline import clock_of, timeline, whole_s
from electron_stub.trace import Recorder

__all__ = ["MachineExit", "RunStats", "clock_of", "exit_code", "percentile", "summarize",
           "timeline", "whole_s", "write_json"]


class MachineExit(msgspec.Struct, kw_only=True):
    """How one sidecar process ended.  ``how``: stdin-eof | sigterm | killed | crash (SIGKILL by
    the scenario, not a failure)."""

    machine: str
    pid: int
    returncode: int | None
    how: str
    clean: bool
    note: str = ""
    peak_rss_mb: float | None = None  # the process's peak resident set (VmHWM), Linux only


class RunStats(msgspec.Struct, kw_only=True):
    """Counters of one replay; times in seconds."""

    scenario: str = ""
    wall_s: float = 0.0
    virtual_s: float = 0.0
    frames_sent: dict[str, int] = {}  # bridge method -> count (Electron → sidecar)
    requests_answered: dict[str, int] = {}  # platform.request method -> count
    request_frames: dict[str, int] = {}  # sidecar → Electron round trips: platform.request(s) -> count
    request_errors: int = 0
    operator_sent: dict[str, int] = {}  # channel -> count
    operator_late: int = 0  # operator actions that could not run at their planned instant
    operator_backlog: dict[str, int] = {}  # the backlog's counters (operator_model): passed_over, looks, answered
    stack: dict[str, int] = {}
    stack_requests: dict[str, int] = {}  # HTTP requests to Stack by kind (startup, marker, batch …)
    stack_writes: dict[str, int] = {}  # writes by kind (marker, task, candidate), batched or not
    exits: list[MachineExit] = []
    warnings: list[str] = []
    crashes: int = 0
    machines: int = 0
    # follow_up_mail candidates Stack received (DESIGN §9), source -> outcome -> count: the burst
    # source's ``created`` / ``miss`` rows are its 50 % rolls (seed 001 "Понад 5 Unanswered")
    mail_candidates: dict[str, dict[str, int]] = {}
    # delivery rows still pending in each machine's SQLite at the end, machine -> target -> count:
    # outcomes are trace lines, so rows a retired machine (a ``fresh`` shift change) still holds
    # would otherwise not show at all — it sends them when it next starts
    left_queued: dict[str, dict[str, int]] = {}


def exit_code(results: list[Result], violations: list[Violation], stats: RunStats) -> int:
    ok = all(r.ok for r in results) and not violations and all(e.clean for e in stats.exits)
    return 0 if ok else 1


def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (``q`` in 0..100) of ``values``; None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


ANSWER_AWAITING = ("unanswered_message", "unanswered_mail", "unanswered_email", "like")  # DESIGN §6


def _tasks(lines: list[dict[str, Any]]) -> dict[str, Any]:
    created: dict[str, dict[str, Any]] = {}
    closed: dict[str, dict[str, Any]] = {}
    overdue: dict[str, float] = {}
    for x in lines:
        ev, tid = x.get("event"), x.get("task_id")
        if ev == "task.created" and tid not in created:
            created[tid] = x
        elif ev == "task.closed" and tid not in closed:
            closed[tid] = x
        elif ev == "task.updated" and x.get("overdue") is True and tid not in overdue:
            overdue[tid] = x.get("at") or 0.0
    table: Counter = Counter()
    for tid, c in created.items():
        reason = closed[tid].get("reason") if tid in closed else "(open)"
        table[(c.get("type", "?"), c.get("source", "?"), reason)] += 1
    delays: dict[str, list[float]] = defaultdict(list)
    for tid, cl in closed.items():
        c = created.get(tid)
        if c is not None and cl.get("reason") == "answered" and c.get("created_at") is not None:
            delays[c.get("type", "?")].append(cl["at"] - c["created_at"])
    type_of = {tid: c.get("type", "?") for tid, c in created.items()}
    overdue_by_type = Counter(type_of.get(tid, "?") for tid in overdue)
    overdue_open = sum(1 for tid in overdue if tid not in closed)
    overdue_closed = Counter(closed[tid].get("reason") for tid in overdue if tid in closed)
    totals: dict[str, Counter] = defaultdict(Counter)
    never: Counter = Counter()  # answer-awaiting tasks never answered, by what became of them
    for tid, c in created.items():
        typ = c.get("type", "?")
        reason = closed[tid].get("reason") if tid in closed else None
        row = totals[typ]
        row["created"] += 1
        row["answered" if reason == "answered" else "still_open" if reason is None else "other_closes"] += 1
        row["overdue"] += tid in overdue
        if typ in ANSWER_AWAITING and reason != "answered":
            never["overdue and still open at the end" if reason is None and tid in overdue
                  else "still open, not yet overdue" if reason is None
                  else "closed at logout" if reason == "logout" else f"closed as {reason}"] += 1
    return {
        "created": len(created),
        "closed": sum(1 for tid in created if tid in closed),
        "open_at_end": sum(1 for tid in created if tid not in closed),
        "table": [{"type": t, "source": s, "reason": r, "count": n}
                  for (t, s, r), n in sorted(table.items(), key=lambda kv: (kv[0][0], -kv[1], kv[0][1:]))],
        "by_type": dict(Counter(c.get("type", "?") for c in created.values()).most_common()),
        "totals": [{"type": t, **{k: row[k] for k in ("created", "answered", "overdue", "still_open", "other_closes")}}
                   for t, row in sorted(totals.items())],
        "never_answered": {"tasks": sum(never.values()), "by_fate": dict(never.most_common())},
        "by_source": dict(Counter(c.get("source", "?") for c in created.values()).most_common()),
        "by_reason": dict(Counter(cl.get("reason") for cl in closed.values()).most_common()),
        "answer_delay_s": {t: {"answered": len(v), "p50": percentile(v, 50), "p95": percentile(v, 95)}
                           for t, v in sorted(delays.items())},
        "overdue": {"tasks": len(overdue), "by_type": dict(overdue_by_type.most_common()),
                    "still_open": overdue_open, "closed_as": dict(overdue_closed.most_common())},
    }


FOLLOW_UP_MAIL_SOURCES = ("post_chat", "mail_read", "burst", "notification", "last_mail_6h")  # seed 001 "Джерела"


def follow_up_mail(lines: list[dict[str, Any]], candidates: dict[str, dict[str, int]]) -> dict[str, Any]:
    """Follow-up mails by source (issue 8 "Done when"): per source of seed 001 — every one listed,
    0 included, so a source that never fired is visible — the tasks created and what became of
    them (answered by a letter, expired at 900 s or offline, other closes, still open); and the
    burst source's 50 % rolls from the candidates Stack received (``created`` = a hit that made a
    task, ``miss`` = the roll failed; a hit the Task Factory then refused counts in neither)."""
    closed = {x.get("task_id"): x.get("reason") for x in lines if x.get("event") == "task.closed"}
    rows: dict[str, Counter] = {s: Counter() for s in FOLLOW_UP_MAIL_SOURCES}
    seen: set[Any] = set()
    for x in lines:
        if x.get("event") != "task.created" or x.get("type") != "follow_up_mail" or x.get("task_id") in seen:
            continue
        seen.add(x.get("task_id"))
        reason = closed.get(x.get("task_id"))
        row = rows.setdefault(str(x.get("source", "?")), Counter())
        row["created"] += 1
        row["still_open" if reason is None else reason if reason in ("answered", "expired") else "other_closes"] += 1
    burst = candidates.get("burst", {})
    hit, miss = burst.get("created", 0), burst.get("miss", 0)
    return {
        "created": sum(r["created"] for r in rows.values()),
        "by_source": {s: {k: r[k] for k in ("created", "answered", "expired", "other_closes", "still_open")}
                      for s, r in rows.items()},
        "burst_rolls": {"rolls": hit + miss, "hit": hit, "miss": miss,
                        "hit_rate": round(hit / (hit + miss), 4) if hit + miss else None},
    }


def mail_candidates(by_tu: dict[str, list[Any]]) -> dict[str, dict[str, int]]:
    """``RunStats.mail_candidates`` from the reference Stack's candidate rows (``{tu: [body]}``):
    follow_up_mail rows counted by source and outcome."""
    out: dict[str, Counter] = defaultdict(Counter)
    for rows in by_tu.values():
        for c in rows:
            if isinstance(c, dict) and c.get("type") == "follow_up_mail":
                out[str(c.get("source"))][str(c.get("outcome"))] += 1
    return {src: dict(n) for src, n in sorted(out.items())}


def _deliveries(lines: list[dict[str, Any]]) -> dict[str, Any] | None:
    rows = [x for x in lines if x.get("event") == "delivery"]
    if not rows:
        return None
    by_target: dict[str, Counter] = defaultdict(Counter)
    for x in rows:
        by_target[str(x.get("target"))][str(x.get("status"))] += 1
    received = sum(1 for x in lines if x.get("event") == "webhook.received")
    return {"lines": len(rows), "by_target": {t: dict(c) for t, c in sorted(by_target.items())},
            "webhooks_received": received}


def stack_requests(counters: dict[str, int]) -> dict[str, Any]:
    """Stack HTTP requests the run cost for writes, with batching as it happened and as one
    request per write would have cost (DESIGN §9 "Batch writes"; the reference Stack's counters:
    every request, startup reads, ``POST /v1/batch`` requests and the writes they carried)."""
    total = counters.get("requests", 0) - counters.get("reads", 0)
    batches, batched = counters.get("batches", 0), counters.get("batched_writes", 0)
    single = max(total - batches, 0)  # single writes (and health probes)
    unbatched = single + batched
    return {"requests": total, "batches": batches, "batched_writes": batched,
            "single_requests": single, "one_per_write": unbatched,
            "saving": round(unbatched / total, 1) if total else None}


def verdict(results: list[Result], violations: list[Violation], stats: RunStats) -> str:
    """The result in words (first line of the report)."""
    unclean = [e for e in stats.exits if not e.clean]
    failed = [r for r in results if not r.ok]
    if not failed and not violations and not unclean:
        if not results:
            return "no expectations: consistent and exited cleanly"
        kinds = ", ".join(f"{n} {w}" for w, n in Counter(r.what for r in results).most_common())
        return f"PASS: {len(results)} expectation(s) held ({kinds}), consistent, exited cleanly"
    why = []
    if failed:
        why.append(f"{len(failed)} of {len(results)} expectation(s) failed")
    if violations:
        why.append(f"{len(violations)} consistency violation(s)")
    if unclean:
        why.append(f"{len(unclean)} sidecar exit(s) not clean")
    return "FAIL: " + ", ".join(why)


def summarize(rec: Recorder, results: list[Result], violations: list[Violation],
              stats: RunStats) -> dict[str, Any]:
    """The whole report as JSON-able data (see the module header for the order)."""
    lines = rec.sorted_lines()
    n_frames = sum(stats.frames_sent.values())
    markers = [x for x in lines if x.get("event") == "marker.acked"]
    return {
        "scenario": stats.scenario,
        "start_utc": datetime.fromtimestamp(rec.start, timezone.utc).isoformat().replace("+00:00", "Z"),
        "verdict": verdict(results, violations, stats),
        "exit_code": exit_code(results, violations, stats),
        "timeline": timeline(lines, rec.start),
        "tasks": {**_tasks(lines), "reannounced_ignored": rec.redelivered},
        "queue": queue(lines, stats.virtual_s),
        "series": series(lines, stats.virtual_s),  # the HTML view's plot rows (report_html)
        "follow_up_mail": follow_up_mail(lines, stats.mail_candidates),
        "markers_acked": {"total": len(markers), "by_name": dict(Counter(x.get("name") for x in markers))},
        "deliveries": _deliveries(lines),
        "deliveries_left": {m: dict(sorted(t.items())) for m, t in sorted(stats.left_queued.items()) if t},
        "operator": {"sent": dict(stats.operator_sent), "late": stats.operator_late,
                     "backlog": dict(stats.operator_backlog)},
        "stack": dict(stats.stack),
        "stack_requests": stack_requests(stats.stack),
        "expectations": {"total": len(results), "passed": sum(1 for r in results if r.ok),
                         "by_kind": dict(Counter(r.what for r in results).most_common()),
                         "failed": [{"line": r.lineno, "detail": r.detail} for r in results if not r.ok]},
        "consistency": {"violations": len(violations),
                        "by_kind": dict(sorted(Counter(v.kind for v in violations).items())),
                        "examples": [v.detail for v in violations[:20]]},
        "sidecars": {"machines": stats.machines, "crashes": stats.crashes,
                     "exits": [msgspec.structs.asdict(e) for e in stats.exits]},
        "warnings": list(stats.warnings[:20]),
        "speed": {"wall_s": round(stats.wall_s, 3), "virtual_s": round(stats.virtual_s, 3),
                  "speedup": round(stats.virtual_s / stats.wall_s, 1) if stats.wall_s > 0 else None,
                  "frames": n_frames, "frames_per_s": round(n_frames / stats.wall_s, 1) if stats.wall_s > 0 else None,
                  "frames_by_method": dict(sorted(stats.frames_sent.items())),
                  "platform_requests": dict(sorted(stats.requests_answered.items())),
                  "platform_request_frames": dict(sorted(stats.request_frames.items())),
                  "request_errors": stats.request_errors},
    }


def write_json(summary_: dict[str, Any], path: str | Path) -> None:
    """``--json FILE``: the summary for tools (UTF-8, indented)."""
    Path(path).write_text(json.dumps(summary_, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")


def render(rec: Recorder, results: list[Result], violations: list[Violation], stats: RunStats) -> str:
    """The report as plain text (no colours), e.g. for a failing test's message."""
    from electron_stub.report_view import to_text

    return to_text(summarize(rec, results, violations, stats))


def show(summary_: dict[str, Any], *, quiet: bool = False) -> None:
    """Print the report to stdout (colours and tables on a terminal)."""
    from electron_stub.report_view import print_report

    print_report(summary_, quiet=quiet)


def summary(rec: Recorder, results: list[Result], violations: list[Violation], stats: RunStats) -> dict[str, Any]:
    """Short machine-readable form of the report (for tests and benchmarks)."""
    return {"tasks": len(rec.tasks), "expect_failed": [r.lineno for r in results if not r.ok],
            "violations": len(violations), "exit_code": exit_code(results, violations, stats),
            "wall_s": stats.wall_s, "virtual_s": stats.virtual_s}
