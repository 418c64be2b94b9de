"""The app's time: the virtual clock's advance and the wall clock's ticker (DESIGN §5, one clock,
one scheduler).

Rules / theory of operation
---------------------------
* Virtual clock: ``clock.advance_to(t)`` (:meth:`Clockwork.advance_to`) moves time to each due
  timer in order (a timer's step runs with ``now`` = its due time), runs the delivery pump at
  the delivery timer's instants too (Stack's writes at Stack's flush instants,
  :mod:`sidecar.router.cadence`; :mod:`sidecar.app.deliveries`), and answers only when
  everything up to ``t`` has run.  How the driver slices its advances changes nothing.
* **Group commit**: the timers of one advance and the timers the ticker finds
  due at once commit as one group — one SQLite transaction, one thread hop — in step order
  (:meth:`StepExecutor.group`); inside ``platform.events`` an advance joins that call's group.
  The group is committed before the delivery pump reads SQLite and before any yield.
* **Pushed poll answers**: an advance's grid passes take the answers the call carried
  (``poll_answers``) instead of a round trip (:mod:`sidecar.app.pushed_polls`).
* Wall clock: a ticker task (:meth:`Clockwork.ticker`) sleeps until the next due timer, or
  until the :class:`Alarm` wakes it for a sooner one.
* **Wall clock, per event** (p99 ``platform.event`` → ``task.created`` ≤ 2 ms at
  1,000 events/s): after each step's commit (:meth:`Clockwork.step_done_wall`) a delivery timer
  due by then goes straight to the pump (no ticker round, no timer step per event) and the
  ticker is woken only for a timer sooner than the one it sleeps to.
* A failed step (:class:`StepFailed`) is a -32603 to the caller (crash-only,
  :mod:`sidecar.app.root`); shutdown (:class:`Stopping`) cuts an advance short: -32003 with the
  instant it reached (``data.now``): the timers before it ran and are kept.  The ticker then
  just ends.
"""
from __future__ import annotations

import asyncio
import math
from typing import Callable

from bridge.errors import CutShort, InternalError, InvalidParams, RpcError
from sidecar.app.aio import wait_event
from sidecar.app.deliveries import Deliveries, StepLocked
from sidecar.app.pushed_polls import PushedPolls
from sidecar.protocol.polls import PollAnswer
from sidecar.config import Settings
from sidecar.core.clock import Clock, ScaledClock, VirtualClock, WallClock
from sidecar.core.scheduler import Scheduler
from sidecar.runtime.engine import OUTBOX_TIMER, Engine
from sidecar.runtime.executor import StepExecutor
from sidecar.runtime.ports import Stopping, StepFailed, TooManyTimers


