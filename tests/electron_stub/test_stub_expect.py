"""Expectation evaluator and the whole-run consistency checks (each violation caught)."""
from __future__ import annotations

import json

import pytest

from stubhelp import HEADER

from electron_stub import expect as ex
from electron_stub import scenario as sc
from electron_stub.trace import Recorder

S = sc.parse_lines([HEADER], "x")
T0 = S.start


def E(**kw):
    return sc.parse_lines([HEADER, json.dumps({"t": 50, "kind": "expect", **kw})], "x.jsonl").timeline[0]


def created(rec, tid, type_="unanswered_message", t=10.0, ttl=120, ru="r", source="socket", **kw):
    return rec.task_created({"seq": 1, "task": {"task_id": tid, "type": type_, "project": "golden", "tu": "g", "ru": ru,
                                                "source": source, "created_at": T0 + t, "deadline": T0 + t + ttl, **kw}})


def closed(rec, tid, t, reason="answered"):
    return rec.task_closed({"seq": 2, "task_id": tid, "type": "x", "tu": "g", "ru": "r", "reason": reason,
                            "closed_at": T0 + t})


def no_marker(tu, ru, name):
    return None


def test_window_tolerance_and_source():
    rec = Recorder(T0)
    created(rec, "a", t=10.5)
    ok = lambda **kw: ex.evaluate(E(**kw), rec, no_marker).ok  # noqa: E731
    base = dict(type="unanswered_message", tu="g", ru="r")
    assert ok(what="task_created", between=[11, 12], **base)  # 1 s tolerance below
    assert ok(what="task_created", between=[0, 9.5], **base)  # and above
    assert not ok(what="task_created", between=[12, 20], **base)
    assert not ok(what="task_created", between=[0, 20], source="chain", **base)
    assert ok(what="no_task", between=[12, 20], **base)
    assert not ok(what="no_task", between=[0, 20], **base)
    assert ok(what="count", type="unanswered_message", between=[0, 20], min=1, max=1)
    assert not ok(what="count", type="unanswered_message", between=[0, 20], min=2, max=3)
    r = ex.evaluate(E(what="no_task", between=[0, 20], **base), rec, no_marker)
    assert r.lineno == 2 and "found 1" in r.detail


def test_open_and_closed():
    rec = Recorder(T0)
    created(rec, "a")
    base = dict(type="unanswered_message", tu="g", ru="r")
    assert ex.evaluate(E(what="task_open", **base), rec, no_marker).ok
    assert not ex.evaluate(E(what="task_closed", **base), rec, no_marker).ok
    closed(rec, "a", 30, "expired")
    assert not ex.evaluate(E(what="task_open", **base), rec, no_marker).ok
    assert ex.evaluate(E(what="task_closed", reason="expired", **base), rec, no_marker).ok
    assert not ex.evaluate(E(what="task_closed", reason="answered", **base), rec, no_marker).ok
    assert not ex.evaluate(E(what="task_closed", type="like", tu="g", ru="r"), rec, no_marker).ok


def test_marker_subset_and_absent():
    rec = Recorder(T0)
    held = {"followUpChat": {"sourceUnansweredTaskId": "x", "step": 0, "nextCheckAt": "…"}}
    of = lambda tu, ru, name: held.get(name)  # noqa: E731
    m = dict(what="marker", tu="g", ru="r", name="followUpChat")
    assert ex.evaluate(E(value={"step": 0}, **m), rec, of).ok
    assert not ex.evaluate(E(value={"step": 1}, **m), rec, of).ok
    assert not ex.evaluate(E(value=None, **m), rec, of).ok
    assert ex.evaluate(E(value=None, what="marker", tu="g", ru="r", name="followUpMail"), rec, of).ok
    assert ex.subset({"a": {"b": 1}}, {"a": {"b": 1.0, "c": 2}}) and not ex.subset({"a": 1}, {})


