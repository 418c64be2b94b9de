"""The service base class (DESIGN §5 "sans-I/O"); a step's effects live in
:mod:`sidecar.runtime.step`.

Rules / theory of operation
---------------------------
* Every input — a domain event, a due timer, a poll result, a login — is handled in one
  **step**.  A step owns a :class:`Step` that services write their effects into: store ops,
  outbox rows, notifications to Electron, platform requests, timers.  Services never await.
* Timers go straight into the in-memory scheduler (the step is the only writer while it runs),
  store ops are committed in ONE transaction after the step, and notifications are sent only after
  that commit, so Electron never sees a task that a crash could lose.
* Platform requests are collected; the runtime executes them after the step and hands each
  answer to ``service.on_result`` in a new step (inline on the virtual clock, so replays are
  deterministic; concurrently on the wall clock, so a slow scroll never blocks socket events).
* A service is per TU.  It implements only the hooks it needs; the defaults do nothing.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sidecar.runtime.step import Request, Step

if TYPE_CHECKING:  # pragma: no cover
    from sidecar.domain.events import DialogSnapshot, DomainEvent
    from sidecar.domain.favorites import Favorite
    from sidecar.domain.tasks import Task
    from sidecar.runtime.tu import TuRuntime

__all__ = ["Request", "Service", "Step"]


class Service:
    """Base of every per-TU service.  ``tu`` is the owning :class:`~sidecar.runtime.tu.TuRuntime`."""

    name: str = "service"

    def __init__(self, tu: "TuRuntime") -> None:
        self.tu = tu  # owning TU runtime: state, factory, scheduler, rng, project client

    # lifecycle -------------------------------------------------------------------------------
    def on_login(self, step: Step) -> None:
        """After restore: arm passes, rebuild pools (seed 004 "Ініціалізація")."""

    def on_logout(self, step: Step) -> None:
        """The TU was closed: drop runtime pools (timers of the TU are cancelled by the runtime)."""

    def on_reconnect(self, step: Step) -> None:
        """Electron's platform socket reconnected (seed 003: check chat again)."""

    # inputs ----------------------------------------------------------------------------------
    def on_event(self, step: Step, event: "DomainEvent") -> None:
        """A normalised platform event for this TU."""

    def on_timer(self, step: Step, key: tuple, payload: Any) -> None:
        """A timer this service armed with ``self.tu.schedule((self.name, ...), due)``."""

    def on_result(self, step: Step, request: Request, result: Any, error: str | None) -> None:
        """The answer to a request this service made; ``error`` set when it failed."""

    def on_online(self, step: Step, came_online: set[str], online: set[str],
                  snapshots: dict[str, "DialogSnapshot"], full_pass: bool, *,
                  scheduled: bool = False) -> None:
        """RU Online changed: ``full_pass`` True after a pass (``online`` is the whole new set,
        ``snapshots`` the dialog rows it carried), False when an RU's own activity marked it
        online (``came_online`` = that RU).  ``scheduled``: the pass ran at its keyed grid slot
        (:meth:`~sidecar.services.passes.PassService._next_slot`), the same instants whether or
        not the sidecar restarted in between; False for the login's and a reconnect's pass."""

    def on_task_closed(self, step: Step, task: "Task") -> None:
        """A task of this TU was closed (any reason)."""

    def on_task_created(self, step: Step, task: "Task") -> None:
        """A task of this TU was created."""

    def on_favorite_changed(self, step: Step, ru: str, before: "Favorite",
                            after: "Favorite") -> None:
        """A favorite's attributes changed (favorite.update, a block event, a pass refresh)."""


# The base class's broadcast hooks do nothing: marked, so the broadcaster
# (:class:`sidecar.runtime.hooks.Services`) calls a hook only on the services that implement it
# (issue 11 item 5: five of twelve calls per event were these no-ops).
for _hook in ("on_login", "on_logout", "on_reconnect", "on_event", "on_online", "on_task_closed",
              "on_task_created", "on_favorite_changed"):
    getattr(Service, _hook).noop_hook = True
del _hook
