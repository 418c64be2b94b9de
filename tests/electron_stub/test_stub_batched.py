"""Batched frames (issue 11 item 3): the replay that sends each world event with its advance in
one ``platform.events`` frame gives the SAME result as the one that sends ``clock.advance_to``
then ``platform.event`` — the same trace (tasks, closes, chain rolls, marker acks, in order),
the same expectation results and samples — in fewer round trips."""
from __future__ import annotations

import asyncio
import json

import pytest

from electron_stub import scenario as sc
from electron_stub.generate import generate
from electron_stub.replay import Replay


def _run(scenario, data_dir, batch: bool) -> Replay:
    rp = Replay(scenario, data_dir=data_dir, quiet=True, batch=batch)
    asyncio.run(rp.run())
    return rp


def _lines(rp: Replay) -> list[str]:
    """The trace, lines at one instant in a canonical order: the order in which Stack
    acknowledges concurrent writes of one pump pass is not the sidecar's (two replays of the
    same mode differ there too — issue 11's byte-identical traces)."""
    return sorted((json.dumps(x, sort_keys=True) for x in rp.rec.sorted_lines()),
                  key=lambda line: (json.loads(line)["at"], line))


def _same(a: Replay, b: Replay) -> None:
    assert _lines(a) == _lines(b)
    assert [(r.ok, r.lineno) for r in a.results] == [(r.ok, r.lineno) for r in b.results]
    assert a.samples == b.samples and a.requests == b.requests
    assert a.verdict() == b.verdict() == []
    assert a.stats.warnings == b.stats.warnings


@pytest.mark.parametrize("name", ["s01_chain_starts_at_close", "t02_like_prime",
                                  "t01_unanswered_overdue_one_task_per_burst",
                                  # the router and sender health inside the group commit:
                                  # dedup, throttle, retry ladder at its instants, probes
                                  "r03_dedup_window", "r04_throttle_critical_bypass",
                                  "r05_retry_ladder", "k06_probe_terminal_path_b"])
def test_batched_replay_equals_one_by_one_on_seed_scenarios(tmp_path, name, shared_dir):
    scenario = sc.load(shared_dir / "scenarios" / "seed" / f"{name}.jsonl")
    one, batched = _run(scenario, tmp_path / "one", False), _run(scenario, tmp_path / "b", True)
    _same(one, batched)


def test_batched_replay_equals_one_by_one_on_a_generated_smoke_shift(tmp_path):
    lines = generate("smoke", seed=5)
    scenario = sc.parse_lines([json.dumps(x) for x in lines], "smoke.jsonl")
    one, batched = _run(scenario, tmp_path / "one", False), _run(scenario, tmp_path / "b", True)
    _same(one, batched)
    assert batched.frames["platform.events"] > 0 and "platform.event" not in batched.frames or \
        batched.frames["platform.event"] < one.frames["platform.event"]
    assert sum(batched.frames.values()) < sum(one.frames.values())
    assert batched.frames["clock.advance_to"] < one.frames["clock.advance_to"]
    _multi_line(batched)


def _multi_line(rp: Replay) -> None:
    """Frames carried several world lines (and operator answers) each, and fewer frames than
    events went out."""
    assert max(rp.frame_events) > 1, rp.frame_events
    events = sum(k * n for k, n in rp.frame_events.items())
    assert rp.frames["platform.events"] == sum(rp.frame_events.values()) < events


def test_batched_replay_equals_one_by_one_on_the_generated_demo_shift(tmp_path):
    """The demo preset: a crash, a shift change to another machine, Stack faults, scripted
    chains — multi-line frames before and after each of them."""
    lines = generate("demo", seed=5)
    scenario = sc.parse_lines([json.dumps(x) for x in lines], "demo.jsonl")
    one, batched = _run(scenario, tmp_path / "one", False), _run(scenario, tmp_path / "b", True)
    _same(one, batched)
    _multi_line(batched)
    assert sum(batched.frames.values()) < sum(one.frames.values())


