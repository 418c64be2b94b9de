"""The end-of-run report and the harness's exit code.

Rules / theory of operation
---------------------------
* The report is short plain text: tasks by type, by source and by close reason; Stack writes
  acknowledged / faulted / duplicates; expectations passed / failed (each failure with its line
  number); consistency violations; machines and how each sidecar exited; wall time, virtual
  duration and the virtual/wall speed-up; frames sent through the bridge and frames/s.
* :func:`exit_code` is 0 only when every expectation and consistency check holds and every
  sidecar exited cleanly (exit code 0, in time, no process left); else 1.  (A bad scenario is
  exit 2, decided by the CLI before a run starts.)
"""
from __future__ import annotations

from collections import Counter
from typing import Any

import msgspec

from electron_stub.expect import Result, Violation
from electron_stub.trace import Recorder


class MachineExit(msgspec.Struct, kw_only=True):
    """How one sidecar process ended.  ``how``: stdin-eof | sigterm | killed | crash (SIGKILL by
    the scenario, not a failure)."""

    machine: str
    pid: int
    returncode: int | None
    how: str
    clean: bool
    note: str = ""


class RunStats(msgspec.Struct, kw_only=True):
    """Counters of one replay; times in seconds."""

    scenario: str = ""
    wall_s: float = 0.0
    virtual_s: float = 0.0
    frames_sent: dict[str, int] = {}  # bridge method -> count (Electron → sidecar)
    requests_answered: dict[str, int] = {}  # platform.request method -> count
    request_errors: int = 0
    operator_sent: dict[str, int] = {}  # channel -> count
    operator_late: int = 0  # operator actions that could not run at their planned instant
    stack: dict[str, int] = {}
    exits: list[MachineExit] = []
    warnings: list[str] = []
    crashes: int = 0
    machines: int = 0


def _fmt_counter(c: Counter | dict, width: int = 22) -> list[str]:
    items = sorted(c.items(), key=lambda kv: (-kv[1], str(kv[0])))
    return [f"    {str(k):<{width}} {v}" for k, v in items] or ["    (none)"]


def render(rec: Recorder, results: list[Result], violations: list[Violation], stats: RunStats) -> str:
    tasks = list(rec.tasks.values())
    out = [f"== replay report: {stats.scenario}"]
    out.append(f"  tasks: {len(tasks)} created, {sum(1 for t in tasks if not t.is_open)} closed, "
               f"{sum(1 for t in tasks if t.is_open)} open at the end"
               + (f", {rec.redelivered} re-announcements ignored" if rec.redelivered else ""))
    out.append("  by type:")
    out += _fmt_counter(Counter(t.type for t in tasks))
    out.append("  by source:")
    out += _fmt_counter(Counter(t.source for t in tasks))
    out.append("  by close reason:")
    out += _fmt_counter(Counter(t.reason for t in tasks if t.reason))
    out.append(f"  operator sent: {dict(stats.operator_sent) or 0}"
               + (f" ({stats.operator_late} late)" if stats.operator_late else ""))
    s = stats.stack
    out.append(f"  stack: {s.get('acked', 0)} writes acked, {s.get('faulted', 0)} faulted (500), "
               f"{s.get('refused', 0)} refused (down), {s.get('duplicates', 0)} duplicates, "
               f"{s.get('bad_requests', 0)} bad requests, {s.get('reads', 0)} startup reads")
    passed = sum(1 for r in results if r.ok)
    out.append(f"  expectations: {passed} passed, {len(results) - passed} failed")
    for r in results:
        if not r.ok:
            out.append(f"    FAIL line {r.lineno}: {r.detail}")
    out.append(f"  consistency: {len(violations)} violation(s)")
    for kind, n in sorted(Counter(v.kind for v in violations).items()):
        out.append(f"    {kind}: {n}")
    for v in violations[:20]:
        out.append(f"    - {v.detail}")
    if len(violations) > 20:
        out.append(f"    … {len(violations) - 20} more")
    out.append(f"  sidecars: {stats.machines} machine(s), {stats.crashes} crash(es)")
    for e in stats.exits:
        flag = "ok" if e.clean else "NOT CLEAN"
        out.append(f"    {e.machine} pid {e.pid}: {e.how}, exit {e.returncode} [{flag}]{' ' + e.note if e.note else ''}")
    for w in stats.warnings[:20]:
        out.append(f"  warning: {w}")
    n_frames = sum(stats.frames_sent.values())
    speed = stats.virtual_s / stats.wall_s if stats.wall_s > 0 else 0.0
    rate = n_frames / stats.wall_s if stats.wall_s > 0 else 0.0
    out.append(f"  time: wall {stats.wall_s:.2f} s, virtual {stats.virtual_s:.0f} s, speed-up x{speed:.0f}")
    out.append(f"  bridge: {n_frames} frames sent ({rate:.0f}/s): "
               + ", ".join(f"{k} {v}" for k, v in sorted(stats.frames_sent.items()))
               + f"; {sum(stats.requests_answered.values())} platform requests answered"
               + (f", {stats.request_errors} answered with an error" if stats.request_errors else ""))
    if stats.requests_answered:
        out.append("  platform requests: " + ", ".join(f"{k} {v}" for k, v in sorted(stats.requests_answered.items())))
    code = exit_code(results, violations, stats)
    out.append(f"  result: {'PASS' if code == 0 else 'FAIL'}")
    return "\n".join(out)


def exit_code(results: list[Result], violations: list[Violation], stats: RunStats) -> int:
    ok = all(r.ok for r in results) and not violations and all(e.clean for e in stats.exits)
    return 0 if ok else 1


def summary(rec: Recorder, results: list[Result], violations: list[Violation], stats: RunStats) -> dict[str, Any]:
    """Machine-readable form of the report (for tests and benchmarks)."""
    return {"tasks": len(rec.tasks), "expect_failed": [r.lineno for r in results if not r.ok],
            "violations": len(violations), "exit_code": exit_code(results, violations, stats),
            "wall_s": stats.wall_s, "virtual_s": stats.virtual_s}
