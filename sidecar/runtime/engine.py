"""The engine: every TU's runtime, the one scheduler, the Task Factory and keyed randomness.

Rules / theory of operation
---------------------------
* Sans-I/O: every public method takes a :class:`~sidecar.services.base.Step` and writes effects
  into it; the application (``sidecar/app/root.py``) commits, notifies and performs requests.
* Inputs: ``login``/``logout``, ``platform_event`` (raw → domain events by the project's client),
  ``favorite_update``, ``task_close``, ``fire`` (one due timer), ``request_done``.
* Timer keys are ``(tu, kind, ...)``: ``deadline`` goes to the Task Factory, any other ``kind`` is
  a service name.
* Favorites at login are exactly what Stack's startup data lists (a favorite Stack stops listing is
  dropped, its cached row deleted); only when Stack is unreachable does the local cache stand in
  (DESIGN §6, §9).  Unacknowledged local marker writes are applied to those favorites only.  The scheduler orders them; ``fire`` handles exactly one, so every timer is its
  own step (its own transaction) in due order.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from platform_clients import BadAnswer, BadRawEvent, UnknownRawEvent, client_for
from sidecar.core.rng import KeyedRandom
from sidecar.core.scheduler import Scheduler
from sidecar.domain.favorites import Favorite
from sidecar.domain.tasks import CloseReason, HistoryRow, Task, TaskType
from sidecar.runtime import decisions
from sidecar.runtime.dispatch import dispatch
from sidecar.runtime.factory import TaskFactory
from sidecar.runtime.step import Request, ServiceHooks, Step
from sidecar.runtime.tu import TuRuntime
from sidecar.store import ops

log = logging.getLogger("sidecar.engine")

ServiceFactory = Callable[[TuRuntime], Sequence[ServiceHooks]]


class EngineError(Exception):
    """A request the engine cannot apply (unknown TU, unknown task); becomes -32602 whose
    ``data.field`` is ``field`` (the params field refused, :mod:`sidecar.app.refusals`)."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field


REFUSALS = (EngineError, BadRawEvent, UnknownRawEvent)  # raised by an input before any change
OUTBOX_TIMER = (None, "outbox")  # the delivery pump's next pass: the router's stack channel and every
# other target (process-wide namespace, DESIGN §13; the name is the old outbox's)


