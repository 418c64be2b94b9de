"""Group commit (issue 11 item 4; DESIGN §13): the steps of one advance commit in ONE transaction,
each step still deciding on the memory the one before left; nothing of the group leaves the
process before that commit, and a failed group commit leaves nothing of any of its steps.

The executor is driven with a small engine of its own (a real scheduler whose timers write one op
and one note each, and may ask the platform) and ports that log every call in order."""
from __future__ import annotations

import asyncio
from typing import Any

import pytest

from sidecar.core.clock import VirtualClock
from sidecar.router.core import Router
from sidecar.router.model import Action, RoutingEvent, Rule, Status
from sidecar.router.ops import PutDelivery
from sidecar.stack.writes import marker_event
from sidecar.core.scheduler import Scheduler
from sidecar.runtime.executor import StepExecutor
from sidecar.runtime.ports import StepFailed, Stopping
from sidecar.runtime.step import Request, Step
from sidecar.store.errors import StoreError

T0 = 1796025600.0


class TimerEngine:
    """Timers ``("t", i)`` due at ``T0 + i``: each step writes op ``i`` and note ``i``; timer
    ``ask`` also asks the platform, and the answer step writes op ``("answer", i)``."""

    def __init__(self, n: int, ask: set[int] = frozenset(), emits: dict | None = None) -> None:
        self.emits = emits or {}  # timer -> extra routing events its step emits
        self.scheduler = Scheduler()
        for i in range(n):
            self.scheduler.schedule(("t", i), T0 + i)
        self.ask = ask
        self.seen: list[int] = []  # what each step saw of the steps before it (memory)

    def fire(self, step: Step) -> bool:
        item = self.scheduler.pop_due(step.now)
        if item is None:
            return False
        i = item[0][1]
        self.seen.append(len(self.seen))
        step.ops.append(("op", i))
        step.notify("note", i)
        if i in self.ask:
            step.requests.append(Request("svc", "m", {}, "tag", context=i))
        if i == 0:  # a marker change: its Stack write is a pending ``stack`` delivery
            step.emit(marker_event("tu", f"ru-{i}", "followUpChat", {"nextCheckAt": T0 + i}, f"k-{i}"))
        for ev in self.emits.get(i, ()):
            step.emit(ev)
        return True

    def request_done(self, step: Step, req: Request, result: Any, error: str | None) -> None:
        step.ops.append(("answer", req.context))


class LogPorts:
    def __init__(self, fail_commit: bool = False) -> None:
        self.log: list[tuple] = []
        self.fail_commit = fail_commit
        self.failed: list[BaseException] = []

    async def commit(self, ops: list) -> None:
        if self.fail_commit:
            raise StoreError("disk I/O error (injected)")
        self.log.append(("commit", list(ops)))

    def notify(self, method: str, note: Any) -> None:
        self.log.append(("notify", note))

    def outbox_due(self, at: float) -> None:
        self.log.append(("outbox_due", at))

    def outbox_queued(self, at: float, channels: frozenset[str] | None = None) -> None:
        self.log.append(("outbox_queued", at))

    async def perform(self, request: Request) -> tuple[Any, str | None]:
        self.log.append(("perform", request.context))
        return {}, None

    def step_failed(self, exc: BaseException) -> None:
        self.failed.append(exc)

    def step_done(self) -> None:
        self.log.append(("step_done",))


def executor(engine, ports, **kw) -> tuple[StepExecutor, VirtualClock]:
    clock = VirtualClock()
    clock.advance_to(T0)
    kw.setdefault("router", Router.in_memory("ev-test-"))
    return StepExecutor(engine, clock, ports, **kw), clock  # type: ignore[arg-type]


def test_the_timers_of_one_advance_commit_once_in_step_order_then_notify():
    engine, ports = TimerEngine(5), LogPorts()
    ex, clock = executor(engine, ports)
    fired = asyncio.run(ex.fire_due(T0 + 10, advance_clock=clock.advance_to))
    assert fired == 5 and ex.steps == 5 and ex.commits == 1
    assert engine.seen == [0, 1, 2, 3, 4]  # each step ran on the memory the one before left
    kinds = [e[0] for e in ports.log]
    assert kinds == ["outbox_queued", "commit"] + ["notify", "step_done"] * 5  # each step's, in order
    assert [op for op in ports.log[1][1] if isinstance(op, tuple)] == [("op", i) for i in range(5)]
    assert [e[1] for e in ports.log if e[0] == "notify"] == [0, 1, 2, 3, 4]


