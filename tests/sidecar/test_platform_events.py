"""``platform.events`` (issue 11 item 3): a burst of raw events in one frame, each its own step,
one commit for all; on the virtual clock each event's ``received_at`` advances the clock first,
exactly as ``clock.advance_to`` would — so a batch gives what the same frames one by one give."""
from __future__ import annotations

import asyncio
import sqlite3
from types import SimpleNamespace

from sidecar.app.router import PassResult

from tests.app.test_app_steps import T0, TU, Run, msg


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
            # (one commit: on the loop's own connection, or in one hop onto aiosqlite's thread)
            assert (bat.store.counters.commits - c0, bat.store.counters.hops - c0h) == (
                1, 0 if bat.store.commits_on_loop else 1)
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

            from sidecar.protocol.answers import ANSWERS
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


def test_stop_at_due_stops_before_an_event_the_sidecars_own_timer_precedes_and_the_rest_resent_gives_the_same(tmp_path):
    """``stop_at_due`` (a replayer that must see the sidecar's own acts between its events):
    the sidecar takes events while nothing of its own is due by the next one's instant, answers
    ``taken`` short, and the rest sent again (after the advance) gives exactly the one-call result."""
    async def main() -> None:
        whole = await _start(tmp_path / "whole")
        await whole.call("platform.events", {"events": EVENTS})
        (tmp_path / "stop").mkdir()
        run = await _start(tmp_path / "stop")
        try:
            rest, calls = list(EVENTS), 0
            while rest:
                answer = await run.call("platform.events", {"events": rest, "stop_at_due": True})
                calls += 1
                taken = answer["taken"]
                assert 1 <= taken <= len(rest) and len(answer["results"]) == taken
                if taken < len(rest):  # something of its own is due by the next event's instant
                    assert answer["next_due"] is None or answer["next_due"] <= rest[taken]["received_at"] \
                        or run.app.executor.outbox_due_pending() or run.app._pump_kick.is_set()
                rest = rest[taken:]
            assert calls > 1  # the unanswered deadlines (+120 s) fall between these events
            assert _notes(run) == _notes(whole)
            assert _dump(run.store.path) == _dump(whole.store.path)
        finally:
            await whole.stop()
            await run.stop()
    asyncio.run(main())


def test_stop_at_due_takes_every_event_when_nothing_of_the_sidecars_own_falls_between(tmp_path):
    async def main() -> None:
        run = await _start(tmp_path)
        try:
            answer = await run.call("clock.advance_to", {"t": T0 + 1})
            due = answer.get("next_due")
            at = T0 + 2 if due is None else min(T0 + 2, (T0 + 1 + due) / 2)
            burst = [msg(f"ru-{i}", f"m-{i}", at) for i in range(4)]
            answer = await run.call("platform.events", {"events": burst, "stop_at_due": True})
            assert answer["taken"] == 4 and all(r["ok"] for r in answer["results"])
        finally:
            await run.stop()
    asyncio.run(main())


def test_an_if_open_event_runs_only_while_its_task_is_open_and_is_skipped_after(tmp_path):
    """A replayed operator's answer (``if_open``) inside a frame: the first answer to ru-1's task
    is handled (it closes the task), a second answer to the same task — and one to a task the
    sidecar never had — is skipped: nothing runs, the result says so (issue 11 item 3)."""
    async def main() -> None:
        run = await _start(tmp_path)
        try:
            await run.call("platform.events", {"events": [EVENTS[0]]})
            task_id = next(p.task.task_id for m, p in run.sent if m == "task.created" and p.task.ru == "ru-1")
            answer = await run.call("platform.events", {"events": [
                {**_own("o-1", "ru-1", T0 + 20), "if_open": task_id},
                {**_own("o-2", "ru-1", T0 + 30), "if_open": task_id},
                {**_own("o-3", "ru-2", T0 + 31), "if_open": "no-such-task"},
                msg("ru-2", "m-2", T0 + 40)]})
            import msgspec

            from sidecar.protocol.answers import ANSWERS
            msgspec.convert(answer, ANSWERS["platform.events"])  # the schema Electron reads holds
            first, second, third, fourth = answer["results"]
            assert answer["taken"] == 4 and first["ok"] and first["events"] >= 1 and "skipped" not in first
            assert second == {"ok": True, "skipped": True, "events": 0, "seq": second["seq"]}
            assert third["skipped"] and fourth["ok"] and "skipped" not in fourth
            closed = [p.task_id for m, p in run.sent if m == "task.closed"]
            assert closed == [task_id]  # closed once, by the first answer
        finally:
            await run.stop()
    asyncio.run(main())


def test_a_batch_cut_short_by_shutdown_says_how_many_events_were_taken(tmp_path):
    """Shutdown begins while the 2nd event's step runs: that step and the one before it are
    committed, the rest are refused — the -32003 says 2 of 5 were taken (``data.taken``), never
    "nothing was done"."""
    async def main() -> None:
        run = await _start(tmp_path)
        engine, seen = run.app.engine, []
        real = engine.platform_event

        def event(step, **kw):
            seen.append(kw["name"])
            if len(seen) == 2:
                run.app.executor.stop()  # SIGTERM lands while this step runs
            return real(step, **kw)
        engine.platform_event = event  # type: ignore[method-assign]
        try:
            try:
                await run.call("platform.events", {"events": EVENTS})
            except Exception as exc:  # noqa: BLE001 - the answer under test
                err = exc
            else:
                raise AssertionError("a batch cut short by shutdown answered a result")
            assert getattr(err, "code", None) == -32003 and "shutting down" in str(err), err
            assert "nothing was done" not in str(err) and "2 of 5" in str(err)
            assert err.data["taken"] == 2
            open_rus = {t.ru for t in run.app.engine.factory.open_of_tu(TU)}
            assert {"ru-1", "ru-2"} <= open_rus and "ru-3" not in open_rus
        finally:
            await run.stop()
    asyncio.run(main())


def test_platform_event_refuses_if_open_naming_the_field_and_the_schema_shows_it_only_on_batches(tmp_path):
    """F5 (breaker 16): ``if_open`` sat on the params struct shared with ``platform.events`` items,
    so ``platform.event`` accepted it (and the schema listed it) and ignored it: an event the
    caller meant to be conditional ran anyway.  It is a ``platform.events`` item field only;
    ``platform.event`` refuses it with -32602 naming it, and nothing runs."""
    import pytest
    from bridge.errors import InvalidParams
    from sidecar.protocol import inbound as p
    assert "if_open" not in p.INBOUND["platform.event"].__struct_fields__
    import typing
    item = typing.get_type_hints(p.INBOUND["platform.events"])["events"]
    assert "if_open" in item.__args__[0].__struct_fields__

    async def main() -> None:
        run = await _start(tmp_path)
        try:
            before = list(run.sent)
            with pytest.raises(InvalidParams) as info:
                await run.call("platform.event", {**msg("ru-1", "m-1", T0 + 3), "if_open": "t-1"})
            assert "if_open" in info.value.message and "platform.events" in info.value.message
            assert run.sent == before
        finally:
            await run.stop()
    asyncio.run(main())
