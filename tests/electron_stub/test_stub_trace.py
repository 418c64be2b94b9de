"""Trace lines: README keys, relative instants, sorted output."""
from __future__ import annotations

import json

from electron_stub.trace import Recorder

T0 = 1_796_025_600.0


def test_trace_lines_and_order(tmp_path):
    rec = Recorder(T0)
    rec.task_created({"seq": 1, "task": {"task_id": "t1", "type": "unanswered_message", "project": "golden", "tu": "g",
                                         "ru": "r", "source": "socket", "created_at": T0 + 40.1, "deadline": T0 + 160.1,
                                         "vip": None, "meta": {}}})
    rec.operator_sent(T0 + 75, "chat", "golden", "g", "r", "t1")
    rec.task_closed({"seq": 2, "task_id": "t1", "type": "unanswered_message", "tu": "g", "ru": "r",
                     "reason": "answered", "closed_at": T0 + 75})
    rec.chain_attempt({"seq": 3, "tu": "g", "ru": "r", "step": 1, "chance": 0.75, "hit": True, "outcome": "created",
                       "at": T0 + 80}, T0 + 80)
    rec.sender_state({"seq": 4, "sender": "stack:primary", "state": "cooldown", "code": 101, "note": "n",
                      "at": T0 + 90}, T0 + 90)
    rec.add_marker_acks([{"at": T0 + 76, "tu": "g", "ru": "r", "name": "followUpChat", "value": {"step": 0}}])
    rec.context(T0 + 1, "crash", machines=["m1"])
    n = rec.write(tmp_path / "t.jsonl")
    lines = [json.loads(x) for x in (tmp_path / "t.jsonl").read_text().splitlines()]
    assert n == len(lines) == 7
    assert [x["at"] for x in lines] == sorted(x["at"] for x in lines)
    ev = {x["event"]: x for x in lines}
    assert ev["task.created"] == {"at": 40.1, "event": "task.created", "task_id": "t1", "type": "unanswered_message",
                                  "project": "golden", "tu": "g", "ru": "r", "source": "socket", "deadline": 160.1,
                                  "vip": None, "created_at": 40.1}
    assert ev["task.closed"]["reason"] == "answered" and ev["task.closed"]["at"] == 75
    assert ev["operator.sent"]["channel"] == "chat" and ev["marker.acked"]["value"] == {"step": 0}
    assert ev["chain.attempt"]["outcome"] == "created" and ev["chain.attempt"]["step"] == 1
    assert ev["sender.transition"]["from"] == "active" and ev["sender.transition"]["to"] == "cooldown"
    assert rec.open_task("g", "r", "unanswered_message") is None


def test_task_diff_and_cli(tmp_path):
    from electron_stub import cli
    from electron_stub.trace import read, task_diff

    def trace(path, ids):
        rec = Recorder(T0)
        for i, tid in enumerate(ids):
            rec.task_created({"task": {"task_id": tid, "type": "like", "project": "golden", "tu": "g", "ru": "r",
                                       "source": "socket", "created_at": T0 + i, "deadline": T0 + i + 300}})
        rec.task_closed({"task_id": ids[0], "reason": "expired", "closed_at": T0 + 300})
        rec.write(path)
        return path

    a, b = trace(tmp_path / "a", ["x", "y"]), trace(tmp_path / "b", ["x", "z"])
    d = task_diff(read(a), read(b))
    assert [x["task_id"] for x in d["only_a"]] == ["y"] and [x["task_id"] for x in d["only_b"]] == ["z"]
    assert task_diff(read(a), read(a)) == {"only_a": [], "only_b": []}
    assert cli.main(["diff", str(a), str(a)]) == 0 and cli.main(["diff", str(a), str(b)]) == 1


class _NoScan(dict):
    """A task table that fails the test when anything walks it whole."""

    def _scan(self, *a, **kw):
        raise AssertionError("Recorder scanned every task ever recorded")

    values = items = keys = __iter__ = _scan


def _task(rec, tid, ru, at, type_="unanswered_message"):
    rec.task_created({"task": {"task_id": tid, "type": type_, "project": "golden", "tu": "g", "ru": ru,
                               "source": "socket", "created_at": T0 + at, "deadline": T0 + at + 120}})


def test_open_task_cost_is_flat_as_the_run_grows():
    """Issue 11: the replay asks ``open_task`` after every RU message; it must not walk every task
    recorded so far (that was O(n²) over a shift).  Thousands of closed tasks on many pairs, then the
    question is answered without touching the table as a whole, and answers right."""
    rec = Recorder(T0)
    for i in range(3000):
        _task(rec, f"old-{i}", f"r{i % 300}", i)
        rec.task_closed({"task_id": f"old-{i}", "reason": "answered", "closed_at": T0 + i + 1})
    _task(rec, "late", "r7", 5000.0)
    _task(rec, "early", "r7", 4000.0)  # announced after "late" but created before it
    _task(rec, "like", "r7", 4500.0, type_="like")
    rec.tasks = _NoScan(rec.tasks)
    assert rec.open_task("g", "r7", "unanswered_message").task_id == "early"
    assert rec.open_task("g", "r8", "unanswered_message") is None
    rec.task_closed({"task_id": "early", "reason": "answered", "closed_at": T0 + 5001})
    assert rec.open_task("g", "r7", "unanswered_message").task_id == "late"
    assert rec.open_task("g", "r7", "like").task_id == "like"


def test_platform_request_lines_name_the_pair_and_sort_by_tu_within_an_instant():
    """README revision 2: a ``platform.request`` line per request (``project``, ``tu``, ``method``,
    ``ru`` where it names one); in trace order by TU within an instant, whatever the arrival."""
    rec = Recorder(T0)
    rec.platform_request(T0 + 5, "golden", "g2", "online_ru", {})
    rec.platform_request(T0 + 5, "golden", "g1", "get_mail", {"ru": "r1"})
    rec.platform_request(T0 + 5, "golden", "g1", "chat_history", {"ru_ids": ["r1", "r2"]})
    rec.platform_request(T0 + 5, "golden", "g1", "chat_history", {"ru_ids": ["r3"]})
    rec.platform_request(T0 + 6, "prime", "p1", "dialogs", {"criteria": ["active"], "cursor": 2})
    lines = rec.sorted_lines()
    assert [(x["tu"], x["method"], x.get("ru"), x.get("ru_ids")) for x in lines] == [
        ("g1", "get_mail", "r1", None), ("g1", "chat_history", None, ["r1", "r2"]),
        ("g1", "chat_history", "r3", None), ("g2", "online_ru", None, None), ("p1", "dialogs", None, None)]
    assert lines[0] == {"at": 5.0, "event": "platform.request", "project": "golden", "tu": "g1",
                        "method": "get_mail", "ru": "r1"}
    assert lines[-1]["criteria"] == ["active"]
    assert rec.requests_of("g1", "chat_history", None, T0, T0 + 10) == 2
    assert rec.requests_of("g1", "chat_history", "r2", T0, T0 + 10) == 1  # one of several RUs named
    assert rec.requests_of("g1", "get_mail", "r1", T0 + 5.5, T0 + 10) == 0  # outside the window