def test_batched_replay_equals_one_by_one_across_a_crash_and_a_shift_change(tmp_path):
    from test_stub_replay_e2e import LIFECYCLE

    scenario = sc.parse_lines([json.dumps(x) for x in LIFECYCLE], "lifecycle.jsonl")
    one, batched = _run(scenario, tmp_path / "one", False), _run(scenario, tmp_path / "b", True)
    _same(one, batched)
    assert [r.ok for r in batched.results] == [True, True, True]
    assert [(e.machine, e.how) for e in batched.stats.exits] == [(e.machine, e.how) for e in one.stats.exits]


def test_batched_replay_equals_one_by_one_with_a_routed_target_beside_platform_events(tmp_path, shared_dir):
    """A seed scenario of platform events (tasks, markers) with a webhook target whose throttled
    rule takes every task event: the delivery timer fires inside the batched advances, so the
    per-instant deliveries, their notes and the receivers' records must match one by one."""
    path = shared_dir / "scenarios" / "seed" / "t01_unanswered_overdue_one_task_per_burst.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines()
    lines[2:2] = [json.dumps({"kind": "target", "name": "ops-telegram", "channel": "telegram",
                              "config": {"chat_id": "-1"}}),
                  json.dumps({"kind": "rule", "name": "tasks", "conditions": {"source": "tasks"},
                              "actions": [{"target": "ops-telegram"}], "throttle_seconds": 120})]
    scenario = sc.parse_lines(lines, "t01_routed.jsonl")
    one, batched = _run(scenario, tmp_path / "one", False), _run(scenario, tmp_path / "b", True)
    assert batched.frames.get("platform.events", 0) > 0 and one.frames.get("platform.events", 0) == 0
    assert sum(x.get("event") == "delivery" for x in batched.rec.sorted_lines()) >= 3
    _same(one, batched)


SAME_INSTANT = [
    {"kind": "header", "format": 1, "name": "same-instant", "start": "2026-11-30T08:00:00Z", "seed": 3,
     "duration_s": 60, "operator": {"chat_answer_p": 0.0, "chat_delay_s": [10, 10], "mail_answer_p": 0.0,
                                    "mail_delay_s": [60, 60]}},
    {"kind": "tu", "project": "golden", "tu": "g1", "operator": "op-1"},
    *({"kind": "favorite", "project": "golden", "tu": "g1", "ru": ru, "active": True, "is_white": False,
       "spend_30d_usd": 50.0, "spend_total_usd": 400.0, "paid_actions": 40, "paid_with_bonuses_only": False,
       "chat_limit": None, "mail_limit": None, "markers": {}} for ru in ("r1", "r2")),
    {"t": 0, "kind": "login", "project": "golden", "tu": "g1", "operator": "op-1"},
    {"t": 1, "kind": "message", "project": "golden", "tu": "g1", "ru": "r1", "from": "ru", "id": "m1", "body": "hi"},
    # an RU going online needs no frame: the driver skips the round trip; the message at the
    # same instant must still reach a sidecar whose clock is at that instant
    {"t": 1.5, "kind": "online", "project": "golden", "ru": "r2", "online": True},
    {"t": 1.5, "kind": "message", "project": "golden", "tu": "g1", "ru": "r2", "from": "ru", "id": "m2", "body": "?"},
]


@pytest.mark.parametrize("batch", [False, True])
def test_a_line_at_the_instant_of_a_world_only_line_reaches_the_sidecar_at_that_instant(tmp_path, batch):
    scenario = sc.parse_lines([json.dumps(x) for x in SAME_INSTANT], "same_instant.jsonl")
    rp = _run(scenario, tmp_path, batch)
    created = {t.ru: t.created_at - rp.start for t in rp.rec.tasks.values() if t.type == "unanswered_message"}
    assert created == {"r1": 1.0, "r2": 1.5}