def test_due_says_whether_fire_due_would_run_a_timer():
    """``due(t)``, the sync check the app and the driver make before :meth:`fire_due` (no
    coroutine when nothing is due): True exactly when a timer is due at or before ``t``, after
    the timers at the edge and after a re-armed (stale) heap entry too."""
    engine, ports = TimerEngine(3), LogPorts()
    ex, clock = executor(engine, ports)
    assert ex.due(T0) and ex.due(T0 + 5) and not ex.due(T0 - 0.001)
    engine.scheduler.schedule(("t", 0), T0 + 1.5)  # re-armed: the heap's T0 entry is stale
    assert not ex.due(T0 + 0.5) and ex.due(T0 + 1)
    assert asyncio.run(ex.fire_due(T0 + 1, advance_clock=clock.advance_to)) == 1
    assert not ex.due(T0 + 1.25) and ex.due(T0 + 1.5)
    assert asyncio.run(ex.fire_due(T0 + 9, advance_clock=clock.advance_to)) == 2
    assert not ex.due(T0 + 1e9) and asyncio.run(ex.fire_due(T0 + 1e9)) == 0


def test_platform_requests_of_the_group_are_made_inline_and_their_answers_join_the_commit():
    engine, ports = TimerEngine(3, ask={1}), LogPorts()
    ex, clock = executor(engine, ports)
    asyncio.run(ex.fire_due(T0 + 10, advance_clock=clock.advance_to))
    assert ex.commits == 1 and ex.steps == 4  # three timers and one answer
    commit = next(e for e in ports.log if e[0] == "commit")
    assert [op for op in commit[1] if isinstance(op, tuple)] == [("op", 0), ("op", 1), ("answer", 1), ("op", 2)]
    assert ports.log.index(("perform", 1)) < ports.log.index(commit)


def test_a_failed_group_commit_sends_nothing_of_any_step_and_stops_the_process():
    engine, ports = TimerEngine(4), LogPorts(fail_commit=True)
    ex, clock = executor(engine, ports)
    with pytest.raises(StepFailed):
        asyncio.run(ex.fire_due(T0 + 10, advance_clock=clock.advance_to))
    assert [e for e in ports.log if e[0] in ("notify", "outbox_due", "step_done")] == []
    assert len(ports.failed) == 1 and isinstance(ex.failed, StoreError) and ex.steps == 0
    with pytest.raises(StepFailed):  # crash-only: no later step
        asyncio.run(ex.run(lambda s: None))


def test_the_group_is_committed_before_every_yield_hook_and_when_the_hook_stops_it():
    engine, ports = TimerEngine(5), LogPorts()
    ex, clock = executor(engine, ports)
    at_hook: list[int] = []

    async def hook() -> None:
        at_hook.append(sum(isinstance(op, tuple) for e in ports.log if e[0] == "commit" for op in e[1]))
        if len(at_hook) == 2:
            raise RuntimeError("client went away")

    with pytest.raises(RuntimeError):
        asyncio.run(ex.fire_due(T0 + 10, advance_clock=clock.advance_to, every=(2, hook)))
    assert at_hook == [2, 4]  # every step before a hook was committed before it ran
    assert ex.commits == 2 and ex.steps == 4 and ex.failed is None


def test_wall_clock_requests_start_only_after_the_group_commit():
    engine, ports = TimerEngine(2, ask={0}), LogPorts()
    spawned: list[str] = []

    def spawn(coro) -> None:
        spawned.append(f"after {len([e for e in ports.log if e[0] == 'commit'])} commits")
        coro.close()

    ex, clock = executor(engine, ports, spawn=spawn)
    asyncio.run(ex.fire_due(T0 + 10, advance_clock=clock.advance_to))
    assert spawned == ["after 1 commits"] and ex.commits == 1


def test_a_refusal_inside_a_group_keeps_the_steps_before_it():
    engine, ports = TimerEngine(2), LogPorts()
    ex, clock = executor(engine, ports, refusals=(ValueError,))

    def refused(step: Step) -> None:
        raise ValueError("bad input")

    async def main() -> None:
        async with ex.group():
            await ex.fire_due(T0 + 10, advance_clock=clock.advance_to)
            with pytest.raises(ValueError):
                await ex.run(refused)
            await ex.run(lambda s: s.ops.append(("after", 0)))
    asyncio.run(main())
    assert ex.commits == 1 and ex.failed is None
    commit = next(e for e in ports.log if e[0] == "commit")[1]
    assert [op for op in commit if isinstance(op, tuple)] == [("op", 0), ("op", 1), ("after", 0)]


# ---- the router inside a group (issue 9 x issue 11) --------------------------------------------

