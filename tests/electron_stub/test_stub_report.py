"""The report speaks to a shift lead (issue 7 item 4): what happened and when first, then tasks,
answer delays, overdue tasks (from ``task.updated {overdue: true}`` lines, DESIGN §6), markers,
deliveries, and the speed figures last; ``--json`` carries the same summary.  Built from
synthetic trace lines, so it works as soon as the sidecar emits new line kinds."""
from __future__ import annotations

import json

from electron_stub import report
from electron_stub.expect import Result, Violation
from electron_stub.report_view import to_text
from electron_stub.trace import Recorder

START = 1796025600.0  # 2026-11-30T08:00:00Z


def created(at, tid, typ, source="socket"):
    return {"at": at, "event": "task.created", "task_id": tid, "type": typ, "project": "golden",
            "tu": "g-1", "ru": "r-" + tid, "source": source, "deadline": at + 120, "vip": None, "created_at": at}


def closed(at, tid, reason):
    return {"at": at, "event": "task.closed", "task_id": tid, "type": "?", "tu": "g-1", "ru": "r", "reason": reason}


def recorder(lines) -> Recorder:
    rec = Recorder(START)
    rec.lines.extend(lines)
    return rec


LINES = [
    {"at": 5.0, "event": "login", "machine": "m1", "project": "golden", "tu": "g-1", "operator": "op-a"},
    created(10.0, "a", "unanswered_message"), closed(40.0, "a", "answered"),
    created(20.0, "b", "unanswered_message"), closed(120.0, "b", "answered"),
    created(30.0, "c", "unanswered_message"), closed(230.0, "c", "answered"),
    created(31.0, "d", "unanswered_mail", "stats"),
    {"at": 31.0 + 600, "event": "task.updated", "task_id": "d", "overdue": True},
    {"at": 700.0, "event": "task.updated", "task_id": "d", "overdue": True},  # repeated: one task
    closed(900.0, "d", "answered"),
    created(40.0, "e", "unanswered_message"),
    {"at": 160.0, "event": "task.updated", "task_id": "e", "overdue": True},
    {"at": 300.0, "event": "crash", "machines": ["m1"]},
    {"at": 400.0, "event": "stack", "mode": "down", "value": None},
    {"at": 500.0, "event": "stack", "mode": "up", "value": None},
    {"at": 3600.0, "event": "login", "machine": "m2", "project": "golden", "tu": "g-1", "operator": "op-b"},
    {"at": 3601.0, "event": "marker.acked", "tu": "g-1", "ru": "r-a", "name": "followUpChat", "value": None},
    {"at": 3602.0, "event": "delivery", "delivery_id": "x", "target": "ops-telegram", "channel": "telegram",
     "status": "delivered", "attempt": 1},
    {"at": 3603.0, "event": "delivery", "delivery_id": "y", "target": "ops-telegram", "channel": "telegram",
     "status": "failed", "attempt": 1},
]


def test_summary_counts_overdue_delays_timeline_and_deliveries():
    s = report.summarize(recorder(LINES), [], [], report.RunStats(scenario="synthetic", wall_s=2.0, virtual_s=3600))
    tk = s["tasks"]
    assert (tk["created"], tk["closed"], tk["open_at_end"]) == (5, 4, 1)
    assert tk["overdue"] == {"tasks": 2, "by_type": {"unanswered_mail": 1, "unanswered_message": 1},
                             "still_open": 1, "closed_as": {"answered": 1}}
    msg = tk["answer_delay_s"]["unanswered_message"]
    assert msg == {"answered": 3, "p50": 100.0, "p95": 200.0}
    assert tk["answer_delay_s"]["unanswered_mail"] == {"answered": 1, "p50": 869.0, "p95": 869.0}
    assert {"type": "unanswered_message", "source": "socket", "reason": "answered", "count": 3} in tk["table"]
    assert {"type": "unanswered_message", "source": "socket", "reason": "(open)", "count": 1} in tk["table"]
    whats = [(x["clock"], x["what"]) for x in s["timeline"]]
    assert whats == [("08:00:05", "login"), ("08:05:00", "crash"), ("08:06:40", "Stack down"),
                     ("08:08:20", "Stack back up"), ("09:00:00", "shift change")]
    assert "op-a → op-b" in s["timeline"][-1]["detail"]
    assert s["markers_acked"] == {"total": 1, "by_name": {"followUpChat": 1}}
    assert s["deliveries"]["by_target"] == {"ops-telegram": {"delivered": 1, "failed": 1}}
    assert s["verdict"] == "no expectations: consistent and exited cleanly" and s["exit_code"] == 0


def test_text_reads_in_order_happened_tasks_delays_overdue_speed_last():
    s = report.summarize(recorder(LINES), [], [], report.RunStats(scenario="synthetic", wall_s=2.0, virtual_s=3600))
    text = to_text(s)
    order = ["no expectations: consistent and exited cleanly", "What happened", "shift change",
             "Tasks: 5 created", "Answer delay", "Overdue: 2 task(s)", "Markers acked", "Deliveries",
             "Speed:", "result: PASS"]
    pos = [text.index(w) for w in order]
    assert pos == sorted(pos), text
    assert "\x1b[" not in text


def test_failures_are_named_and_quiet_keeps_only_them():
    results = [Result(lineno=7, what="count", ok=False, detail="like: 0 not in [1, 2]"),
               Result(lineno=8, what="count", ok=True, detail="")]
    exits = [report.MachineExit(machine="m1", pid=1, returncode=5, how="stdin-eof", clean=False, note="slow")]
    s = report.summarize(recorder(LINES), results, [Violation(kind="two_open", detail="g-1/r twice")],
                         report.RunStats(scenario="x", exits=exits))
    assert s["verdict"] == ("FAIL: 1 of 2 expectation(s) failed, 1 consistency violation(s), "
                            "1 sidecar exit(s) not clean") and s["exit_code"] == 1
    quiet = to_text(s, quiet=True)
    assert "FAIL line 7: like: 0 not in [1, 2]" in quiet and "NOT CLEAN m1" in quiet
    assert "two_open" in quiet and "What happened" not in quiet


def test_json_is_the_same_summary(tmp_path):
    s = report.summarize(recorder(LINES), [], [], report.RunStats(scenario="synthetic", wall_s=1.0, virtual_s=10))
    report.write_json(s, tmp_path / "r.json")
    assert json.loads((tmp_path / "r.json").read_text()) == json.loads(json.dumps(s))


def test_percentile_is_nearest_rank():
    assert report.percentile([], 50) is None
    assert report.percentile([5.0], 95) == 5.0
    assert report.percentile(list(map(float, range(1, 101))), 95) == 95.0
