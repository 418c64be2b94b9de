"""Wall clock: queued ``platform.event`` frames run as ONE commit group (sidecar/app/step_groups.py;
issue 11, the wall clock's latency).  Each frame is answered exactly as it would be alone; no
``task.created`` precedes its commit; a failed group commit sends nothing and answers -32603;
at shutdown nothing new begins.  The app runs on a wall-like clock the test moves by hand, with
a real SQLite store whose commits are logged beside the notes in one order."""
from __future__ import annotations

import asyncio
from typing import Any

from bridge import BridgeClient
from bridge.errors import InternalError, InvalidParams, RpcError, ShuttingDown
from sidecar.app.root import SidecarApp
from sidecar.config import Settings
from sidecar.core.clock import Clock
from sidecar.store.db import Store
from sidecar.store.errors import StoreError

T0 = 1796025600.0
TU = "c-tu-1"


class HandClock(Clock):
    """A wall clock (timers fire by themselves, requests run beside the steps) whose ``now`` the
    test sets: the same instants in every run."""

    virtual = False

    def __init__(self, t: float) -> None:
        self.t = t

    def now(self) -> float:
        return self.t


def event(i: int, *, tu: str = TU, name: str = "Send") -> dict:
    return {"project": "chathouse", "tu": tu, "name": name,
            "data": {"id": f"m{i}", "type": "message", "from": f"c-ru-{i}", "to": tu,
                     "at": T0 + i, "body": "hi"}}


class Run:
    """One app on its own data dir: ``log`` holds ("commit", n_ops) and ("note", method, ru)
    in the order they happened."""

    def __init__(self, path, token: str = "t") -> None:
        self.path, self.token = path, token
        self.log: list[tuple] = []
        self.fail_commits = False

    async def start(self, *, bridge: bool = False) -> "Run":
        self.store = await Store.open(self.path / "sidecar.db")
        real = self.store.commit

        async def commit(ops):
            if self.fail_commits:
                raise StoreError("disk I/O error (injected)")
            await real(ops)
            self.log.append(("commit", len(ops)))
        self.store.commit = commit  # type: ignore[method-assign]
        self.clock = HandClock(T0)
        self.app = SidecarApp(Settings(token=self.token, clock="wall", data_dir=self.path, port=0),
                              self.store, clock=self.clock)
        if not bridge:
            self.app.bridge.notify = self._note  # type: ignore[method-assign]
        else:
            real_notify = self.app.bridge.notify

            def notify(method, params=None):
                self._note(method, params)
                return real_notify(method, params)
            self.app.bridge.notify = notify  # type: ignore[method-assign]

        async def perform(req):  # no platform behind: every request fails at once
            return None, "NotConnected: no platform in this test"
        self.app.perform = perform  # type: ignore[method-assign]
        await self.app.start()
        await self.app.handle("session.login", {"tu": TU, "project": "chathouse"})
        while len(self.app._bg) > 2:  # the login's pass requests and their answers; then
            await asyncio.sleep(0)  # only the ticker and the delivery pump run (the clock stands)
        self.log.clear()
        return self

    def _note(self, method: str, params: Any = None) -> int:
        ru = params.task.ru if method == "task.created" else None
        self.log.append(("note", method, ru))
        return 0

    async def stop(self) -> None:
        await self.app.close()
        await self.store.close()

    def created(self) -> list[str]:
        return [e[2] for e in self.log if e[0] == "note" and e[1] == "task.created"]


def answers_of(outcomes: list) -> list:
    """Outcomes comparable across runs: a result, or (code, message) of an error."""
    return [(o.code, o.message) if isinstance(o, RpcError) else o for o in outcomes]


async def alone(run: Run, frames: list) -> list:
    out = []
    for f in frames:
        try:
            out.append(await run.app.handle("platform.event", f))
        except RpcError as exc:
            out.append(exc)
    return out


async def test_a_group_commits_once_then_notifies_and_answers_each_frame_as_alone(tmp_path):
    bad_params = {"project": "chathouse", "tu": TU}  # no name, no data
    frames = [event(0), event(1), {"project": "chathouse", "tu": "c-tu-9", "name": "Send",
                                   "data": event(2)["data"]},  # not logged in: a refusal
              bad_params, event(3), event(4, name="NoSuchEvent"), event(5)]
    a = await Run(tmp_path / "group").start()
    b = await Run(tmp_path / "alone").start()
    try:
        grouped = await a.app._handle_group("platform.event", frames)
        single = await alone(b, frames)
        assert answers_of(grouped) == answers_of(single)
        assert [type(o) for o in grouped] == [dict, dict, InvalidParams, InvalidParams, dict,
                                              InvalidParams, dict]
        # one transaction for the whole group; every note after it
        assert [e[0] for e in a.log] == ["commit"] + ["note"] * (len(a.log) - 1)
        assert a.created() == b.created() == ["c-ru-0", "c-ru-1", "c-ru-3", "c-ru-5"]
        tasks = await a.app.handle("tasks.list", {"tu": TU})
        assert [t.task_id for t in tasks] == [t.task_id for t in await b.app.handle("tasks.list", {"tu": TU})]
        assert sum(1 for e in b.log if e[0] == "commit") == 4  # alone: a commit per step
    finally:
        await a.stop()
        await b.stop()


