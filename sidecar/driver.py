"""An in-process, synchronous driver of the engine on a virtual clock — no sockets, no SQLite.

Unit tests and benchmarks use it to run services exactly as ``sidecar/app.py`` does on the
virtual clock (every timer in due order, each its own step; platform requests answered inline),
with assertions on exact times.  Store ops are collected, not written.

    d = Driver(answer=lambda tu, method, params: {...}, seed=3)
    d.advance_to(T0)
    d.login("g-tu-1", "golden", startup={...})
    d.event("g-tu-1", "golden", "receivePrivateMessage", {...})
    d.advance_to(T0 + 60)
    d.notes  # [(method, params), ...] as Electron would have received them
"""
from __future__ import annotations

from typing import Any, Callable

from sidecar.core.clock import VirtualClock
from sidecar.core.rng import KeyedRandom
from sidecar.engine import Engine
from sidecar.services import default_services
from sidecar.services.base import Step

Answer = Callable[[str, str, dict], Any]  # (tu, method, params) -> result; raise for an error


class Driver:
    def __init__(self, answer: Answer | None = None, seed: int | str = 0,
                 services=default_services) -> None:
        self.clock = VirtualClock()
        self.engine = Engine(KeyedRandom(seed), services)
        self.answer = answer or (lambda tu, method, params: {})
        self.notes: list[tuple[str, Any]] = []  # every notification, in order
        self.ops: list = []  # every store op, in order
        self.requests: list[tuple[str, str, dict]] = []  # (tu, method, params) made
        self.steps = 0

    @property
    def now(self) -> float:
        return self.clock.now()

    def run(self, fn: Callable[[Step], Any], now: float | None = None) -> Any:
        step = Step(now=self.clock.now() if now is None else now)
        result = fn(step)
        self._finish(step)
        return result

    def _finish(self, step: Step) -> None:
        self.steps += 1
        self.ops.extend(step.ops)
        self.notes.extend(step.notes)
        for rt, req in step.requests:
            self.requests.append((rt.tu, req.method, req.params))
            try:
                result, error = self.answer(rt.tu, req.method, req.params), None
            except Exception as exc:  # noqa: BLE001 - an error answer, as the bridge gives
                result, error = None, str(exc)
            self.run(lambda s: self.engine.request_done(s, rt, req, result, error))

    def advance_to(self, t: float) -> None:
        if not self.clock.is_set:
            self.clock.advance_to(t)
        while (nd := self.engine.scheduler.next_due()) is not None and nd <= t:
            self.clock.advance_to(nd)
            self.run(self.engine.fire, now=max(nd, self.clock.now()))
        self.clock.advance_to(t)

    def login(self, tu: str, project: str, *, startup: dict | None = None, operator: str = "op",
              local_tasks=(), pending_markers=None, local_favorites=None, local_state=None):
        return self.run(lambda s: self.engine.login(
            s, tu, project, operator, startup=startup, local_favorites=local_favorites or {},
            local_tasks=list(local_tasks), pending_markers=pending_markers or {},
            local_state=local_state))

    def logout(self, tu: str) -> None:
        self.run(lambda s: self.engine.logout(s, tu))

    def event(self, tu: str, project: str, name: str, data: dict) -> int:
        return self.run(lambda s: self.engine.platform_event(s, tu, project, name, data))

    def favorite(self, tu: str, ru: str, **changes) -> None:
        self.run(lambda s: self.engine.favorite_update(s, tu, ru, changes))

    def close(self, task_id: str, reason: str = "answered") -> bool:
        return self.run(lambda s: self.engine.task_close(s, task_id, reason))

    # views ------------------------------------------------------------------------------------
    def created(self, type_: str | None = None, ru: str | None = None) -> list:
        out = [p.task for m, p in self.notes if m == "task.created"]
        return [t for t in out if (type_ is None or t.type == type_) and (ru is None or t.ru == ru)]

    def closed(self, type_: str | None = None) -> list:
        out = [p for m, p in self.notes if m == "task.closed"]
        return [p for p in out if type_ is None or p.type == type_]

    def attempts(self) -> list:
        return [p for m, p in self.notes if m == "chain.attempt"]
