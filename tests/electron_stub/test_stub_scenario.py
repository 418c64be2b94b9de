"""Scenario parser: every kind parses; every error names the file and line."""
from __future__ import annotations

import json

import pytest
from stubhelp import HEADER

from electron_stub import scenario as sc

EVERY_KIND = [
    {"kind": "tu", "project": "golden", "tu": "g1", "operator": "op"},
    {"kind": "favorite", "project": "golden", "tu": "g1", "ru": "r1", "active": True, "is_white": False,
     "spend_30d_usd": 1.0, "spend_total_usd": 2.0, "paid_actions": 3, "paid_with_bonuses_only": False,
     "chat_limit": None, "mail_limit": None, "markers": {"followUpChat": {"step": 1}}, "extra_key": 1},
    {"kind": "history", "project": "golden", "tu": "g1", "ru": "r1",
     "task": {"task_id": "h1", "type": "unanswered_message", "source": "socket", "created_at": -20,
              "closed_at": -10, "reason": "answered"}},
    {"kind": "chat_log", "project": "golden", "tu": "g1", "ru": "r1", "from": "tu", "at": -10, "id": "m0"},
    {"kind": "mail_log", "project": "golden", "tu": "g1", "ru": "r1", "from": "ru", "at": -99, "id": "ml0"},
    {"kind": "target", "name": "crm-hook", "channel": "webhook", "config": {}},
    {"kind": "rule", "name": "to crm", "conditions": {"source": "electron"}, "actions": [{"target": "crm-hook"}],
     "throttle_seconds": 60},
    {"kind": "group", "name": "night", "priority": 1, "senders": ["crm-hook"], "failed_in_row": 1,
     "from_time": "22:00", "to_time": "06:00"},
    {"t": 0, "kind": "login", "project": "golden", "tu": "g1", "operator": "op", "fresh": True},
    {"t": 1, "kind": "online", "project": "golden", "ru": "r1", "online": True},
    {"t": 2, "kind": "message", "project": "golden", "tu": "g1", "ru": "r1", "from": "ru", "id": "m1", "body": "hi"},
    {"t": 2, "kind": "like", "project": "golden", "tu": "g1", "ru": "r1", "like": "rose"},
    {"t": 3, "kind": "mail", "project": "golden", "tu": "g1", "ru": "r1", "from": "ru", "id": "ml1"},
    {"t": 4, "kind": "mail_read", "project": "golden", "tu": "g1", "ru": "r1", "mail_id": "ml0", "event_key": "k"},
    {"t": 5, "kind": "email", "project": "golden", "tu": "g1", "ru": "r1", "id": "e1", "received_at": 1.5},
    {"t": 6, "kind": "notification", "project": "chathouse", "tu": "c1", "ru": "r2", "type": "ONLINE_NOW"},
    {"t": 7, "kind": "limits", "project": "prime", "tu": "p1", "ru": "r3", "chat": 1, "mail": 0},
    {"t": 8, "kind": "system", "project": "prime", "tu": "p1", "ru": "r3", "text": "limits opened"},
    {"t": 8, "kind": "dialog_created", "project": "prime", "tu": "p1", "ru": "r3"},
    {"t": 9, "kind": "icebreaker", "project": "chathouse", "tu": "c1", "ru": "r2"},
    {"t": 10, "kind": "chat_request", "project": "prime", "tu": "p1", "ru": "r3"},
    {"t": 11, "kind": "block", "project": "golden", "tu": "g1", "ru": "r1", "by": "ru"},
    {"t": 12, "kind": "unblock", "project": "golden", "tu": "g1", "ru": "r1", "by": "ru"},
    {"t": 13, "kind": "favorite", "project": "golden", "tu": "g1", "ru": "r1", "active": False},
    {"t": 13, "kind": "socket_down", "project": "chathouse", "tu": "c1"},
    {"t": 13, "kind": "empty_dialog", "project": "chathouse", "tu": "c1", "ru": "r4"},
    {"t": 13, "kind": "mutual_like", "project": "chathouse", "tu": "c1", "ru": "r5"},
    {"t": 13, "kind": "reconnect", "project": "chathouse", "tu": "c1"},
    {"t": 14, "kind": "crash"},
    {"t": 15, "kind": "stack", "mode": "error_rate", "value": 0.5},
    {"t": 15, "kind": "stack", "mode": "down"},
    {"t": 16, "kind": "logout", "project": "golden", "tu": "g1", "operator": "op"},
    {"t": 17, "kind": "emit", "source": "electron", "subject": "alert", "action": "fired", "priority": "high",
     "payload": {"x": 1}, "dedup_key": "d", "ttl_s": 60},
    {"t": 17, "kind": "target_fault", "target": "crm-hook", "mode": "error_rate", "value": 1.0},
    {"t": 17, "kind": "manage", "method": "groups.create", "params": {"name": "g"}, "error": -32602},
    {"t": 17, "kind": "expect", "what": "task_overdue", "type": "like", "tu": "g1", "ru": "r1"},
    {"t": 17, "kind": "expect", "what": "delivery", "target": "crm-hook", "status": "pending", "between": [0, 17],
     "min": 1, "max": 1},
    {"t": 17, "kind": "expect", "what": "sender", "sender": "crm-hook", "state": "cooldown", "cooldown_times": 1},
    {"t": 17, "kind": "expect", "what": "history", "sender": "crm-hook", "code": 101, "between": [0, 17],
     "min": 1, "max": 1},
    {"t": 17, "kind": "expect", "what": "decision", "tu": "g1", "ru": "r1", "outcome": "miss", "between": [0, 17]},
    {"t": 17, "kind": "expect", "what": "marker", "tu": "g1", "ru": "r1", "name": "followUpChat", "value": None},
    {"t": 17, "kind": "expect", "what": "count", "type": "like", "between": [0, 17], "min": 0, "max": 2},
    {"t": 17, "kind": "expect", "what": "requests", "tu": "g1", "method": "get_mail", "ru": "r1", "between": [0, 17],
     "min": 1, "max": 1},
]


