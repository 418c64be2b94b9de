"""``platform.events`` (issue 11 item 3): a burst of raw events in one frame, each its own step,
one commit for all; on the virtual clock each event's ``received_at`` advances the clock first,
exactly as ``clock.advance_to`` would — so a batch gives what the same frames one by one give."""
from __future__ import annotations

import asyncio
import sqlite3
from types import SimpleNamespace

from sidecar.routing import PassResult

from tests.sidecar.test_app_steps import T0, TU, Run, msg


def _dump(path) -> list:
    with sqlite3.connect(path) as c:
        return [line for line in c.iterdump() if "meta" not in line]


def _own(mid: str, ru: str, at: float) -> dict:
    return {"project": "golden", "tu": TU, "name": "privateMessageSent", "received_at": at,
            "data": {"messageId": mid, "senderId": TU, "recipientId": ru, "sentAt": at, "text": "ok"}}


EVENTS = [msg("ru-1", "m-1", T0 + 3), msg("ru-2", "m-2", T0 + 40), _own("o-1", "ru-1", T0 + 41),
          msg("ru-3", "m-3", T0 + 190), msg("ru-2", "m-4", T0 + 250)]


async def _start(path) -> Run:
    run = await Run(path).start()
    await run.call("clock.advance_to", {"t": T0})
    await run.call("session.login", {"tu": TU, "project": "golden", "operator": "op"})
    return run


def _notes(run: Run) -> list:
    return [(m, getattr(p, "task_id", None) or getattr(getattr(p, "task", None), "task_id", None))
            for m, p in run.sent]


def test_a_batch_gives_exactly_what_the_same_frames_one_by_one_give_in_one_commit(tmp_path):
    async def main() -> None:
        one = await _start(tmp_path / "one")
        o0, o0h = one.store.counters.commits, one.store.counters.hops
        for ev in EVENTS:
            await one.call("clock.advance_to", {"t": ev["received_at"]})
            await one.call("platform.event", ev)
        (tmp_path / "batch").mkdir()
        bat = await _start(tmp_path / "batch")
        c0, c0h = bat.store.counters.commits, bat.store.counters.hops
        answer = await bat.call("platform.events", {"events": EVENTS})
        try:
            assert answer["taken"] == 5 and [r["ok"] for r in answer["results"]] == [True] * 5
            assert answer["now"] == T0 + 250 and "next_due" in answer
            assert _notes(bat) == _notes(one) and len(_notes(one)) >= 4
            assert _dump(bat.store.path) == _dump(one.store.path)
            # no target but Stack (and no Stack here): no delivery pass splits the group
            assert (bat.store.counters.commits - c0, bat.store.counters.hops - c0h) == (1, 1)
            assert one.store.counters.commits - o0 > 4  # one by one: one commit per step with ops
        finally:
            await one.stop()
            await bat.stop()
    asyncio.run(main())


def test_each_result_says_the_seq_up_to_which_the_stream_holds_its_effects(tmp_path):
    async def main() -> None:
        run = await _start(tmp_path)
        seqs = iter(range(1, 1000))
        run.app.bridge.notify = lambda m, p=None: run.sent.append((m, p)) or next(seqs)  # type: ignore[method-assign]
        try:
            answer = await run.call("platform.events", {"events": EVENTS[:2]})
            first, second = answer["results"]
            created = [m for m, _ in run.sent if m == "task.created"]
            assert len(created) == 2
            assert first["seq"] == 1 and second["seq"] == len(run.sent)  # ru-1's task, then ru-2's
        finally:
            await run.stop()
    asyncio.run(main())


def test_a_refused_event_is_its_own_error_and_the_others_are_handled(tmp_path):
    async def main() -> None:
        run = await _start(tmp_path)
        bad = dict(msg("ru-9", "m-9", T0 + 2), tu="not-logged-in")
        try:
            answer = await run.call("platform.events", {"events": [EVENTS[0], bad, EVENTS[1]]})
            import msgspec

            from sidecar.protocol_answers import ANSWERS
            msgspec.convert(answer, ANSWERS["platform.events"])  # the schema Electron reads holds
            ok, refused, ok2 = answer["results"]
            assert ok["ok"] and ok2["ok"] and not refused["ok"]
            assert refused["error"]["code"] == -32602 and "not-logged-in" in refused["error"]["message"]
            assert run.app.failed is None
            assert len([m for m, _ in run.sent if m == "task.created"]) == 2
        finally:
            await run.stop()
    asyncio.run(main())


def test_stack_passes_run_inside_the_batch_at_stacks_flush_instants(tmp_path):
    """Stack's delivery pass runs inside the advance at its flush instant (new writes on the
    10 s grid, sidecar.router.cadence), exactly as ``clock.advance_to`` runs it, so a batch is
    never cut for Stack: the driver sees the same calls batched or one by one."""
    async def main() -> None:
        run = await _start(tmp_path)
        passes: list[tuple[float, bool]] = []

        async def route_pass(now: float, *, stack: bool = True):
            passes.append((now, stack))
            run.app.routing.cadence.after_pass(None, None)  # every Stack write sent
            return PassResult()
        run.app.deliveries.route_pass = route_pass  # type: ignore[method-assign]
        run.app.routing.stack = SimpleNamespace()  # type: ignore[assignment]  # a Stack is configured
        try:
            answer = await run.call("platform.events", {"events": EVENTS[:3]})
            assert answer["taken"] == 3
            # ru-1's task (T0 + 3) is flushed at T0 + 10, ru-2's (T0 + 40) at T0 + 40 — seen
            # by the advance to the own message at T0 + 41
            assert passes == [(T0 + 10, True), (T0 + 40, True)]
        finally:
            run.app.routing.stack = None
            await run.stop()
    asyncio.run(main())
