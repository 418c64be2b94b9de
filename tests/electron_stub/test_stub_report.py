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
                     ("09:00:00", "shift change")]
    assert s["timeline"][2]["detail"].startswith("Stack down 08:06–08:08")
    assert s["timeline"][-1]["detail"] == "m2: golden g-1: op-a → op-b"
    assert s["timeline"][0]["detail"] == "m1: golden g-1: op-a logged in"
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


def test_stack_faults_read_as_episodes_and_logouts_say_who():
    lines = [
        {"at": 5.0, "event": "login", "machine": "m1", "project": "golden", "tu": "g-1", "operator": "op-a"},
        {"at": 376.6, "event": "stack", "mode": "error_rate", "value": 0.3},
        {"at": 737.0, "event": "stack", "mode": "error_rate", "value": 0.0},
        {"at": 800.0, "event": "stack", "mode": "latency", "value": 2.5},
        {"at": 900.0, "event": "logout", "machine": "m1", "project": "golden", "tu": "g-1"},
        {"at": 4200.0, "event": "stack", "mode": "down", "value": None},
        {"at": 4500.0, "event": "stack", "mode": "up", "value": None},
    ]
    tl = report.timeline(lines, START)
    assert [(x["clock"], x["detail"]) for x in tl] == [
        ("08:00:05", "m1: golden g-1: op-a logged in"),
        ("08:06:17", "Stack: 30 % of writes failing from 08:06 to 08:12"),
        ("08:13:20", "Stack: answers 2.5 s late from 08:13 to the end"),
        ("08:15:00", "m1: golden g-1: op-a logged out"),
        ("09:10:00", "Stack down 09:10–09:15 (writes refused, queued and retried)"),
    ]


def test_clock_and_plus_seconds_columns_round_the_same_way():
    for at in (7.5, 7.49, 12.6, 1086.5, 0.0):
        clock = report.clock_of(START, at)
        assert int(clock[-2:]) == report.whole_s(at) % 60 and clock[3:5] == f"{report.whole_s(at) // 60 % 60:02d}"
    s = report.summarize(recorder([{"at": 7.6, "event": "crash", "machines": ["m1"]}]), [], [], report.RunStats())
    row = next(r for r in to_text(s).splitlines() if "crash" in r)
    assert "08:00:08" in row and " 8 " in row


def test_totals_per_type_come_first_and_never_answered_tasks_are_counted():
    lines = LINES + [created(50.0, "f", "unanswered_message"), closed(60.0, "f", "logout"),
                     created(51.0, "g", "follow_up_message", "chain"), closed(400.0, "g", "expired")]
    s = report.summarize(recorder(lines), [], [], report.RunStats(scenario="synthetic", wall_s=1.0, virtual_s=10))
    tot = {r["type"]: r for r in s["tasks"]["totals"]}
    assert tot["unanswered_message"] == {"type": "unanswered_message", "created": 5, "answered": 3, "overdue": 1,
                                         "still_open": 1, "other_closes": 1}
    assert tot["follow_up_message"]["other_closes"] == 1 and tot["unanswered_mail"]["overdue"] == 1
    assert s["tasks"]["never_answered"] == {"tasks": 2, "by_fate": {"overdue and still open at the end": 1,
                                                                    "closed at logout": 1}}
    text = to_text(s)
    order = ["Tasks: 7 created", "other closes", "Tasks by source and close reason", "Answer delay",
             "Never answered: 2 answer-awaiting task(s) — 1 overdue and still open at the end, 1 closed at logout"]
    pos = [text.index(w) for w in order]
    assert pos == sorted(pos), text


def test_pass_names_the_kinds_of_expectations():
    results = [Result(lineno=i, what=w, ok=True, detail="")
               for i, w in enumerate(["task_created"] * 2 + ["marker"] + ["task_created"])]
    s = report.summarize(recorder(LINES), results, [], report.RunStats())
    assert s["verdict"] == "PASS: 4 expectation(s) held (3 task_created, 1 marker), consistent, exited cleanly"
    assert "Expectations: 4 passed, 0 failed (3 task_created, 1 marker)" in to_text(s)


