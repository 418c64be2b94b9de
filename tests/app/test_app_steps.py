"""A step is atomic, in memory too (issue 6 item 7; DESIGN §13): the app on the virtual clock with
a real SQLite store whose commit is made to fail.  The sidecar is crash-only: it takes no further
step, sends nothing of the failed one, and a restart on the same data dir behaves exactly as if
the failed step never happened.  Refusals stay -32602; a programming error is never "bad params"."""
from __future__ import annotations

import asyncio

import pytest

from bridge.errors import InternalError, InvalidParams
from sidecar.app.root import EXIT_STEP_FAILED, SidecarApp
from sidecar.config import Settings
from sidecar.store.db import Store
from sidecar.store.errors import StoreError

T0 = 1796025600.0
TU = "g-tu-1"


def msg(ru: str, mid: str, at: float) -> dict:
    return {"project": "golden", "tu": TU, "name": "receivePrivateMessage",
            "data": {"messageId": mid, "senderId": ru, "recipientId": TU, "sentAt": at, "text": "hi"},
            "received_at": at}


class Run:
    """One sidecar process: the app, its store, and the notifications it sent."""

    def __init__(self, path, fail_commit_on: int | None = None) -> None:
        self.path, self.fail_on, self.commits = path, fail_commit_on, 0
        self.sent: list[tuple[str, dict]] = []

    async def start(self) -> "Run":
        self.store = await Store.open(self.path / "sidecar.db")
        real = self.store.commit

        async def commit(ops):
            self.commits += 1
            if self.commits == self.fail_on:
                raise StoreError("disk I/O error (injected)")
            await real(ops)
        self.store.commit = commit  # type: ignore[method-assign]
        self.app = SidecarApp(Settings(token="t", clock="virtual", data_dir=self.path), self.store)
        self.app.bridge.notify = lambda m, p=None: self.sent.append((m, p)) or 0  # type: ignore[method-assign]
        return self

    async def call(self, method: str, params: dict):
        return await self.app.handle(method, params)

    async def stop(self) -> None:
        await self.app.close()
        await self.store.close()

    def created(self) -> list[tuple]:
        return [(p.task.task_id, p.task.ru, p.task.created_at, p.task.deadline)
                for m, p in self.sent if m == "task.created"]


async def scenario(run: Run, *, fail_first_message: bool) -> None:
    await run.call("clock.advance_to", {"t": T0})
    await run.call("session.login", {"tu": TU, "project": "golden", "operator": "op"})
    await run.call("clock.advance_to", {"t": T0 + 10})
    if fail_first_message:
        run.fail_on = run.commits + 1
        with pytest.raises(InternalError):
            await run.call("platform.event", msg("ru-1", "m-1", T0 + 10))


def test_a_failed_commit_leaves_nothing_and_the_next_steps_behave_as_if_it_never_happened(tmp_path):
    async def main():
        # reference: the message at +10 never arrived
        ref = await Run(tmp_path / "ref").start()
        await scenario(ref, fail_first_message=False)
        await ref.call("clock.advance_to", {"t": T0 + 20})
        await ref.call("platform.event", msg("ru-2", "m-2", T0 + 20))
        await ref.call("clock.advance_to", {"t": T0 + 200})
        ref_tasks = [(t.task_id, t.ru, t.deadline) for t in await ref.call("tasks.list", {"tu": TU})]
        ref_created = ref.created()
        await ref.stop()

        (tmp_path / "run").mkdir()
        run = await Run(tmp_path / "run").start()
        await scenario(run, fail_first_message=True)
        assert isinstance(run.app.failed, StoreError) and run.app.fatal.is_set()
        assert [m for m, _ in run.sent if m == "task.created"] == []  # nothing of it was sent
        for method, params in (("tasks.list", {"tu": TU}), ("clock.advance_to", {"t": T0 + 20}),
                               ("platform.event", msg("ru-2", "m-2", T0 + 20))):
            with pytest.raises(InternalError):  # crash-only: no further step in this process
                await run.call(method, params)
        await run.stop()

        # Electron restarts the sidecar on the same data dir and logs the TU in again
        again = await Run(tmp_path / "run").start()
        await again.call("clock.advance_to", {"t": T0 + 10})
        await again.call("session.login", {"tu": TU, "project": "golden", "operator": "op"})
        assert await again.call("tasks.list", {"tu": TU}) == []  # nothing of the failed step
        await again.call("clock.advance_to", {"t": T0 + 20})
        await again.call("platform.event", msg("ru-2", "m-2", T0 + 20))
        await again.call("clock.advance_to", {"t": T0 + 200})
        tasks = [(t.task_id, t.ru, t.deadline) for t in await again.call("tasks.list", {"tu": TU})]
        assert tasks == ref_tasks and again.created() == ref_created
        assert [(m, p.task_id) for m, p in again.sent if m == "task.updated"] == \
            [("task.updated", ref_tasks[0][0])]  # overdue at +140 as in the reference
        await again.stop()
    asyncio.run(main())