def parse(*objs, header=HEADER):
    return sc.parse_lines([header] + [o if isinstance(o, str) else json.dumps(o) for o in objs], "x.jsonl")


def test_every_kind_parses_with_line_numbers():
    s = parse(*EVERY_KIND)
    assert s.header.seed == 3 and s.header.operator.chat_delay_s == (10, 10)
    assert [type(x).__name__ for x in s.world] == ["Tu", "Favorite", "History", "ChatLog", "MailLog",
                                                   "Target", "Rule", "Group"]
    assert len(s.timeline) == len(EVERY_KIND) - 8
    assert s.timeline[0].lineno == 10 and s.timeline[-1].lineno == len(EVERY_KIND) + 1
    assert s.world[1].markers == {"followUpChat": {"step": 1}}
    assert s.timeline[-3].value is None and s.abs(10) == s.start + 10
    assert s.world[0].stack_favorites is True  # README revision 2: the default
    assert (s.timeline[-1].method, s.timeline[-1].ru) == ("get_mail", "r1")
    kinds = {o["kind"] for o in EVERY_KIND} | {"header"}
    assert kinds == set(sc.KINDS)


@pytest.mark.parametrize("bad, line, words", [
    ({"t": 1, "kind": "teleport"}, 2, "unknown kind"),
    ({"t": 1, "kind": "online", "project": "golden", "ru": "r", "online": "yes"}, 2, "$.online"),
    ({"t": 1, "kind": "message", "project": "golden", "tu": "a", "ru": "r", "from": "me", "id": "1"}, 2, "$.from"),
    ({"t": 1, "kind": "message", "project": "mars", "tu": "a", "ru": "r", "from": "ru", "id": "1"}, 2, "$.project"),
    ({"kind": "online", "project": "golden", "ru": "r", "online": True}, 2, "without t"),
    ({"t": 1, "kind": "like", "project": "golden", "tu": "a", "ru": "r", "like": "wink"}, 2, "not a golden like"),
    ({"t": 1, "kind": "notification", "project": "golden", "tu": "a", "ru": "r", "type": "ONLINE_NOW"}, 2, "chathouse"),
    ({"t": 1, "kind": "empty_dialog", "project": "prime", "tu": "a", "ru": "r"}, 2, "chathouse only"),
    ({"t": 1, "kind": "mutual_like", "project": "golden", "tu": "a", "ru": "r"}, 2, "chathouse only"),
    ({"t": 1, "kind": "socket_down", "project": "golden"}, 2, "tu"),
    ({"t": 1, "kind": "expect", "what": "requests", "tu": "a", "between": [0, 1], "min": 0, "max": 1}, 2,
     "needs method"),
    ({"t": 1, "kind": "expect", "what": "requests", "tu": "a", "method": "m", "between": [0, 1], "min": 2,
      "max": 1}, 2, "min <= max"),
    ({"kind": "tu", "project": "golden", "tu": "a", "stack_favorites": "no"}, 2, "$.stack_favorites"),
    ({"t": 1, "kind": "stack", "mode": "error_rate"}, 2, "error_rate"),
    ({"t": 1, "kind": "expect", "what": "delivery", "target": "x", "min": 0, "max": 1}, 2, "needs between"),
    ({"t": 1, "kind": "expect", "what": "sender", "sender": "x", "state": "resting"}, 2, "$.state"),
    ({"t": 1, "kind": "target_fault", "target": "x", "mode": "explode"}, 2, "$.mode"),
    ({"kind": "target", "name": "x", "channel": "pigeon"}, 2, "$.channel"),
    ({"t": 1, "kind": "expect", "what": "task_created", "type": "like", "tu": "a", "ru": "r"}, 2, "between"),
    ({"t": 1, "kind": "expect", "what": "marker", "tu": "a", "ru": "r", "name": "x"}, 2, "value"),
    ({"t": 1, "kind": "expect", "what": "no_task", "type": "like", "tu": "a", "ru": "r", "between": [5, 1]}, 2, "empty"),
    ('{"t": 1, "kind": "crash"', 2, "malformed JSON"),
    ('[1, 2]', 2, "JSON object"),
    ({"t": 1}, 2, "missing kind"),
])
def test_errors_name_the_line(bad, line, words):
    with pytest.raises(sc.ScenarioError) as ei:
        parse(bad)
    assert ei.value.lineno == line and words in str(ei.value)
    assert str(ei.value).startswith(f"x.jsonl:{line}:")