ALERT = Rule(name="alert", actions=(Action(target="ops"),), throttle_seconds=60.0)


def _routed_engine() -> TimerEngine:
    """Timer 0 changes a marker (which also matches the throttled ``alert`` rule); timers 1..3
    each emit the same deduplicated event, which the rule alerts too."""
    ev = RoutingEvent(source="sidecar", subject="probe", action="x", dedup_key="same")
    return TimerEngine(4, emits={1: [ev], 2: [ev], 3: [ev]})


def _routed_router() -> Router:
    r = Router.in_memory("ev-test-", targets={"ops": "telegram"})
    r.apply_rule(ALERT)
    return r


def _deliveries(ports: LogPorts) -> list[tuple[str, str, str]]:
    return [(op.delivery.id, op.delivery.target, op.delivery.status)
            for e in ports.log if e[0] == "commit" for op in e[1] if isinstance(op, PutDelivery)]


def test_each_step_of_a_group_routes_as_if_the_steps_before_it_were_applied():
    """Dedup keys, throttle windows and event numbers of the group's earlier steps hold for the
    later ones although nothing is applied before the group's one commit: the rows equal those
    of one commit per step."""
    grouped, one_by_one = LogPorts(), LogPorts()
    ex, clock = executor(_routed_engine(), grouped, router=_routed_router())
    asyncio.run(ex.fire_due(T0 + 10, advance_clock=clock.advance_to))
    assert ex.commits == 1
    ref, clock2 = executor(_routed_engine(), one_by_one, router=_routed_router())

    async def each() -> None:  # the same timers, one step and one commit each
        while (nxt := ref.engine.scheduler.next_due()) is not None and nxt <= T0 + 10:
            clock2.advance_to(nxt)
            await ref.run(ref.engine.fire, now=nxt)
    asyncio.run(each())
    assert ref.commits == 4
    assert _deliveries(grouped) == _deliveries(one_by_one)
    statuses = [s for _, t, s in _deliveries(grouped) if t == "ops"]
    # timer 0's marker event alerts; timer 1's is in its 60 s throttle window (seen although
    # not applied); 2's and 3's are duplicates of 1's dedup key (likewise)
    assert statuses == [Status.PENDING.value, Status.SKIPPED.value, Status.DUPLICATE.value,
                        Status.DUPLICATE.value]
    assert ex.router.state.seq == ref.router.state.seq == 5  # four events, applied after the commit


def test_a_failed_group_commit_leaves_the_router_as_it_was():
    ports = LogPorts(fail_commit=True)
    router = _routed_router()
    ex, clock = executor(_routed_engine(), ports, router=router)
    with pytest.raises(StepFailed):
        asyncio.run(ex.fire_due(T0 + 10, advance_clock=clock.advance_to))
    assert router.state.seq == 1 and router.state.dedup == {} and router.state.last_real == {}
    assert router.state.prefix == "ev-test-"


def test_shutdown_inside_a_group_refuses_the_next_step_and_commits_the_ones_that_ran():
    engine, ports = TimerEngine(5), LogPorts()
    ex, clock = executor(engine, ports)
    hooks = 0

    async def hook() -> None:
        nonlocal hooks
        hooks += 1
        if hooks == 2:
            ex.stop()  # close() began while the advance ran

    with pytest.raises(Stopping):
        asyncio.run(ex.fire_due(T0 + 10, advance_clock=clock.advance_to, after_each=hook))
    assert ex.failed is None and ex.steps == 2 and ex.commits == 1
    commit = next(e for e in ports.log if e[0] == "commit")[1]
    assert [op for op in commit if isinstance(op, tuple)] == [("op", 0), ("op", 1)]
    assert [e[1] for e in ports.log if e[0] == "notify"] == [0, 1]


def test_a_group_commit_that_meets_the_closing_store_is_abandoned_not_failed():
    engine, ports = TimerEngine(3), LogPorts(fail_commit=True)
    ex, clock = executor(engine, ports)

    async def main() -> None:
        async with ex.group():
            await ex.fire_due(T0 + 10, advance_clock=clock.advance_to)
            ex.stop()
    with pytest.raises(Stopping):
        asyncio.run(main())
    assert ex.failed is None and ports.failed == [] and ex.steps == 0
    assert [e for e in ports.log if e[0] in ("notify", "step_done")] == []


# ---- the app on a real store ------------------------------------------------------------------

def _dump(path) -> list:
    import sqlite3
    with sqlite3.connect(path) as c:
        return list(c.iterdump())


