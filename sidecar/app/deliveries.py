"""The app's side of the delivery pump: when the router's pump runs, what a pass is followed by,
``stack.flush``, and the wall clock's pump loop (DESIGN §10; the router itself:
:mod:`sidecar.app.router`).

Rules / theory of operation
---------------------------
* Everything outward — Stack writes included — leaves only through the router's delivery pump;
  a Stack outage never blocks a step.  On the wall clock the pump is its own task beside the
  steps (:meth:`Deliveries.pump_loop`: a slow Stack delays only Stack) and sends a write as soon
  as it is queued; on the virtual clock it runs inside the advance at the delivery timer's
  instants (:mod:`sidecar.app.clockwork`) — every target but Stack when its row is due, Stack's new
  writes at most every ``stack_flush_interval_s`` (retries at their ladder instants), everything
  due in flight together (Stack's ``POST /v1/batch`` when it has it) — so a replay is
  deterministic and does not depend on how the driver slices its advances.
* The delivery timer (``OUTBOX_TIMER``) firing is :meth:`Deliveries.due` (the executor's
  ``outbox_due`` port): it kicks the pump — at the end of the advance (virtual) or in the pump
  loop (wall).
* A pass reads SQLite, so under the step lock the open commit group is committed first
  (:meth:`StepExecutor.flush`).  The wall clock's pump skips passes that could send nothing (no
  Stack, no other target, no probe, no row left from an earlier config) instead of reading
  SQLite twice per event.
* After a pass, the sender transitions it made (committed by the pass) go to Electron as
  ``sender.state``; the router events it raised (``sidecar/stack unreachable`` …) are a step of
  their own; the delivery timer is re-armed at the pass's ``next_due``.
* Where Stack is about to be read the app flushes at once: ``stack.flush``, ``session.logout``,
  ``session.login``'s startup read (:meth:`Deliveries.flush_observed`), close.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any, Awaitable, Callable, Protocol

from bridge.errors import InternalError, ShuttingDown
from sidecar.app.aio import wait_event
from sidecar.core.clock import Clock
from sidecar.app.router import PassResult, RouterComponent
from sidecar.runtime.engine import OUTBOX_TIMER, Engine
from sidecar.runtime.executor import StepExecutor
from sidecar.runtime.step import Step
from sidecar.app.senders import SendersComponent
from sidecar.senders.gate import waiting_reason
from sidecar.senders.health import may_send as sender_may_send
from sidecar.senders.health import utc_text

log = logging.getLogger("sidecar.app.root")

StepFn = Callable[[Callable[[Step], Any]], Awaitable[Any]]  # an engine input -> its step's value


class StepLocked(Protocol):
    """The app's ``_step_locked``: ``fn`` as one step (at ``now``, default the clock's) while
    the caller holds the step lock."""

    def __call__(self, fn: Callable[[Step], Any], now: float | None = None) -> Awaitable[Any]: ...


class Notifier(Protocol):
    """The app's ``notify`` port (the executor's): a note to Electron, through the wire."""

    def notify(self, method: str, note: Any) -> None: ...


class Deliveries:
    """When and how the router's pump runs for the app (module rules).

    ``ports.notify`` sends ``sender.state`` notes; ``step(fn)`` runs ``fn`` as a step of its own
    (outside the step lock), ``step_locked(fn)`` as a step while the caller holds the lock,
    ``locked(coro_fn)`` awaits ``coro_fn()`` under the step lock — each raises
    :class:`bridge.errors.InternalError` once the process stopped (``ShuttingDown`` once it shuts down).  ``wake()``
    wakes the wall clock's ticker, ``wake_if_sooner()`` only when its next timer is now sooner
    than the instant it sleeps to (:class:`sidecar.app.clockwork.Alarm`).  :attr:`acked` counts the
    Stack writes acknowledged (``status``)."""

    def __init__(self, *, clock: Clock, engine: Engine, executor: StepExecutor,
                 routing: RouterComponent, senders: SendersComponent, ports: Notifier,
                 step: StepFn, step_locked: StepLocked,
                 locked: Callable[[Callable[[], Any]], Awaitable[Any]],
                 wake: Callable[[], None], wake_if_sooner: Callable[[], None]) -> None:
        self.clock = clock
        self.engine = engine
        self.executor = executor
        self.routing = routing
        self.senders = senders
        self.ports = ports
        self._step = step
        self._step_locked = step_locked
        self._locked = locked
        self._wake = wake
        self._wake_if_sooner = wake_if_sooner
        self.pump_kick = asyncio.Event()  # the delivery timer fired: send what is due
        self.others_due = False  # virtual clock: the timer fired mid-advance (sidecar.app.clockwork)
        self.nothing_left = False  # wall clock: a pass left no row it could ever send (pump_loop)
        self.acked = 0  # Stack writes acknowledged (status)
        # wall clock: a detached attempt landed — the next pass settles it (and sends the next)
        routing.pump_.wake = self.pump_kick.set

    def due(self) -> None:
        """The delivery timer fired (the executor's ``outbox_due`` port)."""
        self.pump_kick.set()  # virtual: sent at the end of the advance; wall: by the pump loop
        self.others_due = True

    async def route_pass(self, now: float, *, stack: bool = True, detach: bool = False) -> PassResult:
        """One pass of the router's pump (``detach``: the wall clock's isolated attempts); then
        the sender transitions it made (committed by the pass) go to Electron as ``sender.state``."""
        res = await self.routing.pump(now, stack=stack, detach=detach)
        for note in self.senders.gate.take_notes():
            self.ports.notify("sender.state", note)
        return res

    def exit_flush_due(self) -> bool:
        """Close (sidecar.app.closing rule 4): a pass is due, or a detached attempt is in flight
        whose outcome must be settled (committed) before the store closes."""
        return (OUTBOX_TIMER in self.engine.scheduler or self.pump_kick.is_set()
                or bool(self.routing.pump_.in_flight))

    async def flush_at_exit(self, now: float) -> PassResult:
        """Close: wait for every detached attempt to land (a hanging one is cut by the caller's
        bound and stays queued, ``sending`` rows are reclaimed at the next start), then one pass
        that settles the landings and sends what is due."""
        await self.routing.pump_.drain()
        return await self.route_pass(now)

    def pass_idle(self, *, stack: bool) -> bool:
        """A delivery pass could do nothing — no target but Stack is configured, no sender probe
        waits, and Stack's rows are not part of it (``stack`` False, or no Stack) — so it need
        neither commit the open group first nor read SQLite (the pass would find nothing)."""
        return (not self.routing.channels and not self.senders.gate.probes
                and (not stack or self.routing.stack is None))

    async def pump_locked(self) -> None:
        """Under the step lock: the pass due now (Stack's writes too at its flush instant)."""
        now = self.clock.now()
        await self.pass_locked(now, stack=self.routing.stack_due(now))

    async def pass_locked(self, now: float, *, stack: bool) -> PassResult | None:
        """Under the step lock: one delivery pass at ``now`` — Stack's due writes too when
        ``stack`` — after committing the open group (the pump reads SQLite); None when it
        could do nothing (then the delivery timer is re-armed at Stack's flush instant)."""
        self.pump_kick.clear()
        self.others_due = False
        if self.pass_idle(stack=stack):
            self.engine.outbox_at(self.routing.flush_at)  # armed before Stack's flush: wait for it
            return None
        await self.executor.flush()  # the pump reads SQLite: the group so far first
        res = await self.route_pass(now, stack=stack)
        self.acked += res.stack_acked
        self.engine.outbox_at(res.next_due)
        if res.events:  # the pass raised router events (sidecar/stack …): a step of their own
            await self._step_locked(lambda s: s.events.extend(res.events))
        return res

    async def flush_stack(self) -> dict:
        """``stack.flush`` (:class:`sidecar.protocol.inbound.StackFlush`): send every due Stack write now,
        ignoring the flush cadence (:mod:`sidecar.router.cadence`) — for whoever is about to read
        Stack (another machine's login, a check).  Retries keep their ladder instants: a write
        waiting for a retry is not due.  Answer ``{"acked", "failed", "pending", "waiting"?}``:
        writes acknowledged and writes whose attempt failed in this flush, Stack writes still
        queued after it, and — when some are — why and until when
        (:class:`sidecar.protocol.answers.StackWaiting`)."""
        if self.routing.stack is None:
            return {"acked": 0, "failed": 0, "pending": 0}
        if self.clock.virtual:
            async def flush() -> PassResult | None:  # under the step lock the flush instant
                if self.routing.flush_at is None:  # in memory is exact: nothing queued
                    return None
                return await self.pass_locked(self.clock.now(), stack=True)
            res = await self._locked(flush)
        else:  # beside the pump loop: the pump's own lock serialises the passes
            res = await self.route_pass(self.clock.now())
            self.acked += res.stack_acked
            if res.events:
                await self._step(lambda s: s.events.extend(res.events))
            self.engine.outbox_at(res.next_due)
            self._wake()
        if res is None:
            return {"acked": 0, "failed": 0, "pending": 0}
        out: dict[str, Any] = {"acked": res.stack_acked, "failed": res.stack_failed,
                               "pending": res.stack_pending}
        if res.stack_pending:
            out["waiting"] = self._stack_waiting(self.clock.now())
        return out

    def _stack_waiting(self, now: float) -> dict[str, Any]:
        """Why Stack's writes stay pending (:class:`sidecar.protocol.answers.StackWaiting`):
        the ``stack`` sender's health first (cooldown, Need Check, rest), else their next
        flush instant (a retry on Stack's ladder, or the flush grid)."""
        s = self.senders.gate.state("stack")
        ok, nxt = sender_may_send(s, now)
        if not ok:
            state = s.state if s.state != "active" else "resting"
            return {"state": state, "until": nxt, "reason": waiting_reason(s, nxt)}
        at = self.routing.flush_at
        return {"state": "retry", "until": at,
                "reason": f"next Stack flush at {utc_text(at)} (retry on Stack's ladder or the flush grid)"}

    async def flush_observed(self) -> None:
        """Virtual clock: Stack is about to be read (a login's startup data, another machine
        after a logout): flush its due writes now (the wall clock sends them at once anyway)."""
        if self.clock.virtual and self.routing.flush_at is not None:
            await self.flush_stack()

    async def pump_loop(self) -> None:
        """Wall clock: send due deliveries whenever rows are due, outside the step lock."""
        while True:
            if self.pump_kick.is_set():  # the delivery timer fired (the ticker ran it)
                self.pump_kick.clear()
                if self.nothing_left and self.pass_idle(stack=True):
                    continue  # a pass could send nothing (module rules): no SQLite read per event
                now = self.clock.now()
                try:
                    # targets isolated: a pass never waits for a send; a landing kicks the next
                    res = await self.route_pass(now, detach=True)
                except ShuttingDown:
                    return  # the close flushes what it can (sidecar.app.root)
                except Exception:  # noqa: BLE001 - keep pumping; rows stay queued
                    log.exception("delivery pump failed")
                    try:  # sender health may be ahead of what the pass committed: take SQLite's
                        await self.senders.reload()
                    except Exception:  # noqa: BLE001 - the store is failing: the next pass retries
                        log.exception("sender health could not reload its state")
                    self.engine.scheduler.schedule(OUTBOX_TIMER, now + 5.0)
                    self._wake_if_sooner()
                    continue
                self.acked += res.stack_acked
                # no Stack, no other target, no probe, and no row left from an earlier config
                # (routing fails a row for a target not configured at once): from now on a pass
                # could send nothing — Stack's rows wait in SQLite for a process that has one
                self.nothing_left = res.next_due is None and self.pass_idle(stack=True)
                if res.events:
                    try:
                        await self._step(lambda s: s.events.extend(res.events))
                    except (InternalError, ShuttingDown):
                        return  # crash-only (``fatal`` is set) or shutting down: serve exits
                # rows queued while this pass ran armed the timer already: keep the sooner
                self.engine.outbox_at(res.next_due)
                if res.claimed and res.other_due is not None and res.other_due <= now:
                    # work is due now (a target's backlog beyond this pass's batch): the next
                    # pass runs at once, woken by the work, not paced by the ticker's cadence
                    self.pump_kick.set()
                    continue
                self._wake_if_sooner()  # when the timer's new instant is before the ticker's
                continue
            await wait_event(self.pump_kick, self.clock.real_delay(60.0))