async def test_no_task_created_precedes_the_commit_that_holds_its_task(tmp_path):
    run = await Run(tmp_path).start()
    try:
        for k in range(3):  # three groups back to back
            await run.app._handle_group("platform.event", [event(10 * k + i) for i in range(4)])
        seen_commits = 0
        for e in run.log:
            if e[0] == "commit":
                seen_commits += 1
            elif e[1] == "task.created":
                ru_n = int(e[2].rsplit("-", 1)[1])
                assert seen_commits > ru_n // 10, f"{e[2]} notified before its group committed"
        assert seen_commits == 3
    finally:
        await run.stop()


async def test_a_failed_group_commit_sends_nothing_answers_every_frame_and_stops(tmp_path):
    run = await Run(tmp_path).start()
    try:
        run.fail_commits = True
        out = await run.app._handle_group("platform.event", [event(i) for i in range(3)])
        assert all(isinstance(o, InternalError) for o in out), out
        assert run.log == []  # nothing committed, nothing sent
        assert run.app.failed is not None and run.app.fatal.is_set()
        run.fail_commits = False
        again = await run.app._handle_group("platform.event", [event(7), event(8)])
        assert all(isinstance(o, InternalError) and "stopped after a failed step" in o.message
                   for o in again)
        assert run.log == []
    finally:
        await run.stop()
    # a restart finds none of the group's tasks
    run2 = await Run(tmp_path).start()
    try:
        assert await run2.app.handle("tasks.list", {"tu": TU}) == []
    finally:
        await run2.stop()


async def test_a_crashing_step_leaves_nothing_of_the_group_and_keeps_a_refusal_s_answer(tmp_path):
    run = await Run(tmp_path).start()
    engine = run.app.engine
    real = engine.platform_event
    calls: list[str] = []

    def crash_on_2(step, **kw):
        calls.append(kw["tu"])
        if len(calls) == 3:  # the third frame's step
            raise KeyError("a programming error")
        return real(step, **kw)
    engine.platform_event = crash_on_2
    try:
        frames = [event(0), event(1, tu="c-tu-9"), event(2), event(3)]
        out = await run.app._handle_group("platform.event", frames)
        assert isinstance(out[1], InvalidParams)  # refused before anything changed: stands
        assert all(isinstance(o, InternalError) for o in (out[0], out[2], out[3])), out
        assert run.log == [] and run.app.failed is not None
    finally:
        await run.stop()


async def test_once_shutdown_began_no_step_of_a_group_begins(tmp_path):
    run = await Run(tmp_path).start()
    try:
        run.app.executor.stop()
        out = await run.app._handle_group("platform.event", [event(0), event(1)])
        assert all(isinstance(o, ShuttingDown) and "shutting down" in o.message for o in out)
        assert run.log == [] and run.app.failed is None
    finally:
        await run.stop()


async def test_frames_queued_behind_a_busy_step_share_one_commit_through_the_bridge(tmp_path):
    run = await Run(tmp_path, token="tok").start(bridge=True)
    created: list[str] = []
    client = await BridgeClient.connect(
        run.app.bridge.port, "tok",
        on_notification=lambda m, p: created.append(p["task"]["ru"]) if m == "task.created" else None)
    try:
        async with run.app._lock:  # a step under way: the worker waits, the frames queue up
            for i in range(50):
                await client.notify("platform.event", event(i))
            queued = run.app.bridge._queue._q  # the worker may hold the first frame(s) already
            while not queued or b'"m49"' not in bytes(queued[-1][1].params):
                await asyncio.sleep(0.005)
        assert (await client.call("status", {}))["tus"] == [TU]
        while len(created) < 50:
            await asyncio.sleep(0.005)
        assert created == [f"c-ru-{i}" for i in range(50)]
        # the frame(s) the worker took before the step let go, then the rest as one group
        assert sum(1 for e in run.log if e[0] == "commit") <= 2
    finally:
        await client.close()
        await run.stop()
