"""The one broadcaster of service hooks (issue 12 "hooks are broadcast from one place").

Rules / theory of operation
---------------------------
* :class:`Services` is a TU's services in dispatch order; it is the **only** code that iterates
  them (``tests/sidecar/test_hooks_broadcast.py`` checks the tree).  The engine, the per-TU
  runtime, :mod:`.dispatch` and the passes call one method per hook instead of looping, so the
  order every service hears a fact in is decided here, once.
* Flow stays one way: a hook hands the fact down to each service; a service reacts by handing
  facts up to the TU runtime (candidates, markers, timers, requests).  Nothing here calls back
  into the caller, and nothing here keeps state besides the list itself.
* Targeted hooks (a timer a service armed, the answer to a request it made) are not broadcasts:
  the caller looks the service up with :meth:`Services.named`.
* Sans-I/O like the rest of the runtime; the services are seen only through
  :class:`~sidecar.runtime.step.ServiceHooks`, so the runtime never imports them.
* A hook a service's class leaves as the base class's no-op (marked ``noop_hook``) is not
  called at all: each broadcast loops over the services that implement it, still in dispatch
  order (issue 11 item 5).  The services are taken at construction; a hook replaced on an
  instance later is still called when its class implements it.
"""
from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

from sidecar.runtime.step import ServiceHooks, Step

if TYPE_CHECKING:  # pragma: no cover
    from sidecar.domain.events import DialogSnapshot, DomainEvent
    from sidecar.domain.favorites import Favorite
    from sidecar.domain.tasks import Task


class Services:
    """A TU's services, in dispatch order, with one broadcast method per hook."""

    __slots__ = ("_all", "by_name", "_login", "_logout", "_reconnect", "_event", "_online",
                 "_created", "_closed", "_changed")

    def __init__(self, services: Sequence[ServiceHooks] = ()) -> None:
        self._all: tuple[ServiceHooks, ...] = tuple(services)  # dispatch order
        self.by_name: Mapping[str, ServiceHooks] = {s.name: s for s in self._all}  # name -> service
        # per hook: the services that implement it, in dispatch order (module rules)
        self._login = self._implementing("on_login")
        self._logout = self._implementing("on_logout")
        self._reconnect = self._implementing("on_reconnect")
        self._event = self._implementing("on_event")
        self._online = self._implementing("on_online")
        self._created = self._implementing("on_task_created")
        self._closed = self._implementing("on_task_closed")
        self._changed = self._implementing("on_favorite_changed")

    def _implementing(self, hook: str) -> tuple[ServiceHooks, ...]:
        return tuple(s for s in self._all
                     if not getattr(getattr(type(s), hook, None), "noop_hook", False))

    def named(self, name: str) -> ServiceHooks | None:
        """The service called ``name`` (a timer's or a request's owner), or None."""
        return self.by_name.get(name)

    def __iter__(self) -> Iterator[ServiceHooks]:
        return iter(self._all)

    def __len__(self) -> int:
        return len(self._all)

    # lifecycle --------------------------------------------------------------------------------
    def login(self, step: Step) -> None:
        for svc in self._login:
            svc.on_login(step)

    def logout(self, step: Step) -> None:
        for svc in self._logout:
            svc.on_logout(step)

    def reconnect(self, step: Step) -> None:
        for svc in self._reconnect:
            svc.on_reconnect(step)

    # facts ------------------------------------------------------------------------------------
    def event(self, step: Step, event: "DomainEvent") -> None:
        for svc in self._event:
            svc.on_event(step, event)

    def online(self, step: Step, came_online: set[str], online: set[str],
               snapshots: dict[str, "DialogSnapshot"], full_pass: bool, *,
               scheduled: bool = False) -> None:
        """RU Online changed (see :meth:`sidecar.services.base.Service.on_online`)."""
        for svc in self._online:
            svc.on_online(step, came_online, online, snapshots, full_pass, scheduled=scheduled)

    def task_created(self, step: Step, task: "Task") -> None:
        for svc in self._created:
            svc.on_task_created(step, task)

    def task_closed(self, step: Step, task: "Task") -> None:
        for svc in self._closed:
            svc.on_task_closed(step, task)

    def favorite_changed(self, step: Step, ru: str, before: "Favorite",
                         after: "Favorite") -> None:
        for svc in self._changed:
            svc.on_favorite_changed(step, ru, before, after)


__all__ = ["Services"]