def test_follow_up_mails_by_source_list_all_five_sources_and_the_burst_rolls(tmp_path):
    """Issue 8 "Done when": the report gives follow-up mails by source (seed 001's five, a source
    that never fired shows 0) with what became of them, and the burst source's 50 % rolls from the
    candidates Stack received — in the JSON and in the text."""
    lines = LINES + [created(60.0, "p", "follow_up_mail", "post_chat"), closed(200.0, "p", "answered"),
                     created(61.0, "q", "follow_up_mail", "post_chat"), closed(961.0, "q", "expired"),
                     created(62.0, "r", "follow_up_mail", "burst"), closed(70.0, "r", "superseded"),
                     created(63.0, "s", "follow_up_mail", "mail_read")]
    stack_rows = {"g-1": [{"type": "follow_up_mail", "source": "burst", "outcome": "created"},
                          {"type": "follow_up_mail", "source": "burst", "outcome": "miss"},
                          {"type": "follow_up_mail", "source": "burst", "outcome": "miss"},
                          {"type": "follow_up_mail", "source": "burst", "outcome": "refused:offline"},
                          {"type": "follow_up_message", "source": "chain", "outcome": "miss"}]}
    stats = report.RunStats(scenario="synthetic", mail_candidates=report.mail_candidates(stack_rows))
    s = report.summarize(recorder(lines), [], [], stats)
    fm = s["follow_up_mail"]
    assert fm["created"] == 4
    assert list(fm["by_source"]) == ["post_chat", "mail_read", "burst", "notification", "last_mail_6h"]
    assert fm["by_source"]["post_chat"] == {"created": 2, "answered": 1, "expired": 1, "other_closes": 0,
                                            "still_open": 0}
    assert fm["by_source"]["burst"]["other_closes"] == 1 and fm["by_source"]["mail_read"]["still_open"] == 1
    assert fm["by_source"]["notification"]["created"] == 0 == fm["by_source"]["last_mail_6h"]["created"]
    assert fm["burst_rolls"] == {"rolls": 3, "hit": 1, "miss": 2, "hit_rate": 0.3333}
    report.write_json(s, tmp_path / "r.json")
    assert json.loads((tmp_path / "r.json").read_text())["follow_up_mail"] == fm
    text = to_text(s)
    assert "Follow-up mails by source (4 created)" in text
    row = next(r for r in text.splitlines() if r.strip().startswith("post_chat"))
    assert row.replace("│", " ").split() == ["post_chat", "2", "1", "1", "0", "0"]
    assert next(r for r in text.splitlines() if r.strip().startswith("notification")).replace("│", " ").split()[1] == "0"
    assert "Burst rolls (50 %): 3 rolled, 1 hit, 2 missed (33.3 % hit)" in text
    assert text.index("Tasks by source and close reason") < text.index("Follow-up mails by source") \
        < text.index("Answer delay")


def test_rows_left_queued_on_a_machine_are_reported_not_lost_from_view():
    """Outcomes are trace lines: rows still pending in a retired machine's SQLite (a ``fresh``
    shift change while a target cooled down) must show, by machine and target, in the JSON and
    the text (they leave when that machine next starts)."""
    stats = report.RunStats(scenario="synthetic", wall_s=1.0, virtual_s=10,
                            left_queued={"m1": {"crm-hook": 203, "audit": 2}, "m2": {}})
    s = report.summarize(recorder(LINES), [], [], stats)
    assert s["deliveries_left"] == {"m1": {"audit": 2, "crm-hook": 203}}
    text = to_text(s, width=200)
    assert "left queued at the end" in text and "m1: audit 2, crm-hook 203" in text
    quiet = report.summarize(recorder(LINES), [], [], report.RunStats(scenario="synthetic"))
    assert quiet["deliveries_left"] == {} and "left queued" not in to_text(quiet, width=200)


def test_sender_rows_that_change_no_state_read_as_what_they_are():
    """The timeline showed ``crm-hook active → active`` for a failed send (a counter change) and
    put the cooldown's start on the 109 row (``active → cooldown``, then ``cooldown → cooldown``
    for the 101 row that IS the start): each trace line carries the step's state after it.  The
    report names what each row is; only 100/101/103/106 that change the state read ``a → b``.
    The trace lines are unchanged (k01's, a recover of an active sender, a path-A Need Check)."""
    def tr(at, code, frm, to, note, sender="crm-hook"):
        return {"at": at, "event": "sender.transition", "sender": sender, "from": frm, "to": to,
                "code": code, "note": note}
    lines = [tr(10.0, 109, "active", "active", "failed_in_row=1"),
             tr(40.0, 109, "active", "cooldown", "failed_in_row=2"),
             tr(40.0, 101, "cooldown", "cooldown", "#1 until 2026-11-30 09:21:30 UTC (80.8 min)"),
             tr(1431.6, 104, "cooldown", "cooldown", "warm-up slot"),
             tr(1436.6, 105, "cooldown", "cooldown", "confirmed"),
             tr(5000.0, 102, "cooldown", "cooldown", "extension 1 until …"),
             tr(6000.0, 100, "cooldown", "active", "proven"),
             tr(6100.0, 106, "active", "active", "recovered by shift lead"),
             tr(7000.0, 109, "active", "need_check", "failed_in_row=2", "w"),
             tr(7000.0, 103, "need_check", "need_check", "path A: ladder exhausted", "w")]
    tl = report.timeline(lines, START)
    assert [(x["what"], x["detail"]) for x in tl] == [
        ("crm-hook failed send", "failed_in_row=1"),
        ("crm-hook failed send", "failed_in_row=2"),
        ("crm-hook active → cooldown", "cooldown started: #1 until 2026-11-30 09:21:30 UTC (80.8 min)"),
        ("crm-hook warm-up sent", "warm-up slot"),
        ("crm-hook warm-up confirmed", "confirmed"),
        ("crm-hook cooldown extended", "extension 1 until …"),
        ("crm-hook cooldown → active", "cooldown finished: proven"),
        ("crm-hook recovered by hand (active, counters reset)", "recovered by shift lead"),
        ("w failed send", "failed_in_row=2"),
        ("w active → need_check", "Need Check: path A: ladder exhausted"),
    ]
