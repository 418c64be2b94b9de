"""The step executor's contract with its drivers (DESIGN §5, §13): the ports it calls
(:class:`Ports`: the app's SQLite, bridge and asyncio, or the unit tests' lists; :class:`RouterPort`:
the router) and the exceptions it raises to them (:class:`StepFailed`, :class:`Stopping`,
:class:`TooManyTimers`).  The order of the calls and when each exception is raised are the rules of
:mod:`sidecar.runtime.executor`.

Rules / theory of operation
---------------------------
* Sans-I/O: only protocols and exception types here; the executor awaits what its ports give it
  and imports no I/O library, so the app and the unit tests (``tests/sidecar/driver.py``) plug in
  different ports under the same code.
* A refusal (the ``refusals`` a step raises before anything changed) is none of these: it passes
  through the executor untouched.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from sidecar.domain.errors import SHUTTING_DOWN, Refusal, StepFailed
from sidecar.runtime.step import Request

__all__ = ["NoLock", "Ports", "RouterPort", "StepFailed", "Stopping", "TooManyTimers"]


# StepFailed — a step crashed or could not be committed; the process must restart (exit 6) — is
# the exception root's branch itself (sidecar.domain.errors), re-exported here for the drivers.


class Stopping(Refusal):
    """The process is shutting down: the step was refused before it began (not a failure)."""

    error_status_hint = SHUTTING_DOWN  # -32002, never a failed step's -32603 (DESIGN §4)


class TooManyTimers(Refusal):
    """``fire_due`` ran its ``limit`` of timers; everything so far is committed."""


class Ports(Protocol):
    """The I/O the executor needs; every call is made in the order of the module rules."""

    async def commit(self, ops: list) -> None:
        """Apply ``ops`` in one transaction (raise on failure: nothing was written)."""

    def notify(self, method: str, note: Any) -> None:
        """Send one note to Electron (after the commit)."""

    def outbox_due(self, at: float) -> None:
        """The delivery timer (:data:`~sidecar.runtime.engine.OUTBOX_TIMER`) fired at ``at``:
        send what is due."""

    def outbox_queued(self, at: float, channels: frozenset[str] | None = None) -> None:
        """The step routed pending deliveries due at ``at`` to ``channels`` (``stack`` among
        them for Stack writes; Stack's are sent at its flush instant, :mod:`sidecar.router.cadence`)."""

    async def perform(self, request: Request) -> tuple[Any, str | None]:
        """Make one platform request: ``(result, None)`` or ``(None, error text)``."""

    # optional: ``async perform_many(requests) -> list[(result, error text)]`` — one step's
    # requests in one round trip (virtual clock), one outcome per request, in order

    def step_failed(self, exc: BaseException) -> None:
        """A step failed (called once): stop the process (crash-only)."""

    def step_done(self) -> None:
        """A step's effects are carried out (its requests started): e.g. wake a ticker."""


class RouterPort(Protocol):
    """What the executor needs of the router (:class:`sidecar.router.core.Router`)."""

    def decide(self, events: list, now: float, after: Sequence[Any] = ()) -> Any:
        """A routing with ``ops()``, ``pending`` and ``channels`` (the pending rows' channels;
        pure: nothing changes yet).  ``after``: the routings of the open group's earlier steps,
        decided but not yet applied (their commit is still to come) — this routing sees their
        dedup keys, throttle windows and event numbers exactly as if they had been applied."""

    def apply(self, routing: Any) -> None:
        """Evolve after the routing's ops were committed."""

    def ahead(self) -> Any:
        """An empty sequence the open group's routings are appended to, in order, and that is
        passed as ``decide``'s ``after`` (the router's own kind merges as it grows, so a step of
        a large group routes in time of its own events)."""


class NoLock:
    """The lock of a single-caller executor (tests, one coroutine at a time)."""

    async def __aenter__(self) -> None:
        return None

    async def __aexit__(self, *exc: object) -> None:
        return None
