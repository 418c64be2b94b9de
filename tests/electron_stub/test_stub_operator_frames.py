"""The operator model inside batched frames (:mod:`electron_stub.operator_model`,
:mod:`electron_stub.replay_frames`): a first look that passes a task over while the TU's hand is
busy with a backlog task reads nothing from the sidecar (no ``tasks.list``: the hand picks only
when free), so it travels in the frame like a world-only line instead of ending it; a backlog
look that answers travels as its frame's last item (``if_open``, then the hand's pick once the
frame is through); a look that answers nothing, played while no sidecar is due, costs no
advance — and the replay is still exactly one by one's: the same trace and the same backlog
counters."""
from __future__ import annotations

import asyncio
import json

from electron_stub import scenario as sc
from electron_stub.replay import Replay
from stubhelp import golden_world

# chat answered rarely (p 0.05): nearly every first look passes over and the backlog forms; the
# hand looks at one backlog task 15 s, then picks the next at once — so it is busy nearly always
HEADER = {"kind": "header", "format": 1, "name": "operator-frames", "start": "2026-11-30T08:00:00Z", "seed": 4,
          "duration_s": 150, "operator": {"chat_answer_p": 0.05, "chat_delay_s": [15, 15],
                                          "mail_answer_p": 0.0, "mail_delay_s": [60, 60]}}
RUS = [f"r{i}" for i in range(1, 13)]


def _lines(header: dict = HEADER) -> list[dict]:
    out = golden_world(header, RUS)
    head = list(out)
    timeline: list[dict] = [{"t": 0, "kind": "login", "project": "golden", "tu": "g1", "operator": "op-1"}]
    # an RU message every 1.7 s, the RUs in turn: each RU's first message opens a task whose
    # first look (15 s later) falls between later messages
    for i in range(70):
        timeline.append({"t": round(1.3 + 1.7 * i, 3), "kind": "message", "project": "golden", "tu": "g1",
                         "ru": RUS[i % len(RUS)], "from": "ru", "id": f"m{i}", "body": "hi"})
    # the TU writes RUs itself: r5's task (opened at 8.1) closes before its first look at 23.1,
    # r7's (opened at 11.5) just after its first look at 26.5 — in the frame that carries that
    # look, so whether it was passed over is read as of the look's instant —, r3's while it
    # waits in the backlog
    for t, ru in ((22.5, "r5"), (27.5, "r7"), (40.9, "r3")):
        timeline.append({"t": t, "kind": "message", "project": "golden", "tu": "g1", "ru": ru,
                         "from": "tu", "id": f"own-{ru}", "body": "ok"})
    return head + sorted(timeline, key=lambda x: x["t"])


def _run(tmp_path, batch: bool, header: dict = HEADER) -> tuple[Replay, list[tuple[str, bool]]]:
    scenario = sc.parse_lines([json.dumps(x) for x in _lines(header)], "operator_frames.jsonl")
    rp = Replay(scenario, data_dir=tmp_path / ("b" if batch else "one"), quiet=True, batch=batch)
    acted: list[tuple[str, bool]] = []  # (item kind, the TU's hand busy) of items played one by one
    act = rp.operator.act

    async def spy(item, t):
        task = rp.rec.tasks.get(item[1])
        acted.append((item[0], task is not None and task.tu in rp.operator.in_hand))
        await act(item, t)
    rp.operator.act = spy  # type: ignore[method-assign]
    asyncio.run(rp.run())
    return rp, acted


def test_a_pass_over_while_the_hand_is_busy_travels_in_the_frame_and_the_replay_is_one_by_ones(tmp_path):
    one, one_acted = _run(tmp_path, False)
    batched, acted = _run(tmp_path, True)
    assert batched.verdict() == one.verdict() == []
    assert [json.dumps(x, sort_keys=True) for x in batched.rec.sorted_lines()] == \
        [json.dumps(x, sort_keys=True) for x in one.rec.sorted_lines()]
    assert batched.operator.counts == one.operator.counts
    assert batched.operator.backlog == one.operator.backlog and batched.op_sent == one.op_sent
    # the scenario does what it is for: passes over with the hand busy, and a backlog worked
    busy_passes = sum(1 for kind, busy in one_acted if kind == "pass" and busy)
    assert busy_passes >= 10 and one.operator.counts["looks"] >= 5
    # batched, they travel in frames (each one played by itself ends a frame and costs an
    # advance); only one that no frame carries — the next item ends the frame before any event
    # follows it — is still played by itself
    alone = sum(1 for kind, busy in acted if kind == "pass" and busy)
    assert alone * 4 <= busy_passes, (alone, busy_passes)
    assert batched.frames["clock.advance_to"] < one.frames["clock.advance_to"]


def test_a_look_that_answers_ends_a_frame_and_one_that_does_not_skips_the_advance(tmp_path):
    # backlog looks answer half the time; the RU messages stop at ~120 s, so later looks fall
    # where the sidecar has nothing due for a while
    header = {**HEADER, "duration_s": 400,
              "operator": {**HEADER["operator"], "chat_answer_p": 0.5}}
    one, _ = _run(tmp_path, False, header)
    skipped: list[bool] = []
    scenario = sc.parse_lines([json.dumps(x) for x in _lines(header)], "operator_frames.jsonl")
    batched = Replay(scenario, data_dir=tmp_path / "b", quiet=True)
    reads_only = batched._reads_only

    def spy(head, target):
        skipped.append(reads_only(head, target))
        return skipped[-1]
    batched._reads_only = spy  # type: ignore[method-assign]
    asyncio.run(batched.run())
    assert batched.verdict() == one.verdict() == []
    assert [json.dumps(x, sort_keys=True) for x in batched.rec.sorted_lines()] == \
        [json.dumps(x, sort_keys=True) for x in one.rec.sorted_lines()]
    assert batched.operator.counts == one.operator.counts
    assert batched.operator.backlog == one.operator.backlog and batched.op_sent == one.op_sent
    assert batched.requests == one.requests
    # backlog looks answered (one by one: an advance and a platform.event each) ...
    assert one.operator.counts["answered"] >= 5 and one.frames["platform.event"] >= 5
    # ... travel in platform.events frames; the others are played without an advance
    assert batched.frames.get("platform.event", 0) == 0
    assert sum(skipped) >= 3
    assert batched.frames["tasks.list"] == one.frames["tasks.list"]
    assert batched.frames["clock.advance_to"] < one.frames["clock.advance_to"]