def test_a_programming_error_in_a_step_is_an_internal_error_not_bad_params(tmp_path):
    async def main():
        run = await Run(tmp_path).start()
        await run.call("clock.advance_to", {"t": T0})
        await run.call("session.login", {"tu": TU, "project": "golden", "operator": "op"})
        svc = run.app.engine.tus[TU].by_name["inbound"]

        def broken(step, event):
            raise KeyError("ru")  # a bug, not a bad input
        svc.on_event = broken
        with pytest.raises(InternalError):
            await run.call("platform.event", msg("ru-1", "m-1", T0))
        assert isinstance(run.app.failed, KeyError)
        await run.stop()
    asyncio.run(main())


def test_refusals_stay_bad_params_and_change_nothing(tmp_path):
    async def main():
        run = await Run(tmp_path).start()
        await run.call("clock.advance_to", {"t": T0})
        for method, params in (("platform.event", msg("ru-1", "m-1", T0)),  # TU not logged in
                               ("session.login", {"tu": TU, "project": "nowhere", "operator": "op"})):
            with pytest.raises(InvalidParams):
                await run.call(method, params)
        await run.call("session.login", {"tu": TU, "project": "golden", "operator": "op"})
        with pytest.raises(InvalidParams):
            await run.call("platform.poll", {"project": "golden", "tu": TU, "pass": "nope", "data": {}})
        assert run.app.failed is None
        await run.stop()
    asyncio.run(main())


def test_serve_exits_with_the_step_failed_code():
    from sidecar.cli.main import EXIT_CODES
    assert EXIT_STEP_FAILED == 6 and "  6    a step could not be saved" in EXIT_CODES


def test_a_failed_steps_decisions_and_candidates_never_survive_nor_silence_a_later_one(tmp_path):
    """The decision log (DESIGN §13) under crash-only steps: the refusal decided in a step whose
    commit fails is neither in SQLite nor queued for Stack, and the in-memory "logged once per
    change" memory of that step cannot suppress the same refusal decided later — the restarted
    process logs it, so the log never loses a change."""
    import msgspec

    async def why(run: Run) -> list[tuple[float, str, str]]:
        got = await run.call("why", {"tu": TU, "ru": "ru-1"})
        return [(d["at"] - T0, d["type"], d["outcome"]) for d in got["decisions"]]

    async def main():
        run = await Run(tmp_path).start()
        await scenario(run, fail_first_message=False)  # +10: Unanswered message created
        await run.call("platform.event", msg("ru-1", "m-1", T0 + 10))
        await run.call("clock.advance_to", {"t": T0 + 20})
        run.fail_on = run.commits + 1  # +20: a second message, refused while the first is open
        with pytest.raises(InternalError):
            await run.call("platform.event", msg("ru-1", "m-2", T0 + 20))
        with pytest.raises(InternalError):  # crash-only: not even the read-only why answers
            await why(run)
        await run.stop()

        again = await Run(tmp_path).start()
        await again.call("clock.advance_to", {"t": T0 + 30})
        await again.call("session.login", {"tu": TU, "project": "golden", "operator": "op"})
        assert await why(again) == [(10.0, "unanswered_message", "created")]  # nothing of +20
        await again.call("platform.event", msg("ru-1", "m-3", T0 + 30))
        await again.call("platform.event", msg("ru-1", "m-4", T0 + 30.5))  # the same refusal again
        assert await why(again) == [(10.0, "unanswered_message", "created"),
                                    (30.0, "unanswered_message", "refused:stronger_task_open")]
        from sidecar.router.io.storage import RouterStore  # candidates ride the router's stack channel
        cands = [msgspec.json.decode(r.message) for r in await RouterStore(again.store).deliveries()
                 if r.source == "candidates"]
        assert [c["at"] - T0 for c in cands if c["ru"] == "ru-1"] == [10.0, 30.0], cands  # none of +20
        await again.stop()
    asyncio.run(main())