async def _chain_run(path, *, fail_advance: bool):
    """Two favorites online; ru-1 writes at +0 and the TU answers at +5, so the advance to +600
    runs a Follow-up chain (a task created, expired, a marker written and queued for Stack) among
    dozens of online passes.  Returns the Run (stopped) and the store counters of that advance."""
    from sidecar.domain.favorites import Favorite
    from sidecar.store.ops import PutFavorite
    from tests.app.test_app_steps import TU, Run, msg

    run = await Run(path).start()

    async def perform(req):  # Electron's platform answers: both favorites online
        return {"online_ru": {"online": ["ru-1", "ru-2"]}, "chat_history": {"dialogs": []}}.get(
            req.method, {}), None
    run.app.perform = perform  # type: ignore[method-assign]
    try:
        await run.store.commit([PutFavorite(TU, ru, "golden", Favorite(
                ru=ru, project="golden", active=True, spend_30d_usd=50.0)) for ru in ("ru-1", "ru-2")])
        await run.call("clock.advance_to", {"t": T0})
        await run.call("session.login", {"tu": TU, "project": "golden", "operator": "op"})
        await run.call("platform.event", msg("ru-1", "m-1", T0))
        await run.call("clock.advance_to", {"t": T0 + 5})
        await run.call("platform.event", {
            "project": "golden", "tu": TU, "name": "privateMessageSent", "received_at": T0 + 5,
            "data": {"messageId": "o-1", "senderId": TU, "recipientId": "ru-1", "sentAt": T0 + 5,
                     "text": "hi"}})
        before = (run.store.counters.commits, run.store.counters.hops, run.store.counters.ops,
                  run.app.executor.steps, list(run.sent), await asyncio.to_thread(_dump, run.store.path))
        if fail_advance:
            run.fail_on = run.commits + 1
        try:
            await run.call("clock.advance_to", {"t": T0 + 600})
        except Exception as exc:  # noqa: BLE001 - the test looks at it
            run.error = exc
        c = run.store.counters
        return run, (c.commits - before[0], c.hops - before[1], c.ops - before[2],
                     run.app.executor.steps - before[3]), before[4], before[5]
    finally:
        await run.stop()


def test_one_store_commit_per_advance_and_a_failed_one_leaves_sqlite_and_stack_as_before(tmp_path):
    """The app on the virtual clock with a real store: an advance that runs dozens of timers (a
    chain task created and expired, a marker written and queued for Stack) is ONE store commit,
    at most one thread hop.  When that commit fails, nothing of any of its steps reached Electron, the
    database (its outbox: Stack's future) is exactly what it was before the advance, and the
    process takes no further step; a restart that plays the advance again (Electron re-advances)
    sends what the run without the failure sent."""
    async def main() -> None:
        ref, (commits, hops, ops, steps), sent0, _ = await _chain_run(tmp_path / "ref", fail_advance=False)
        assert steps > 20 and ops >= 8, (steps, ops)
        # no target but Stack: no pass splits the group; the commit is made on the loop's own
        # connection (no thread hop) or, with commits on aiosqlite's thread, in one hop
        assert (commits, hops) == (1, 0 if ref.store.commits_on_loop else 1)
        ref_after = [(m, getattr(p, "task_id", None)) for m, p in ref.sent[len(sent0):]]
        assert ("task.closed", ) == tuple(m for m, _ in ref_after if m == "task.closed")

        (tmp_path / "run").mkdir()
        run, _, sent_before, dump_before = await _chain_run(tmp_path / "run", fail_advance=True)
        assert run.app.failed is not None and run.app.fatal.is_set()
        assert run.sent == sent_before  # nothing of any step of the group was sent
        assert await asyncio.to_thread(_dump, tmp_path / "run" / "sidecar.db") == dump_before

        from tests.app.test_app_steps import TU, Run
        again = await Run(tmp_path / "run").start()  # Electron restarts it on the same data dir

        async def perform(req):
            return {"online_ru": {"online": ["ru-1", "ru-2"]}, "chat_history": {"dialogs": []}}.get(
                req.method, {}), None
        again.app.perform = perform  # type: ignore[method-assign]
        try:
            await again.call("clock.advance_to", {"t": T0 + 5})
            await again.call("session.login", {"tu": TU, "project": "golden", "operator": "op"})
            await again.call("clock.advance_to", {"t": T0 + 600})
            got = [(m, getattr(p, "task_id", None)) for m, p in again.sent]
            assert [n for n in got if n[0] in ("task.created", "task.closed")] == \
                [n for n in ref_after if n[0] in ("task.created", "task.closed")]
        finally:
            await again.stop()
    asyncio.run(main())