def test_timeline_out_of_order_names_the_later_line():
    with pytest.raises(sc.ScenarioError, match=r"x.jsonl:3: timeline out of order"):
        parse({"t": 5, "kind": "crash"}, {"t": 4, "kind": "crash"})


def test_world_after_timeline_and_header_position():
    with pytest.raises(sc.ScenarioError, match=r":3: initial-world line"):
        parse({"t": 5, "kind": "crash"}, {"kind": "tu", "project": "golden", "tu": "g"})
    with pytest.raises(sc.ScenarioError, match=r":1: line 1 must be the header"):
        sc.parse_lines([json.dumps({"t": 1, "kind": "crash"})], "x.jsonl")
    with pytest.raises(sc.ScenarioError, match=r":2: the header must be line 1"):
        parse(HEADER)
    with pytest.raises(sc.ScenarioError, match=r":1: bad start"):
        sc.parse_lines([HEADER.replace("2026-11-30T08:00:00Z", "yesterday")], "x.jsonl")


def test_blank_lines_are_skipped_and_counted():
    s = sc.parse_lines([HEADER, "", json.dumps({"t": 1, "kind": "crash"})], "x.jsonl")
    assert s.timeline[0].lineno == 3


def test_missing_file_is_a_scenario_error(tmp_path):
    with pytest.raises(sc.ScenarioError, match="cannot read"):
        sc.load(tmp_path / "nope.jsonl")


def test_shared_scenarios_all_parse(shared_dir):
    shared = shared_dir
    files = sorted((shared / "scenarios").rglob("*.jsonl"))
    assert files
    for f in files:
        s = sc.load(f)
        assert s.timeline and s.header.format == 1


def test_a_timeline_line_past_duration_is_an_error_naming_it():
    """Found by the breaker: such lines were skipped silently (the replay stops at duration_s)."""
    dur = json.loads(HEADER)["duration_s"]
    parse({"t": dur, "kind": "crash"})  # at the very end: still runs
    with pytest.raises(sc.ScenarioError, match=r"x.jsonl:3: t .* is past the end of the scenario"):
        parse({"t": 1, "kind": "crash"}, {"t": dur + 1, "kind": "crash"})