class Engine:
    def __init__(self, rng: KeyedRandom, services: ServiceFactory) -> None:
        self.rng = rng  # keyed randomness, deployment seed
        self.scheduler = Scheduler()  # the one ordered timer queue
        self.factory = TaskFactory()  # open tasks of every TU
        self.tus: dict[str, TuRuntime] = {}  # tu -> runtime (logged in or restoring)
        self._services = services  # builds a TU's services (pluggable: issue-specific services)
        self.events_in = 0  # platform events handled (status)
        self.decisions = decisions.DecisionLog()  # the decision log's memory (DESIGN §13)
        self._epochs = 0  # login sessions so far (TuRuntime.epoch)
        # process-wide components' timers: kind -> handler(step, key, payload) (register_timer)
        self._global_timers: dict[str, Callable[[Step, tuple, Any], None]] = {}

    # sessions ---------------------------------------------------------------------------------
    def login(self, step: Step, tu: str, project: str, operator: str, *, startup: dict | None,
              local_favorites: Mapping[str, Favorite], local_tasks: list[Task],
              pending_markers: dict[tuple[str, str], Any],
              local_state: dict[str, dict] | None = None, resumed: bool = False) -> TuRuntime:
        """Restore a TU (DESIGN §9): Stack startup data, then local unsent marker writes, then
        local open tasks; then every service's ``on_login``.  ``startup``: ``{"favorites": [Favorite],
        "history": [HistoryRow]}`` (:mod:`sidecar.stack.startup`); None: Stack unreachable
        — the local cache is used and the login still succeeds.  ``resumed``: this machine's
        session row for the TU outlived its process (a crash, not a logout)."""
        old = self.tus.get(tu)
        if old is not None and old.logged_in:
            if old.project != project:
                raise EngineError(f"TU {tu!r} is logged in as a {old.project} profile, not {project}", "project")
            return old  # idempotent: Electron may repeat a login after a reconnect
        try:
            client = client_for(project)
        except KeyError:
            raise EngineError(f"unknown project {project!r}", "project") from None
        self._epochs += 1
        rt = TuRuntime(tu, project, client, operator, scheduler=self.scheduler,
                       factory=self.factory, rng=self.rng, decisions=self.decisions,
                       epoch=self._epochs)
        self.tus[tu] = rt
        history: dict[str, dict[str, HistoryRow]] = {}
        dropped: list[str] = []
        if startup is not None:
            favorites: dict[str, Favorite] = {fav.ru: fav for fav in startup.get("favorites", ())}
            dropped = sorted(set(local_favorites) - set(favorites))
            for row in startup.get("history", ()):
                history.setdefault(row.ru, {})[row.task_id] = row
        else:
            favorites = dict(local_favorites)  # frozen values: shared, not copied
        for (ru, name), value in pending_markers.items():  # unacked local writes win
            fav = favorites.get(ru)
            if fav is None:
                continue  # no longer a favorite: the marker has no owner here
            favorites[ru] = fav.with_marker(name, value)  # None: cleared (a fact, see TuRuntime)
        for task in local_tasks:
            history.setdefault(task.ru, {})[task.task_id] = HistoryRow.of(task)
        rt.favorites = favorites
        rt.local_state = local_state or {}
        rt.history = {ru: sorted(rows.values(), key=lambda r: r.created_at)
                      for ru, rows in history.items()}
        rt.add_services(self._services(rt))
        rt.logged_in = True
        rt.resumed = resumed
        rt.inbox_synced = not any(p.purpose == "check_chat" for p in rt.client.passes)
        for task in local_tasks:
            if task.is_open:
                self.factory.adopt(rt, task, step.now)
        for ru, fav in favorites.items():
            step.ops.append(ops.PutFavorite(tu=tu, ru=ru, project=project, data=fav))
        for ru in dropped:
            step.ops.append(ops.DeleteFavorite(tu=tu, ru=ru))
        step.ops.append(ops.PutSession(tu=tu, project=project, operator=operator, at=step.now))
        self._housekeeping(step)
        rt.services.login(step)
        return rt

    def logout(self, step: Step, tu: str) -> None:
        """Close the TU's open tasks as ``logout`` and drop its timers and pools."""
        rt = self.tus.get(tu)
        if rt is None or not rt.logged_in:
            return
        self.factory.close_tu(step, rt, CloseReason.LOGOUT)
        rt.services.logout(step)
        rt.logged_in = False
        rt.cancel_all()
        self.decisions.forget_tu(tu)
        del self.tus[tu]
        if not self.tus:  # nobody logged in: nothing to keep tidy until the next login
            self.scheduler.cancel((None, "housekeeping"))
        step.ops.append(ops.DeleteSession(tu=tu))

    def reconnected(self, step: Step, tu: str) -> None:
        self._rt(tu).services.reconnect(step)

    # inputs -----------------------------------------------------------------------------------
    def platform_event(self, step: Step, tu: str, project: str, name: str, data: Any) -> int:
        """Decode a raw socket event and dispatch it; returns how many domain events it made.
        Raises EngineError (unknown TU / project mismatch) or the client's BadRawEvent /
        UnknownRawEvent — nothing is changed in that case."""
        rt = self._rt(tu)
        if project != rt.project:
            raise EngineError(f"TU {tu!r} is a {rt.project} profile, not {project}", "project")
        events = rt.client.decode_event(tu, name, data)
        for event in events:
            dispatch(step, rt, event)
        self.events_in += 1
        return len(events)

    def favorite_update(self, step: Step, tu: str, ru: str, changes: Mapping[str, Any]) -> None:
        """``favorite.update``: attribute changes (names of :class:`Favorite`, None = keep)."""
        rt = self._rt(tu)
        rt.update_favorite(step, ru, changes)

    def task_close(self, step: Step, task_id: str, reason: str) -> bool:
        task = self.factory.open.get(task_id)
        if task is None:
            return False
        try:
            why = CloseReason(reason)
        except ValueError:
            raise EngineError(f"unknown close reason {reason!r}", "reason") from None
        return self.factory.close(step, self._rt(task.tu), task, why)

    def register_timer(self, kind: str, handler: Callable[[Step, tuple, Any], None]) -> None:
        """A process-wide component (sender health, the router) owns the timers keyed
        ``(None, kind, ...)``: each due one is handed to ``handler(step, key, payload)`` as a step
        of its own (DESIGN §13: "their timers share the one scheduler in a namespace of their
        own").  ValueError when ``kind`` is taken."""
        if kind in self._global_timers or kind in ("outbox", "housekeeping"):
            raise ValueError(f"process-wide timer kind {kind!r} is already registered")
        self._global_timers[kind] = handler

    def outbox_at(self, at: float | None) -> None:
        """Arm the outbox timer at ``at`` (unix seconds) unless it is armed sooner; None: no
        change.  The outbox's next attempt lives in the one scheduler like every other timer
        (DESIGN §5, §12.6), so the virtual clock's ``next_due`` comes from the scheduler alone."""
        if at is None:
            return
        armed = self.scheduler.due_of(OUTBOX_TIMER)
        if armed is None or at < armed:
            self.scheduler.schedule(OUTBOX_TIMER, at)

    def next_due(self, now: float | None) -> float | None:
        """The earliest instant the process acts by itself (a timer or an outbox attempt), or
        None.  An outbox attempt at or before ``now`` does not count: the next input — a step
        or an advance, whenever it comes — makes it."""
        out = self.scheduler.due_of(OUTBOX_TIMER)
        if out is not None and now is not None and out <= now:
            return self.scheduler.next_due_besides(OUTBOX_TIMER)
        return self.scheduler.next_due()

    def fire(self, step: Step) -> bool:
        """Run the earliest timer due at ``step.now``; False when none is due."""
        item = self.scheduler.pop_due(step.now)
        if item is None:
            return False
        key, _due, payload = item
        assert isinstance(key, tuple), key  # every key is (tu | None, kind, ...)
        if key == OUTBOX_TIMER:  # the Stack outbox's next attempt: the executor tells the pump
            step.outbox_due = True
            return True
        if key[0] is None:  # the process-wide namespace (DESIGN §13), not a TU's
            handler = self._global_timers.get(key[1])
            if handler is not None:
                handler(step, key, payload)
            else:
                self._housekeeping(step)
            return True
        rt = self.tus.get(key[0])
        if rt is None:
            return True
        kind = key[1]
        if kind == "deadline":
            self.factory.on_deadline(step, rt, key[2])
        else:
            svc = rt.services.named(kind)
            if svc is not None:
                svc.on_timer(step, key[1:], payload)
        return True

    def request_done(self, step: Step, request: Request, result: Any,
                     error: str | None) -> None:
        """The answer to ``request`` (``error`` set when it failed) goes to its service."""
        rt = self.tus.get(request.tu)
        if rt is None or not rt.logged_in or rt.epoch != request.epoch:
            return  # the TU logged out meanwhile: a late answer changes nothing
        svc = rt.services.named(request.service)
        if svc is None:
            return
        if error is None:
            try:
                svc.on_result(step, request, result, None)
                return
            except BadAnswer as exc:
                error = f"bad answer: {exc}"
        # services decode before they change anything, so a bad answer is just a failed request
        log.warning("%s %s %s: %s", rt.project, rt.tu, request.method, error)
        svc.on_result(step, request, None, error)

    # helpers ----------------------------------------------------------------------------------
    def _housekeeping(self, step: Step) -> None:
        """Prune the decision log and closed tasks past the retention (DESIGN §13), at every
        login and then once a day (a timer in the process-wide namespace ``(None, ...)``)."""
        step.ops.extend(decisions.housekeeping_ops(step.now))
        self.scheduler.schedule((None, "housekeeping"), step.now + decisions.HOUSEKEEPING_PERIOD_S)

    def _rt(self, tu: str) -> TuRuntime:
        rt = self.tus.get(tu)
        if rt is None or not rt.logged_in:
            raise EngineError(f"TU {tu!r} is not logged in", "tu")
        return rt

    def open_tasks(self, tu: str | None = None) -> list[Task]:
        tasks = self.factory.open.values() if tu is None else self.factory.open_of_tu(tu)
        return sorted(tasks, key=Task.sort_key)


__all__ = ["Engine", "EngineError", "REFUSALS", "BadRawEvent", "UnknownRawEvent", "TaskType"]