def test_consistency_catches_each_violation():
    rec = Recorder(T0)
    created(rec, "ok1", t=10)
    closed(rec, "ok1", 20)
    created(rec, "ok2", t=20)  # created when the first closed: fine
    created(rec, "twice", type_="like", t=5, ttl=300, ru="q")
    closed(rec, "twice", 6, "answered")
    closed(rec, "twice", 6, "answered")  # identical re-delivery: not a violation
    closed(rec, "twice", 7, "expired")  # a different second close: violation
    created(rec, "dup", t=30)  # while ok2 is open: two open
    created(rec, "bad", type_="follow_up_message", t=40, ttl=200, ru="z")  # wrong TTL
    created(rec, "em", type_="unanswered_email", t=40, ttl=43200 - 30, ru="e")  # received 30 s before
    created(rec, "em2", type_="unanswered_email", t=40, ttl=43200, ru="e2")  # anchored on created_at: wrong
    samples = [ex.MessageSample(at=1, tu="g", ru="r", msg_id="m1", lineno=9, open_task="ok1"),
               ex.MessageSample(at=2, tu="g", ru="y", msg_id="m2", lineno=10, open_task=None)]
    v = ex.consistency(rec, lambda tu, ru: [T0 + 10] if ru.startswith("e") else [], samples)
    kinds = sorted(x.kind for x in v)
    assert kinds == ["closed_twice", "deadline", "deadline", "two_open", "unanswered_missing"], v
    assert rec.redelivered == 1
    assert any("line 10" in x.detail for x in v)
    assert any("em2" in x.detail for x in v) and not any("'em'" in x.detail or " em " in x.detail for x in v)


def test_reannounced_task_is_not_new():
    rec = Recorder(T0)
    assert created(rec, "a") is not None
    assert created(rec, "a") is None and rec.redelivered == 1 and len(rec.tasks) == 1


def test_decision_expectation_over_why_rows():
    rows = [{"at": T0 + 80.2, "type": "follow_up_message", "source": "chain", "outcome": "refused:offline"},
            {"at": T0 + 150.0, "type": "follow_up_message", "source": "chain", "outcome": "created"},
            {"at": T0 + 150.0, "type": "unanswered_message", "source": "socket", "outcome": "created"}]
    base = dict(what="decision", tu="g", ru="r")
    ok = lambda **kw: ex.evaluate_decision(E(**base, **kw), rows, T0).ok  # noqa: E731
    assert ok(type="follow_up_message", outcome="created", between=[80, 201])
    assert ok(type="follow_up_message", outcome="created", between=[151, 160])  # 1 s tolerance
    assert not ok(type="follow_up_message", outcome="created", between=[152, 160])
    assert ok(outcome="refused:offline", between=[0, 100])
    assert ok(outcome="refused", between=[0, 100])  # any reason
    assert not ok(outcome="refused:no_chat_limit", between=[0, 300])
    assert not ok(type="like", outcome="created", between=[0, 300])
    assert not ok(outcome="miss", between=[0, 300])
    r = ex.evaluate_decision(E(**base, outcome="miss", between=[0, 300]), rows, T0)
    assert "found 0" in r.detail and "refused:offline" in r.detail and r.lineno == 2


def test_decision_expectation_needs_outcome_and_window():
    import pytest
    for missing in ("outcome", "between"):
        line = {"t": 1, "kind": "expect", "what": "decision", "tu": "a", "ru": "r", "outcome": "created",
                "between": [0, 1]}
        del line[missing]
        with pytest.raises(sc.ScenarioError, match=missing):
            sc.parse_lines([HEADER, json.dumps(line)], "x.jsonl")


# issue 6 item 9: overdue and the revised semantics (DESIGN §6, §7, §9) ------------------------

LONG = HEADER.replace('"duration_s":100,', '"duration_s":1000,')


def updated(rec, tid, t):
    return rec.task_updated({"seq": 3, "task_id": tid, "type": "unanswered_message", "tu": "g", "ru": "r",
                             "overdue": True, "deadline": T0 + t, "at": T0 + t}, T0 + t)


def test_task_overdue_needs_open_past_deadline_and_announced():
    rec = Recorder(T0)
    created(rec, "a", t=10, ttl=120)  # deadline at 130
    base = dict(what="task_overdue", type="unanswered_message", tu="g", ru="r")
    at = lambda t: sc.parse_lines([LONG, json.dumps({"t": t, "kind": "expect", **base})], "x").timeline[0]  # noqa: E731
    assert not ex.evaluate(at(131), rec, no_marker).ok  # past the deadline, but not announced
    assert updated(rec, "a", 130) is not None
    assert updated(rec, "a", 130) is None and rec.redelivered == 1  # announced once
    assert not ex.evaluate(at(120), rec, no_marker).ok  # not past the deadline yet
    r = ex.evaluate(at(131), rec, no_marker)
    assert r.ok and "announced overdue 1" in r.detail
    closed(rec, "a", 500)
    assert not ex.evaluate(at(600), rec, no_marker).ok
    lines = [x for x in rec.sorted_lines() if x["event"] == "task.updated"]
    assert lines == [{"at": 130.0, "event": "task.updated", "task_id": "a", "type": "unanswered_message",
                      "tu": "g", "ru": "r", "overdue": True, "deadline": 130.0}]


