"""The engine: every TU's runtime, the one scheduler, the Task Factory and keyed randomness.

Rules / theory of operation
---------------------------
* Sans-I/O: every public method takes a :class:`~sidecar.services.base.Step` and writes effects
  into it; the application (``sidecar/app.py``) commits, notifies and performs requests.
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
from typing import Any, Callable

from platform_clients import BadAnswer, BadRawEvent, UnknownRawEvent, client_for
from sidecar.core.rng import KeyedRandom
from sidecar.core.scheduler import Scheduler
from sidecar.domain import events as ev
from sidecar.domain.tasks import Channel, CloseReason, Task, TaskType
from sidecar.factory import TaskFactory
from sidecar.services.base import Request, Service, Step
from sidecar.store import ops
from sidecar.tu import TuRuntime

log = logging.getLogger("sidecar.engine")

ServiceFactory = Callable[[TuRuntime], list[Service]]


class EngineError(Exception):
    """A request the engine cannot apply (unknown TU, unknown task); becomes -32602."""


class Engine:
    def __init__(self, rng: KeyedRandom, services: ServiceFactory) -> None:
        self.rng = rng  # keyed randomness, deployment seed
        self.scheduler = Scheduler()  # the one ordered timer queue
        self.factory = TaskFactory()  # open tasks of every TU
        self.tus: dict[str, TuRuntime] = {}  # tu -> runtime (logged in or restoring)
        self._services = services  # builds a TU's services (pluggable: issue-specific services)
        self.events_in = 0  # platform events handled (status)

    # sessions ---------------------------------------------------------------------------------
    def login(self, step: Step, tu: str, project: str, operator: str, *, startup: dict | None,
              local_favorites: dict[str, dict], local_tasks: list[Task],
              pending_markers: dict[tuple[str, str], Any],
              local_state: dict[str, dict] | None = None) -> TuRuntime:
        """Restore a TU (DESIGN §9): Stack startup data, then local unsent marker writes, then
        local open tasks; then every service's ``on_login``.  ``startup`` None: Stack unreachable
        — the local cache is used and the login still succeeds."""
        old = self.tus.get(tu)
        if old is not None and old.logged_in:
            if old.project != project:
                raise EngineError(f"TU {tu!r} is logged in as a {old.project} profile, not {project}")
            return old  # idempotent: Electron may repeat a login after a reconnect
        try:
            client = client_for(project)
        except KeyError:
            raise EngineError(f"unknown project {project!r}") from None
        rt = TuRuntime(self, tu, project, client, operator)
        self.tus[tu] = rt
        history: dict[str, dict[str, dict]] = {}
        dropped: list[str] = []
        if startup is not None:
            favorites: dict[str, dict] = {}
            for fav in startup.get("favorites", ()):
                ru = fav["ru"]
                merged = dict(fav)
                merged.setdefault("project", project)
                merged["markers"] = dict(fav.get("markers") or {})
                favorites[ru] = merged
            dropped = sorted(set(local_favorites) - set(favorites))
            for row in startup.get("history", ()):
                history.setdefault(row["ru"], {})[row["task_id"]] = dict(row)
        else:
            favorites = {ru: dict(f) for ru, f in local_favorites.items()}
        for (ru, name), value in pending_markers.items():  # unacked local writes win
            fav = favorites.get(ru)
            if fav is None:
                continue  # no longer a favorite: the marker has no owner here
            markers = dict(fav.get("markers") or {})
            markers[name] = value  # None: cleared (a fact, see TuRuntime)
            fav["markers"] = markers
        for task in local_tasks:
            history.setdefault(task.ru, {})[task.task_id] = {
                "task_id": task.task_id, "type": task.type.value, "source": task.source,
                "created_at": task.created_at, "closed_at": task.closed_at,
                "reason": task.reason.value if task.reason else None}
        rt.favorites = favorites
        rt.local_state = local_state or {}
        rt.history = {ru: sorted(rows.values(), key=lambda r: r["created_at"])
                      for ru, rows in history.items()}
        rt.add_services(self._services(rt))
        rt.logged_in = True
        rt.inbox_synced = not any(p.purpose == "check_chat" for p in rt.client.passes)
        for task in local_tasks:
            if task.is_open:
                self.factory.adopt(rt, task, step.now)
        for ru, fav in favorites.items():
            step.ops.append(ops.PutFavorite(tu=tu, ru=ru, project=project, data=fav))
        for ru in dropped:
            step.ops.append(ops.DeleteFavorite(tu=tu, ru=ru))
        step.ops.append(ops.PutSession(tu=tu, project=project, operator=operator, at=step.now))
        for svc in rt.services:
            svc.on_login(step)
        return rt

    def logout(self, step: Step, tu: str) -> None:
        """Close the TU's open tasks as ``logout`` and drop its timers and pools."""
        rt = self.tus.get(tu)
        if rt is None or not rt.logged_in:
            return
        self.factory.close_tu(step, rt, CloseReason.LOGOUT)
        for svc in rt.services:
            svc.on_logout(step)
        rt.logged_in = False
        rt.cancel_all()
        del self.tus[tu]
        step.ops.append(ops.DeleteSession(tu=tu))

    def reconnected(self, step: Step, tu: str) -> None:
        for svc in self._rt(tu).services:
            svc.on_reconnect(step)

    # inputs -----------------------------------------------------------------------------------
    def platform_event(self, step: Step, tu: str, project: str, name: str, data: Any) -> int:
        """Decode a raw socket event and dispatch it; returns how many domain events it made.
        Raises EngineError (unknown TU / project mismatch) or the client's BadRawEvent /
        UnknownRawEvent — nothing is changed in that case."""
        rt = self._rt(tu)
        if project != rt.project:
            raise EngineError(f"TU {tu!r} is a {rt.project} profile, not {project}")
        events = rt.client.decode_event(tu, name, data)
        for event in events:
            self.dispatch(step, rt, event)
        self.events_in += 1
        return len(events)

    def dispatch(self, step: Step, rt: TuRuntime, event: ev.DomainEvent) -> None:
        """Core reactions shared by all services, then every service's ``on_event``."""
        came = False
        match event:
            case ev.ChatIn() | ev.LikeIn() | ev.MailIn() | ev.Notification():
                came = rt.mark_online(event.ru)
            case ev.ChatOut():
                self.factory.close_channel(step, rt, event.ru, Channel.CHAT)
            case ev.MailOut():
                self.factory.close_channel(step, rt, event.ru, Channel.MAIL)
            case ev.BlockChanged():
                key = "blocked_by_tu" if event.by == "tu" else "blocked_by_ru"
                rt.update_favorite(step, event.ru, {key: event.blocked})
        for svc in rt.services:
            svc.on_event(step, event)
        if came:
            rt.came_online(step, event.ru)

    def favorite_update(self, step: Step, tu: str, ru: str, changes: dict) -> None:
        rt = self._rt(tu)
        rt.update_favorite(step, ru, changes)

    def task_close(self, step: Step, task_id: str, reason: str) -> bool:
        task = self.factory.open.get(task_id)
        if task is None:
            return False
        try:
            why = CloseReason(reason)
        except ValueError:
            raise EngineError(f"unknown close reason {reason!r}") from None
        return self.factory.close(step, self._rt(task.tu), task, why)

    def fire(self, step: Step) -> bool:
        """Run the earliest timer due at ``step.now``; False when none is due."""
        item = self.scheduler.pop_due(step.now)
        if item is None:
            return False
        key, _due, payload = item
        rt = self.tus.get(key[0])
        if rt is None:
            return True
        kind = key[1]
        if kind == "deadline":
            self.factory.on_deadline(step, rt, key[2])
        else:
            svc = rt.by_name.get(kind)
            if svc is not None:
                svc.on_timer(step, key[1:], payload)
        return True

    def request_done(self, step: Step, rt: TuRuntime, request: Request, result: Any,
                     error: str | None) -> None:
        if not rt.logged_in or self.tus.get(rt.tu) is not rt:
            return  # the TU logged out meanwhile: a late answer changes nothing
        svc = rt.by_name.get(request.service)
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
    def _rt(self, tu: str) -> TuRuntime:
        rt = self.tus.get(tu)
        if rt is None or not rt.logged_in:
            raise EngineError(f"TU {tu!r} is not logged in")
        return rt

    def open_tasks(self, tu: str | None = None) -> list[Task]:
        tasks = self.factory.open.values() if tu is None else self.factory.open_of_tu(tu)
        return sorted(tasks, key=Task.sort_key)


__all__ = ["Engine", "EngineError", "BadRawEvent", "UnknownRawEvent", "TaskType"]
