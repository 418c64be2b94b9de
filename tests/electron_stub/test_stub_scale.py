"""The harness's cost per event stays flat from 12 to 60 TUs (issue 11 item 6).

The harness's own work for a world event — encode its frames, apply it to the world, record the
task it causes and look up the pair's open task, answer the TUs' periodic passes from the world —
is played for the ``shift`` world (12 TUs) and the ``large`` world (60 TUs) at the same per-TU
density, without a sidecar.  Per event it must cost about the same: an index lost somewhere (a
scan of every pair, every task) would make the 60-TU run several times dearer per event (a
``favorites_of`` that scans every favorite: 2.8×).  Cost is counted in Python bytecode
instructions executed (``sys.settrace`` opcode events) — deterministic, so the test cannot flake
on a busy machine and never holds a wall-clock budget.
"""
from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from electron_stub import answers, encode, generate
from electron_stub import scenario as sc
from electron_stub.trace import Recorder
from electron_stub.world import World
from platform_clients import client_for

NOT_WORLD = (sc.Login, sc.Logout, sc.Crash, sc.StackFault, sc.Expect)


def _scenario(preset: str) -> sc.Scenario:
    lines = generate.generate(preset, hours=0.5, favorites=40)
    return sc.parse_lines(generate.dumps(lines).splitlines(), f"{preset}.jsonl")


def _play(s: sc.Scenario) -> int:
    """Harness work for every world line and every periodic pass; returns the events."""
    world, rec = World.from_scenario(s), Recorder(s.start)
    tus = [(x.project, x.tu) for x in s.world if isinstance(x, sc.Tu)]
    passes = {p: [x for x in client_for(p).passes if x.period_s is not None and x.period_s <= 120]
              for p in {p for p, _ in tus}}
    next_poll, events, n = 0.0, 0, 0
    for line in s.timeline:
        if isinstance(line, NOT_WORLD):
            continue
        now = s.start + line.t
        while line.t >= next_poll:  # every TU's online passes, once a minute of virtual time
            for project, tu in tus:
                for p in passes[project]:
                    answers.answer(world, project, tu, p.method, dict(p.params), now)
                    events += 1
            next_poll += 60.0
        events += len(encode.frames_for(line, now, world))
        world.apply(line, now)
        if isinstance(line, sc.Message) and line.from_ == "ru":
            n += 1
            if rec.open_task(line.tu, line.ru, "unanswered_message") is None:
                rec.task_created({"task": {"task_id": f"t{n}", "type": "unanswered_message",
                                           "project": line.project, "tu": line.tu, "ru": line.ru,
                                           "source": "socket", "created_at": now, "deadline": now + 120}})
        elif isinstance(line, sc.Message):
            t = rec.open_task(line.tu, line.ru, "unanswered_message")
            if t is not None:
                rec.task_closed({"task_id": t.task_id, "reason": "answered", "closed_at": now})
    return events


def _opcodes(fn: Callable[..., Any], *args: Any) -> tuple[int, Any]:
    """(bytecode instructions ``fn(*args)`` executed, its result)."""
    n = 0

    def tracer(frame, event, arg):  # noqa: ANN001, ANN202 - the sys.settrace protocol
        nonlocal n
        frame.f_trace_opcodes = True
        if event == "opcode":
            n += 1
        return tracer

    previous = sys.gettrace()
    sys.settrace(tracer)
    try:
        result = fn(*args)
    finally:
        sys.settrace(previous)
    return n, result


def test_harness_cost_per_event_is_flat_from_12_to_60_tus():
    small, large = _scenario("shift"), _scenario("large")
    assert len([x for x in large.world if isinstance(x, sc.Tu)]) == 60
    ops_small, events_small = _opcodes(_play, small)
    ops_large, events_large = _opcodes(_play, large)
    assert events_large > 4 * events_small  # 5× the TUs, about 5× the events
    ratio = (ops_large / events_large) / (ops_small / events_small)
    assert ratio < 1.5, f"harness cost per event at 60 TUs is {ratio:.2f}× that at 12 TUs"