class Alarm:
    """Wall clock: the instant the ticker sleeps until (:attr:`tick_at`, clock seconds) and the
    event that wakes it sooner (:attr:`event`)."""

    def __init__(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler
        self.event = asyncio.Event()  # wall clock: a timer became due sooner
        self.tick_at = -math.inf  # wall clock: the clock instant the ticker sleeps until

    def wake(self) -> None:
        """Wake the ticker now."""
        self.event.set()

    def wake_if_sooner(self) -> None:
        """Wall clock: wake the ticker if the next timer is due before the instant it sleeps
        until (it sleeps to the earliest timer, so a later one needs no wake)."""
        nd = self.scheduler.next_due()
        if nd is not None and nd < self.tick_at:
            self.event.set()


class Clockwork:
    """Runs the app's timers: :meth:`advance_to` (virtual clock), :meth:`ticker` (wall clock).

    ``lock``: the app's one step lock; ``step_locked(fn)`` runs ``fn`` as a step while the lock
    is held (-32603 once the process stopped); ``connected()``: whether a client is there to
    answer platform requests; ``next_due()``: :meth:`sidecar.app.root.SidecarApp.next_due`;
    ``max_fires``: the timers one advance may run."""

    def __init__(self, *, clock: Clock, engine: Engine, executor: StepExecutor, lock: asyncio.Lock,
                 deliveries: Deliveries, alarm: Alarm, step_locked: StepLocked,
                 connected: Callable[[], bool], next_due: Callable[[], float | None],
                 max_fires: int, pushed: PushedPolls) -> None:
        self.clock = clock
        self.engine = engine
        self.executor = executor
        self.lock = lock
        self.deliveries = deliveries
        self.alarm = alarm
        self._step_locked = step_locked
        self._connected = connected
        self._next_due = next_due
        self.max_fires = max_fires
        self.pushed = pushed  # poll answers pushed into the frame

    # virtual clock ----------------------------------------------------------------------------
    async def advance_to(self, t: float, answers: list[PollAnswer] | None = None) -> dict:
        """Virtual clock: run everything due up to ``t`` (unix seconds) in order; the grid passes
        among them take their pushed answer from ``answers`` where there is one
        (:mod:`sidecar.app.pushed_polls`; then the answer lists ``poll_answers_used``)."""
        if not isinstance(self.clock, VirtualClock):
            raise InvalidParams("clock.advance_to needs --clock virtual", data={"field": "t"})
        if not math.isfinite(t):
            raise InvalidParams("t must be a finite number of unix seconds", data={"field": "t"})
        async with self.lock:
            with self.pushed.offered(answers) as used:
                await self.fire_until(self.clock, t, "clock.advance_to")
                if self.deliveries.pump_kick.is_set():
                    await self.deliveries.pump_locked()
            out: dict = {"now": self.clock.now()}
            if answers is not None:
                out["poll_answers_used"] = used
            return out

    async def fire_until(self, clock: VirtualClock, t: float, method: str) -> None:
        """Run every timer due up to ``t``, one step each at its instant, as one commit group
        (committed when this returns or raises; inside an open group — ``platform.events`` —
        it joins that one), and move the clock to ``t``; the caller holds the lock and pumps
        Stack's rows if the delivery timer fired."""
        if not clock.is_set:
            clock.advance_to(t)
        if not self.executor.due(t):  # most advances: no closure, no fire_due coroutine
            clock.advance_to(t)
            return
        # Timers run one step each, in due order, at their own instants, and so do delivery
        # passes: every target but Stack at the instant its row is due, so alerts and their
        # retry ladder (+30 s, +2 min, …) keep their times to the second; Stack's writes at
        # its flush instants (sidecar.router.cadence: new writes on the grid of
        # ``stack_flush_interval_s``, retries on their ladder), everything due then in flight
        # together (one ``POST /v1/batch`` where Stack has it) — the Stack round trips
        # dominated a replay, and a write's delivery instant is not part of the domain
        # (markers are applied locally at once).  How the driver slices its advances
        # changes nothing.
        deliveries = self.deliveries

        async def deliver_due() -> None:
            if deliveries.others_due or self.executor.outbox_due_pending():
                await deliveries.pass_locked(clock.now(), stack=deliveries.routing.stack_due(clock.now()))

        try:
            await self.executor.fire_due(t, advance_clock=clock.advance_to,
                                         limit=self.max_fires, after_each=deliver_due,
                                         every=(64, self._advance_yield))
        except TooManyTimers:
            # a far-future target must not hold the one worker (and every frame behind
            # it) for minutes: everything so far is committed, the client continues
            raise InvalidParams(
                f"{method}: more than {self.max_fires} timers are due "
                f"before t; ran them up to {clock.now()}. Advance in smaller steps",
                data={"field": "t", "now": clock.now(), "next_due": self._next_due()}) from None
        except StepFailed as exc:
            raise InternalError(str(exc)) from exc
        except Stopping:
            # the timers before it ran and were committed: "nothing was done" would be untrue
            now = clock.now()
            raise CutShort(
                f"the sidecar is shutting down; {method} stopped at {now}: every timer due before"
                f" that ran and is kept, the rest run after a restart", data={"now": now}) from None
        clock.advance_to(t)

    async def _advance_yield(self) -> None:
        if not self._connected():
            # nobody to answer platform requests or to receive the result: stop;
            # every step so far is committed, the rest stays due for the next advance
            raise InvalidParams("the client disconnected during clock.advance_to", data={"field": "t"})
        await asyncio.sleep(0)  # noqa: TID251 - a yield, not a wait: a long advance must not starve signals and reads

    # wall clock -------------------------------------------------------------------------------
    async def ticker(self) -> None:
        """Wall clock: fire due timers and outbox rows; sleep until the next one or a wake."""
        alarm = self.alarm
        while self.executor.failed is None:
            async with self.lock:
                now = self.clock.now()
                try:
                    async with self.executor.group():  # the timers due now: one commit
                        while (nd := self.engine.scheduler.next_due()) is not None and nd <= now:
                            await self._step_locked(self.engine.fire, now=now)
                except (RpcError, StepFailed, Stopping):
                    return  # crash-only (``fatal`` is set) or shutting down: serve exits
                nd = self.engine.scheduler.next_due()
                alarm.tick_at = now + 60.0 if nd is None else nd
                wait = alarm.tick_at - self.clock.now()
            alarm.event.clear()
            await wait_event(alarm.event, self.clock.real_delay(wait))

    def step_done_wall(self) -> None:
        """Wall clock, after each step's commit (the latency at 1,000 events/s): the
        delivery timer, if due by now — a step routed rows — goes straight to the pump, as its
        firing would (``outbox_due``), instead of costing a ticker round and a step of its own
        per event; and the ticker is woken only when a timer is now due sooner than it sleeps
        (:meth:`Alarm.wake_if_sooner`)."""
        sched = self.engine.scheduler
        due = sched.due_of(OUTBOX_TIMER)
        if due is not None and due <= self.clock.now():
            sched.cancel(OUTBOX_TIMER)
            self.deliveries.due()
        self.alarm.wake_if_sooner()


def make_clock(settings: Settings) -> Clock:
    """The process's one clock (DESIGN §5 "Time"): ``--clock virtual`` → :class:`VirtualClock`
    (advanced by ``clock.advance_to``); else the wall clock, ``--time-scale K`` times faster."""
    if settings.clock == "virtual":
        return VirtualClock()
    if settings.time_scale:
        return ScaledClock(settings.time_scale)
    return WallClock()
