"""The unit tests' handle on the PRODUCTION step executor, on a virtual clock, with no sockets
and no SQLite: :class:`~sidecar.runtime.executor.StepExecutor` runs every step exactly as
``sidecar/app/root.py`` does (commit, then notify, then requests inline; timers in due order, each its
own step); only its ports differ — store ops and notes are collected in lists, platform requests
answered by ``answer``.

    d = Driver(answer=lambda tu, method, params: {...}, seed=3)
    d.advance_to(T0)
    d.login("g-tu-1", "golden", startup={...})
    d.event("g-tu-1", "golden", "receivePrivateMessage", {...})
    d.advance_to(T0 + 60)
    d.notes  # [(method, params), ...] as Electron would have received them

The executor's coroutines never suspend here (every port answers at once), so each call is run
to completion by :func:`run_sync` without an event loop.
"""
from __future__ import annotations

from collections.abc import Coroutine
from functools import partial
from typing import Any, Callable

import msgspec

from sidecar.core.clock import VirtualClock
from sidecar.core.rng import KeyedRandom
from sidecar.domain.tasks import HistoryRow
from sidecar.router.core import Router
from sidecar.runtime.engine import REFUSALS, Engine
from sidecar.runtime.executor import StepExecutor
from sidecar.runtime.step import Request, Step
from sidecar.services import default_services
from sidecar.stack.startup import favorite_of

Answer = Callable[[str, str, dict], Any]


def stack_writes(ops: list, source: str | None = None) -> list:
    """The Stack writes among ``ops``: the router's pending ``stack`` deliveries (the built-in
    route of ``markers`` / ``tasks`` / ``candidates`` events), in order; ``source`` filters."""
    from sidecar.router.ops import PutDelivery
    return [op.delivery for op in ops if isinstance(op, PutDelivery)
            and op.delivery.channel == "stack" and (source is None or op.delivery.source == source)]  # (tu, method, params) -> result; raise for an error


def run_sync(coro: Coroutine[Any, Any, Any]) -> Any:
    """Run a coroutine that never suspends; RuntimeError if it does (a port that really waits)."""
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value
    coro.close()
    raise RuntimeError("the executor suspended: a test port must answer at once")


class Driver:
    """In-memory ports of the production executor (see the module docstring)."""

    def __init__(self, answer: Answer | None = None, seed: int | str = 0,
                 services=default_services) -> None:
        self.clock = VirtualClock()
        self.engine = Engine(KeyedRandom(seed), services)
        self.answer = answer or (lambda tu, method, params: {})
        self.notes: list[tuple[str, Any]] = []  # every notification, in order
        self.ops: list = []  # every store op, in order
        self.requests: list[tuple[str, str, dict]] = []  # (tu, method, params) made
        self.router = Router.in_memory("ev-test-")  # the built-in Stack route only
        self.executor = StepExecutor(self.engine, self.clock, self, refusals=REFUSALS,
                                     router=self.router)

    @property
    def steps(self) -> int:
        return self.executor.steps

    @property
    def now(self) -> float:
        return self.clock.now()

    # ports ------------------------------------------------------------------------------------
    async def commit(self, ops: list) -> None:
        self.ops.extend(ops)

    def notify(self, method: str, note: Any) -> None:
        self.notes.append((method, note))

    def outbox_queued(self, at: float, channels: frozenset[str] | None = None) -> None:
        pass  # the ops list holds the rows

    def outbox_due(self, at: float) -> None:
        pass  # no Stack here: the app's pump sends the rows

    async def perform(self, req: Request) -> tuple[Any, str | None]:
        self.requests.append((req.tu, req.method, req.params))
        try:
            return self.answer(req.tu, req.method, req.params), None
        except Exception as exc:  # noqa: BLE001 - an error answer, as the bridge gives
            return None, str(exc)

    def step_failed(self, exc: BaseException) -> None:
        raise exc  # a unit test wants the real error, not exit 6

    def step_done(self) -> None:
        pass

    # inputs -----------------------------------------------------------------------------------
    def run(self, fn: Callable[[Step], Any], now: float | None = None) -> Any:
        return run_sync(self.executor.run(fn, now))

    def advance_to(self, t: float) -> None:
        if not self.clock.is_set:
            self.clock.advance_to(t)
        if self.executor.due(t):  # as the app's fire_until: no coroutine when nothing is due
            run_sync(self.executor.fire_due(t, advance_clock=self.clock.advance_to))
        self.clock.advance_to(t)

    def login(self, tu: str, project: str, *, startup: dict | None = None, operator: str = "op",
              local_tasks=(), pending_markers=None, local_favorites=None, local_state=None,
              resumed: bool = False):
        if startup is not None:  # tests write rows as Stack sends them: convert at the edge like the app
            favs = startup.get("favorites")  # missing or None: Stack has no list (DESIGN §12.5)
            startup = {"favorites": None if favs is None else [favorite_of(f) for f in favs],
                       "history": [msgspec.convert(r, HistoryRow) for r in startup.get("history", ())]}
        return self.run(partial(
            self.engine.login, tu=tu, project=project, operator=operator, startup=startup,
            local_favorites=local_favorites or {}, local_tasks=list(local_tasks),
            pending_markers=pending_markers or {}, local_state=local_state, resumed=resumed))

    def logout(self, tu: str) -> None:
        self.run(partial(self.engine.logout, tu=tu))

    def event(self, tu: str, project: str, name: str, data: dict) -> int:
        return self.run(partial(self.engine.platform_event, tu=tu, project=project, name=name,
                                data=data))

    def favorite(self, tu: str, ru: str, **changes) -> None:
        self.run(partial(self.engine.favorite_update, tu=tu, ru=ru, changes=changes))

    def close(self, task_id: str, reason: str = "answered") -> bool:
        return self.run(partial(self.engine.task_close, task_id=task_id, reason=reason))

    # views ------------------------------------------------------------------------------------
    def created(self, type_: str | None = None, ru: str | None = None) -> list:
        out = [p.task for m, p in self.notes if m == "task.created"]
        return [t for t in out if (type_ is None or t.type == type_) and (ru is None or t.ru == ru)]

    def closed(self, type_: str | None = None) -> list:
        out = [p for m, p in self.notes if m == "task.closed"]
        return [p for p in out if type_ is None or p.type == type_]

    def attempts(self) -> list:
        return [p for m, p in self.notes if m == "chain.attempt"]
