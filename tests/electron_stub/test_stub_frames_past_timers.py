"""Frames run past the sidecar's own timers (issue 11 item 3): a burst of world lines travels in
ONE ``platform.events`` frame even when an online pass, a Stack flush or an operator's answer
falls between its lines — and the result is still exactly one by one's: the same trace, and
every Stack write recorded at the sidecar's instant of the call (its flush instant), which the
harness's own driver, still at the frame's first event, does not know."""
from __future__ import annotations

import asyncio
import json

from electron_stub import scenario as sc
from electron_stub.replay import Replay
from stubhelp import golden_world

HEADER = {"kind": "header", "format": 1, "name": "past-timers", "start": "2026-11-30T08:00:00Z", "seed": 4,
          "duration_s": 90, "operator": {"chat_answer_p": 1.0, "chat_delay_s": [15, 15],
                                         "mail_answer_p": 0.0, "mail_delay_s": [60, 60]}}
RUS = [f"r{i}" for i in range(1, 7)]


def _lines() -> list[dict]:
    out = golden_world(HEADER, RUS)
    out.append({"t": 0, "kind": "login", "project": "golden", "tu": "g1", "operator": "op-1"})
    # an RU message every 1.5 s (odd instants, never on Stack's 10 s grid); each opens a task the
    # operator answers 15 s later — inside a later frame
    for i in range(40):
        t = 1.3 + 1.5 * i
        out.append({"t": round(t, 3), "kind": "message", "project": "golden", "tu": "g1", "ru": RUS[i % 6],
                    "from": "ru", "id": f"m{i}", "body": "hi"})
    # the TU writes r2 itself just before the operator's answer to r2's task is due: the answer
    # that follows in the same frame finds the task closed and is skipped (if_open)
    out.append({"t": 17.7, "kind": "message", "project": "golden", "tu": "g1", "ru": "r2",
                "from": "tu", "id": "own-1", "body": "ok"})
    head, timeline = out[:8], out[8:]
    return head + sorted(timeline, key=lambda x: x["t"])


def _run(tmp_path, batch: bool) -> tuple[Replay, list[dict]]:
    scenario = sc.parse_lines([json.dumps(x) for x in _lines()], "past_timers.jsonl")
    rp = Replay(scenario, data_dir=tmp_path / ("b" if batch else "one"), quiet=True, batch=batch)
    answers: list[dict] = []
    send = rp.sidecars.send

    async def spy(m, method, params):
        answer = await send(m, method, params)
        if method == "platform.events" and isinstance(answer, dict):
            answers.append(answer)
        return answer
    rp.sidecars.send = spy  # type: ignore[method-assign]
    asyncio.run(rp.run())
    return rp, answers


def test_a_burst_travels_in_one_frame_past_flushes_and_answers_and_the_trace_is_one_by_ones(tmp_path):
    one, _ = _run(tmp_path, False)
    batched, answers = _run(tmp_path, True)
    assert batched.verdict() == one.verdict() == []
    assert [json.dumps(x, sort_keys=True) for x in batched.rec.sorted_lines()] == \
        [json.dumps(x, sort_keys=True) for x in one.rec.sorted_lines()]
    assert batched.samples == one.samples and batched.requests == one.requests
    assert batched.op_sent == one.op_sent and one.op_sent["chat"] >= 20
    # the frames ran past the sidecar's own timers: ~60 events in a handful of frames, each
    # frame spanning up to the operator's shortest delay (15 s) — one by one needs ~2 frames
    # per line, and stop_at_due cut a frame at every online pass and Stack flush
    events = sum(k * n for k, n in batched.frame_events.items())
    assert events >= 60 and batched.frames["platform.events"] <= 10, batched.frame_events
    assert max(batched.frame_events) >= 10
    assert sum(batched.frames.values()) * 5 < sum(one.frames.values())
    # an operator's answer travelled inside a frame after the TU's own message had closed its
    # task: the sidecar skipped it, and no operator.sent line was written for it (one by one)
    assert any(r.get("skipped") for a in answers for r in a["results"])
    # every Stack write inside those frames is recorded at its flush instant: Stack's 10 s grid
    # of unix seconds (the lines are at odd instants), the same in both modes
    acked = [a["at"] for a in batched.stack.acked]
    assert acked and acked == [a["at"] for a in one.stack.acked]
    assert all(abs(at / 10 - round(at / 10)) < 1e-9 for at in acked if at != batched.start), acked