def test_task_overdue_line_parses_and_needs_its_keys():
    import pytest
    with pytest.raises(sc.ScenarioError, match="task_overdue needs"):
        sc.parse_lines([HEADER, json.dumps({"t": 5, "kind": "expect", "what": "task_overdue", "tu": "g"})], "x")


def scenario_with(*lines):
    return sc.parse_lines([LONG] + [json.dumps(x) for x in lines], "x.jsonl")


FAV = {"kind": "favorite", "project": "golden", "tu": "g", "ru": "f", "active": True, "is_white": False}


def test_consistency_knows_the_revised_semantics():
    s = scenario_with(FAV, {"t": 100, "kind": "online", "project": "golden", "ru": "f", "online": False},
                      {"t": 150, "kind": "favorite", "project": "golden", "tu": "g", "ru": "late", "active": True})
    rec = Recorder(T0)
    created(rec, "exp", t=0, ttl=120, ru="r")
    updated(rec, "exp", 120)
    closed(rec, "exp", 200, "expired")  # answer-awaiting task expired
    created(rec, "silent", type_="like", t=0, ttl=300, ru="s")  # open past its deadline, never announced
    created(rec, "nf", type_="follow_up_message", t=10, ttl=300, ru="nobody")  # not a favorite
    created(rec, "early", type_="follow_up_message", t=10, ttl=300, ru="late")  # listed only from 150
    closed(rec, "early", 20, "answered")
    created(rec, "ok", type_="follow_up_message", t=160, ttl=300, ru="late")
    closed(rec, "ok", 170, "answered")
    created(rec, "off", type_="follow_up_message", t=90, ttl=300, ru="f")  # RU offline at 100, open to 130
    closed(rec, "off", 130, "expired")
    created(rec, "off_ok", type_="follow_up_mail", t=95, ttl=900, ru="f")
    closed(rec, "off_ok", 116, "expired")  # within the 15 s Golden pass + 1 s
    conflicts = [{"key": "k", "first": "PUT /x {}", "then": "PUT /x {\"a\":1}", "at": None}]
    v = ex.consistency(rec, lambda tu, ru: [], [], scenario=s, end=T0 + 400, stack_conflicts=conflicts)
    kinds = sorted((x.kind, x.detail.split()[1]) for x in v if x.kind != "key_conflict")
    assert kinds == [("answer_awaiting_expired", "exp"), ("follow_up_non_favorite", "early"),
                     ("follow_up_non_favorite", "nf"), ("follow_up_offline_open", "off"),
                     ("overdue_missing", "silent")], v
    assert [x.kind for x in v].count("key_conflict") == 1


def test_sidecar_expectations_are_the_replays_not_the_trace_evaluators():
    """``sender`` / ``history`` / ``delivery`` ask the sidecars (senders_lines, routing_world):
    evaluating them from the trace alone is a programming error, never a silent pass."""
    rec = Recorder(T0)
    assert ex.NOT_YET == {}  # every expectation kind of the format is evaluated today
    for what, kw, where in (("sender", dict(sender="t", state="active"), "senders_lines"),
                            ("history", dict(sender="t", code=100, between=[0, 1], min=0, max=9), "senders_lines"),
                            ("delivery", dict(target="t", between=[0, 1], min=0, max=9), "routing_world")):
        with pytest.raises(ValueError, match=where):
            ex.evaluate(E(what=what, **kw), rec, no_marker)


def test_requests_expectation_counts_per_tu_method_and_ru_in_the_window():
    """README revision 2 ``requests``: seed 001 «mail history читається один раз» as a scenario check."""
    rec = Recorder(T0)
    for at, ru in ((10, "r"), (10, "r2"), (30, "r")):
        rec.platform_request(T0 + at, "golden", "g", "get_mail", {"ru": ru})
    one = ex.evaluate(E(what="requests", tu="g", method="get_mail", ru="r", between=(0, 20), min=1, max=1), rec,
                      no_marker)
    assert one.ok and "found 1" in one.detail
    every = ex.evaluate(E(what="requests", tu="g", method="get_mail", between=(0, 28), min=0, max=2), rec, no_marker)
    assert every.ok  # 30 is outside [0, 28] + the 1 s tolerance
    too_many = ex.evaluate(E(what="requests", tu="g", method="get_mail", ru="r", between=(0, 40), min=1, max=1), rec,
                           no_marker)
    assert not too_many.ok and "wanted 1..1, found 2" in too_many.detail
    assert ex.evaluate(E(what="requests", tu="other", method="get_mail", between=(0, 40), min=0, max=0), rec,
                       no_marker).ok
