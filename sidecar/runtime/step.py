"""A step's effects and the hooks a service offers (DESIGN §5 "sans-I/O", §13 "steps").

Rules / theory of operation
---------------------------
* Every input — a domain event, a due timer, a poll result, a login — is handled in one
  **step**.  A step owns a :class:`Step` that services write their effects into: store ops,
  routing events, notifications to Electron, platform requests.  Timers go straight into the one
  scheduler (the step is the only writer while it runs).
* The executor (:mod:`sidecar.runtime.executor`) commits the ops in ONE transaction, only then
  sends the notes, and only then makes the requests; each answer is a new step.
* **Routing events** (DESIGN §10, issue 9): a step that changes a marker, creates or closes a
  task or hands the Task Factory a candidate appends a :class:`sidecar.router.model.RoutingEvent` to
  ``events`` (``markers`` high, ``tasks`` normal, ``candidates`` low; each carries its Stack
  write for the built-in route).  The executor has the router turn them into delivery rows that
  join the step's ONE transaction — a marker change and its Stack delivery land together or not
  at all.
* A request names its TU (``tu``, ``project``) and the login session that asked (``epoch``), so
  a late answer for a TU that logged out (or logged in again) changes nothing.
* :class:`ServiceHooks` is what the runtime calls on a service; services implement it
  (:class:`sidecar.services.base.Service`), the runtime never imports them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import msgspec

if TYPE_CHECKING:  # pragma: no cover
    from sidecar.domain.events import DialogSnapshot, DomainEvent
    from sidecar.domain.favorites import Favorite
    from sidecar.domain.tasks import Task


@dataclass(slots=True)
class Request:
    """A ``platform.request`` a service wants made; the answer goes to ``service.on_result``."""

    service: str  # Service.name of the requester
    method: str  # platform method (platform_clients docstrings)
    params: dict  # method params
    tag: str  # the requester's own label, handed back with the answer
    context: Any = None  # opaque value handed back with the answer
    tu: str = ""  # the TU whose platform answers
    project: str = ""  # that TU's project
    epoch: int = 0  # the TU's login session that asked (TuRuntime.epoch)
    at: float | None = None  # instant (unix s) of the step that asked


class Step(msgspec.Struct):
    """Effects of handling one input.  ``now``: unix seconds (UTC).

    A msgspec Struct: one is made per input, and msgspec builds it (copying the empty list
    defaults) for ~1.5 k instructions against ~5 k for the slotted dataclass it was (issue 11
    item 5).  Same fields, same defaults, mutable."""

    now: float
    ops: list = []  # sidecar.store.ops.* committed together
    notes: list[tuple[str, Any]] = []  # (method, domain note) to Electron
    requests: list[Request] = []  # made after the commit
    events: list = []  # sidecar.router.model.RoutingEvent, routed in the commit
    outbox_due: bool = False  # the delivery timer fired: the executor tells the pump to send

    def notify(self, method: str, params: Any) -> None:
        self.notes.append((method, params))

    def emit(self, event: Any) -> None:
        """Route ``event`` (a :class:`sidecar.router.model.RoutingEvent`) with this step's commit."""
        self.events.append(event)


class ServiceHooks(Protocol):
    """The hooks the runtime calls on a per-TU service, in dispatch order."""

    name: str

    def on_login(self, step: Step) -> None: ...
    def on_logout(self, step: Step) -> None: ...
    def on_reconnect(self, step: Step) -> None: ...
    def on_event(self, step: Step, event: "DomainEvent") -> None: ...
    def on_timer(self, step: Step, key: tuple, payload: Any) -> None: ...
    def on_result(self, step: Step, request: Request, result: Any, error: str | None) -> None: ...
    def on_online(self, step: Step, came_online: set[str], online: set[str],
                  snapshots: dict[str, "DialogSnapshot"], full_pass: bool, *,
                  scheduled: bool = False) -> None: ...
    def on_task_closed(self, step: Step, task: "Task") -> None: ...
    def on_task_created(self, step: Step, task: "Task") -> None: ...
    def on_favorite_changed(self, step: Step, ru: str, before: "Favorite",
                            after: "Favorite") -> None: ...
