"""The harness plays sender health's lines (scenarios README): ``group`` lines through the manage
API on every started machine, ``manage`` lines with and without an expected error (which must
change nothing), ``sender`` / ``history`` expectations — end to end against the real sidecar."""
from __future__ import annotations

import asyncio
import json

from electron_stub import report
from electron_stub import scenario as sc
from electron_stub.replay import Replay

H = {"kind": "header", "format": 1, "name": "senders", "start": "2026-11-30T08:00:00Z", "seed": 3, "duration_s": 200,
     "operator": {"chat_answer_p": 0.0, "chat_delay_s": [10, 10], "mail_answer_p": 0.0, "mail_delay_s": [60, 60]}}
LINES = [
    H,
    {"kind": "tu", "project": "golden", "tu": "g1", "operator": "op-1"},
    {"kind": "group", "name": "night", "priority": 5, "senders": [], "failed_in_row": 1,
     "from_time": "22:00", "to_time": "06:00"},
    {"t": 0, "kind": "login", "project": "golden", "tu": "g1", "operator": "op-1"},
    {"t": 5, "kind": "manage", "method": "groups.create", "params": {"name": "dup", "priority": 5}, "error": -32602},
    {"t": 6, "kind": "manage", "method": "groups.create", "params": {"name": "w", "priority": 6, "from_time": "24:00",
                                                                      "to_time": "01:00"}, "error": -32602},
    {"t": 7, "kind": "manage", "method": "groups.assignments.add",
     "params": {"items": [{"sender": "ghost", "groups": ["night"]}]}, "error": -32602},
    {"t": 8, "kind": "manage", "method": "groups.patch", "params": {"id": "night", "failed_in_row": 3}},
    {"t": 20, "kind": "crash"},
    {"t": 30, "kind": "manage", "method": "senders.recover", "params": {"sender": "stack"}},
    {"t": 40, "kind": "expect", "what": "sender", "sender": "stack", "state": "active", "cooldown_times": 0},
    # stack was active: recovering it is a no-op that writes no 106 (issue 9)
    {"t": 40, "kind": "expect", "what": "history", "sender": "stack", "code": 106, "between": [29, 31], "min": 0, "max": 0},
    {"t": 40, "kind": "expect", "what": "history", "sender": "stack", "code": 101, "between": [0, 40], "min": 0, "max": 0},
    # these must fail: the harness must not pass them vacuously
    {"t": 50, "kind": "manage", "method": "groups.create", "params": {"name": "ok", "priority": 9}, "error": -32602},
    {"t": 50, "kind": "manage", "method": "senders.recover", "params": {"sender": "ghost"}},
    {"t": 50, "kind": "expect", "what": "sender", "sender": "stack", "state": "cooldown"},
    {"t": 50, "kind": "expect", "what": "history", "sender": "stack", "code": 106, "between": [0, 50], "min": 2, "max": 5},
]


def test_sender_lines_end_to_end(tmp_path):
    s = sc.parse_lines([json.dumps(x) for x in LINES], "senders.jsonl")
    rp = Replay(s, data_dir=tmp_path / "data")
    asyncio.run(rp.run())
    text = report.render(rp.rec, rp.results, rp.verdict(), rp.stats)
    assert [(r.lineno, r.what, r.ok) for r in rp.results] == [
        (5, "manage", True), (6, "manage", True), (7, "manage", True), (8, "manage", True),
        (10, "manage", True), (11, "sender", True), (12, "history", True), (13, "history", True),
        (14, "manage", False), (15, "manage", False), (16, "sender", False), (17, "history", False)], text
    assert "succeeded, expected error -32602" in rp.results[8].detail
    # the recover of an active stack is a no-op: no transition (it used to trace active → active)
    assert [x["event"] for x in rp.rec.sorted_lines() if x["event"] == "sender.transition"] == []
