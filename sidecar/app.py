"""The application: bridge ⇄ engine ⇄ store/Stack.  The only place that does I/O for the domain.

Rules / theory of operation
---------------------------
* One asyncio lock serialises every step (inbound frame, timer, platform answer): the engine is
  single-threaded by construction and SQLite sees one writer.
* A step's store ops commit in ONE transaction; only then are its notifications sent, so
  Electron never shows a task a crash could lose.  Then its platform requests run: awaited inline
  on the virtual clock (a replay is deterministic), as background tasks on the wall clock (a slow
  platform scroll never holds up socket events).
* Virtual clock: ``clock.advance_to(t)`` moves time to each due timer in order (a timer's step
  runs with ``now`` = its due time), runs the delivery pump at the delivery timer's instants too
  (Stack's writes at Stack's flush instants, :mod:`sidecar.router.cadence`), and answers only
  when everything up to ``t`` has run.  Wall clock: a ticker task sleeps until the next due timer.
* **Group commit** (issue 11 item 4): the timers of one advance, the timers the ticker finds due
  at once, and the events of one ``platform.events`` batch commit as one group — one SQLite
  transaction, one thread hop — in step order (:meth:`StepExecutor.group`).  Each step's
  routing is decided before the group's commit (on the router state the group's earlier steps
  left) and applied after it; its notes, delivery notes and sender health's ``sender.state``
  notes are sent after it, step by step.  The group is committed before the delivery pump reads
  SQLite (a delivery timer fired: every target's rows at that instant, Stack's at the end of the
  advance) and before any yield.
* Everything outward — Stack writes included — leaves only through the router's delivery pump
  (:mod:`sidecar.routing`, DESIGN §10); a Stack outage never blocks a step.  On the wall clock
  the pump is its own task beside the steps (a slow Stack delays only Stack) and sends a write
  as soon as it is queued; on the virtual clock it runs inside the advance at the delivery
  timer's instants — every target but Stack when its row is due, Stack's new writes at most
  every ``stack_flush_interval_s`` (retries at their ladder instants), everything due in flight
  together (Stack's ``POST /v1/batch`` when it has it) — so a replay is deterministic and does
  not depend on how the driver slices its advances.  Where Stack is about to be read the app
  flushes at once: ``stack.flush``, ``session.logout``, ``session.login``'s startup read, close.
* **Wall clock, per event** (issue 11: p99 ``platform.event`` → ``task.created`` ≤ 2 ms at
  1,000 events/s): queued ``platform.event`` frames commit as one group
  (:mod:`sidecar.step_groups`); after each step's commit a delivery timer due by then goes
  straight to the pump (no ticker round, no timer step per event) and the ticker is woken only
  for a timer sooner than the one it sleeps to; the pump skips passes that could send nothing
  (no Stack, no other target, no probe, no row left from an earlier config) instead of reading
  SQLite twice per event.
* Login waits for Stack's startup data at most ``stack_startup_timeout_s``; then it restores from
  local state (the bridge has one worker: a stuck Stack must not hold up every TU's frames).
* **A step is atomic, in memory too — crash-only** (DESIGN §13).  The engine mutates memory while
  it decides, so a step whose commit fails (or that raises anything but a refusal, i.e. a
  programming error) cannot be undone in place: the app stops taking steps, answers every
  further request with -32603, sends nothing of that step, and sets :attr:`SidecarApp.fatal`;
  ``sidecar serve`` then exits with :data:`EXIT_STEP_FAILED` and Electron restarts it, which
  restores from SQLite and Stack — where the failed step left nothing.  Refusals
  (:data:`REFUSALS`: unknown TU, bad raw event, …) are raised before anything changes and stay
  -32602 answers; no other exception (a bare ``KeyError`` included) is ever turned into one.
* **Shutdown refuses new steps; it never fails one** (issue 7; the exit-6 race of router2).
  ``close()`` first stops the executor (:meth:`StepExecutor.stop`): every step not yet begun —
  a frame the bridge still hands over, a platform answer, a timer, the pump loop's router
  events — is refused (-32603 "shutting down" to a caller, silently for background work) and no
  platform request starts.  Then it cancels the background tasks, closes the bridge, and takes
  the step lock (bounded) so the step under way commits before the delivery flush, the router
  channels and the store close; it keeps the lock, so nothing touches the router state after.
"""
from __future__ import annotations

import asyncio
import logging
import math
from functools import partial
from typing import Any, Callable

import msgspec

from bridge import BridgeServer
from bridge.errors import INVALID_PARAMS, InternalError, InvalidParams, RpcError, error_text
from platform_clients import BadRawEvent, UnknownRawEvent, client_for
from sidecar import PROTOCOL_VERSION, __version__
from sidecar import protocol as p
from sidecar.aio import bounded, cancel_all, wait_event
from sidecar.config import Settings
from sidecar.core.clock import Clock, ScaledClock, VirtualClock, WallClock
from sidecar.core.rng import KeyedRandom
from sidecar.methods import Methods
from sidecar.paging import budget, page
from sidecar.runtime.decisions import explain
from sidecar.runtime.engine import REFUSALS as DOMAIN_REFUSALS
from sidecar.runtime.engine import OUTBOX_TIMER, Engine, EngineError
from sidecar.runtime.executor import Stopping, StepExecutor, StepFailed, TooManyTimers
from sidecar.runtime.step import Request, Step
from sidecar.senders.component import SendersComponent
from sidecar.senders.gate import waiting_reason
from sidecar.senders.health import may_send as sender_may_send
from sidecar.senders.health import utc_text
from sidecar.services import default_services
from sidecar.step_groups import StepGroups
from sidecar.routing import PassResult, RouterComponent
from sidecar.stack.client import StackClient
from sidecar.stack.errors import StackError
from sidecar.stack.startup import parse_startup
from sidecar.store.db import Store
from sidecar.wire import task_view, to_wire

log = logging.getLogger("sidecar.app")

EXIT_STEP_FAILED = 6  # a step could not commit (or crashed): restart restores from SQLite and Stack
REFUSALS = (*DOMAIN_REFUSALS, RpcError)  # raised before any change

HISTORY_WINDOW_S = 2 * 86400.0  # local task history loaded at login (restore input)
MAX_FIRES_PER_ADVANCE = 10_000  # timers one clock.advance_to may run (then -32602 with "now")
SHUTTING_DOWN = "the sidecar is shutting down; nothing was done"  # -32603 to a late request
# seconds SidecarApp.close may take at most: each stage's own bound is cut to what is left of it,
# so close() + the database close (0.3 s, sidecar.cli) end before the 1.5 s watchdog (exit 5)
CLOSE_BUDGET_S = 1.0


GROUPED = ("platform.event",)  # wall clock: queued runs of these commit as one group


def _event_answer(n: Any) -> dict:
    """``platform.event``'s answer: how many domain events the raw event became."""
    return {"ok": True, "events": n}


def make_clock(settings: Settings) -> Clock:
    if settings.clock == "virtual":
        return VirtualClock()
    if settings.time_scale:
        return ScaledClock(settings.time_scale)
    return WallClock()


class SidecarApp:
    """Owns the clock, engine, store, Stack client, outbox pump and bridge of one process."""

    def __init__(self, settings: Settings, store: Store, *, clock: Clock | None = None) -> None:
        self.settings = settings
        self.clock = clock or make_clock(settings)  # the one clock
        self.engine = Engine(KeyedRandom(settings.seed), default_services)
        self.store = store  # SQLite, opened (and locked) by the caller
        self.stack = StackClient(settings.stack_url) if settings.stack_url else None
        wall = not self.clock.virtual  # the wall clock groups queued frames (sidecar.step_groups)
        self.bridge = BridgeServer(settings.resolved_token(), self.handle, host=settings.host,
                                   port=settings.port, max_frame=settings.max_frame,
                                   allowed_origins=settings.allowed_origins,
                                   raw_params=True,  # decoded once, by each method
                                   group_handler=self._handle_group if wall else None,
                                   group_methods=GROUPED if wall else ())
        self._lock = asyncio.Lock()  # one step at a time
        self._wake = asyncio.Event()  # wall clock: a timer became due sooner
        self._tick_at = -math.inf  # wall clock: the clock instant the ticker sleeps until
        self._nothing_left = False  # wall clock: a pass left no row it could ever send (_pump_loop)
        self._pump_kick = asyncio.Event()  # the delivery timer fired: send what is due
        self._others_due = False  # virtual clock: the timer fired mid-advance (see advance_to)
        self._bg: set[asyncio.Task] = set()  # background tasks (wall-clock requests, ticker)
        self._batch_seen: int | None = None  # platform.events: events begun (platform.request)
        self._last_seq = 0  # stream seq of the last note this process sent (any kind)
        self._step_seqs: dict[int, int] | None = None  # platform.events: step number -> _last_seq once its effects were sent
        self.acked = 0  # Stack writes acknowledged (status)
        # the router: every outward delivery, Stack's built-in route included (ConfigError: exit 2)
        self.routing = RouterComponent(settings, store, self.stack, self._send, flush_interval_s=(
            settings.stack_flush_interval_s if self.clock.virtual else 0.0))  # sidecar.router.cadence
        self.methods = Methods()  # every bridge method this process answers (registry)
        self._register_methods()
        # sender health (seed 000, DESIGN §10): process-wide, its timers in the one scheduler
        self.senders = SendersComponent(self.engine, store, KeyedRandom(settings.seed),
                                        max_frame=settings.max_frame)
        self.senders.attach(self.methods, self.step)
        self.routing.plug_health(self.senders.gate)  # the router's one attempt gate asks it
        self.senders.route_events = lambda step, events: step.events.extend(events)
        self.fatal = asyncio.Event()  # set with ``failed``: ``sidecar serve`` exits EXIT_STEP_FAILED
        # the ONE step executor (commit, then notify, then requests); this app is its ports
        self.executor = StepExecutor(self.engine, self.clock, self, refusals=REFUSALS,
                                     spawn=None if self.clock.virtual else self._spawn,
                                     lock=self._lock, router=self.routing.port)
        self.groups = StepGroups(self.methods, self.executor, self._lock, refusals=DOMAIN_REFUSALS,
                                 stopped=self._stopped_error, shutting_down=SHUTTING_DOWN)
        self.groups.register("platform.event", self._event_step, _event_answer)

    @property
    def failed(self) -> BaseException | None:
        """The step failure that stopped this process, or None."""
        return self.executor.failed

    # lifecycle --------------------------------------------------------------------------------
    async def start(self) -> int:
        self.engine.outbox_at(await self.routing.start(self._now_or_none()))
        await self.senders.start(["stack", *self.routing.cfg.targets])
        port = await self.bridge.start()
        if not self.clock.virtual:
            self._spawn(self._ticker())
            self._spawn(self._pump_loop())
        return port

    async def close(self) -> list[str]:
        """Stop everything within :data:`CLOSE_BUDGET_S` seconds in every state (issue 7):
        each stage has its own deadline, and a stage that overruns (or fails) is logged and left
        behind — the process exits anyway (``sidecar.cli`` enforces the hard limit).  Returns
        the stages left behind, e.g. ``["delivery flush at exit (over 0.40 s)"]`` (empty: all
        done): ``sidecar serve`` must then not wait for them or close the loop under them
        (:mod:`sidecar.aio` "Abandoned is not done"), and names them in its exit log."""
        left: list[str] = []
        loop = asyncio.get_running_loop()
        end = loop.time() + CLOSE_BUDGET_S

        def cap(bound_s: float) -> float:  # a stage's own bound, cut to what is left of the budget
            return max(0.0, min(bound_s, end - loop.time()))

        self.executor.stop()  # from here no step begins (module rules)
        await cancel_all(self._bg, cap(0.3), "background tasks", left)
        await bounded(self.bridge.close(grace=0.3), cap(0.6), "bridge close", left)
        # the step under way (a frame's, an answer's) commits before the store and channels
        # close; the lock is kept: nothing runs a step or touches the router state after this
        locked = await bounded(self._lock.acquire(), cap(0.2), "the step under way", left)
        if not locked:
            log.warning("closing with a step still under way; it is abandoned, not failed")
        if (self._now_or_none() is not None
                and (OUTBOX_TIMER in self.engine.scheduler or self._pump_kick.is_set())):
            # flush what we can (DESIGN §3); anything left stays queued for the next start
            res = await bounded(self._route_pass(self.clock.now()), cap(0.4), "delivery flush at exit", left)
            if res is not None:
                self.acked += res.stack_acked
        await bounded(self.routing.close(), cap(0.1), "router channels close", left)
        if self.stack is not None:
            await bounded(self.stack.close(), cap(0.2), "Stack client close", left)
        return left

    def _now_or_none(self) -> float | None:
        try:
            return self.clock.now()
        except RuntimeError:
            return None

    # bridge handler ---------------------------------------------------------------------------
    async def handle(self, method: str, params: Any) -> Any:
        m = self.methods.get(method)  # MethodNotFound for an unknown one
        args = m.decode(params)  # InvalidParams naming the method
        stopped = self._stopped_error()
        if stopped is not None:
            raise stopped
        if m.needs_clock:
            self._require_clock()
        try:
            result = await m.handler(args)
        except (EngineError, BadRawEvent, UnknownRawEvent) as exc:
            raise InvalidParams(error_text(exc)) from None
        if self.clock.virtual and isinstance(result, dict):
            # the driver of a virtual clock may jump straight to this instant: nothing the
            # sidecar does on its own happens before it (timers, outbox retries)
            result["next_due"] = self.next_due()
        return result

    def _stopped_error(self) -> InternalError | None:
        """The answer to every request once a step failed (crash-only), else None."""
        if self.failed is None:
            return None
        return InternalError(f"the sidecar stopped after a failed step ({self.failed!r}); "
                             f"it must be restarted")

    async def _handle_group(self, method: str, params: list[Any]) -> list[Any]:
        """The bridge's ``group_handler`` (wall clock): queued frames of one of :data:`GROUPED`
        as one commit group, each answered as it would be alone (:mod:`sidecar.step_groups`)."""
        return await self.groups.handle(method, params)

    def next_due(self) -> float | None:
        """The earliest instant the sidecar acts by itself — a timer or an outbox retry — or
        None.  Rows queued for now are not counted: the next advance, whenever it comes, sends
        them."""
        return self.engine.next_due(self._now_or_none())

    def _register_methods(self) -> None:
        """Every method Electron may call (``sidecar.methods``); a new one registers here or is
        handed in by its component, never by extending an if-chain."""
        reg = self.methods.register
        reg("why", p.Why, self._why, needs_clock=False)
        reg("clock.advance_to", p.ClockAdvance, lambda a: self.advance_to(a.t), needs_clock=False)
        reg("status", p.Status, self._status, needs_clock=False)
        reg("session.login", p.SessionLogin, self.login)
        reg("session.logout", p.SessionLogout, self._logout)
        reg("platform.event", p.PlatformEvent, self._platform_event)
        reg("platform.events", p.PlatformEvents, self._platform_events, needs_clock=False)
        reg("platform.reconnected", p.PlatformReconnected, self._reconnected)
        reg("platform.poll", p.PlatformPoll, self.poll)
        reg("favorite.update", p.FavoriteUpdate, self._favorite_update)
        reg("task.close", p.TaskClose, self._task_close)
        reg("tasks.list", p.TasksList, self._tasks_list)
        reg("stack.flush", p.StackFlush, lambda a: self.flush_stack())
        self.routing.register(reg, self.step, self._locked, self.clock.now)

    async def _locked(self, fn: Callable[[], Any]) -> Any:
        """Run ``fn()`` (a coroutine function) under the step lock: a change outside a step
        (a rule) never interleaves with one."""
        if self.executor.stopping:
            raise InternalError(SHUTTING_DOWN)
        async with self._lock:
            if self.executor.stopping:
                raise InternalError(SHUTTING_DOWN)
            return await fn()

    async def _why(self, a: p.Why) -> dict:
        """``why {tu, ru, since?}`` (DESIGN §13): the pair's decisions in order, no step.

        Answer ``{"tu", "ru", "since", "decisions": [{"id", "at", "type", "source", "outcome",
        "task_id", "detail", "text"}], "next"}`` (``at`` unix seconds; one page under the frame
        cap, :mod:`sidecar.paging`); rows past the retention are gone."""
        found = await self.store.decisions(a.tu, a.ru, since=a.since, after_id=a.after_id,
                                           limit=a.limit + 1)
        for row in found:
            row["text"] = explain(row)
        rows, nxt = page(found, a.limit, budget(self.settings.max_frame), lambda r: r["id"])
        return {"tu": a.tu, "ru": a.ru, "since": a.since, "decisions": rows, "next": nxt}

    async def _status(self, a: p.Status) -> dict:
        return self.status()

    async def _logout(self, a: p.SessionLogout) -> dict:
        await self.step(partial(self.engine.logout, tu=a.tu))
        await self._flush_observed()  # the next machine to log this TU in reads Stack
        return {"ok": True}

    async def _flush_observed(self) -> None:
        """Virtual clock: Stack is about to be read (a login's startup data, another machine
        after a logout): flush its due writes now (the wall clock sends them at once anyway)."""
        if self.clock.virtual and self.routing.flush_at is not None:
            await self.flush_stack()

    async def _platform_event(self, a: p.PlatformEvent) -> dict:
        return _event_answer(await self.step(self._event_step(a)))

    def _event_step(self, a: p.PlatformEvent) -> Callable[[Step], Any]:
        """``platform.event``'s step (alone, or one of a wall-clock group)."""
        return partial(self.engine.platform_event, tu=a.tu, project=a.project, name=a.name, data=a.data)

    async def _reconnected(self, a: p.PlatformReconnected) -> dict:
        await self.step(partial(self.engine.reconnected, tu=a.tu))
        return {"ok": True}

    async def _favorite_update(self, a: p.FavoriteUpdate) -> dict:
        changes = {k: v for k, v in msgspec.structs.asdict(a).items()
                   if k not in ("tu", "ru", "project") and v is not None}
        await self.step(partial(self.engine.favorite_update, tu=a.tu, ru=a.ru, changes=changes))
        return {"ok": True}

    async def _task_close(self, a: p.TaskClose) -> dict:
        closed = await self.step(partial(self.engine.task_close, task_id=a.task_id, reason=a.reason))
        return {"ok": True, "closed": closed}

    async def _tasks_list(self, a: p.TasksList) -> list:
        return [task_view(t) for t in self.engine.open_tasks(a.tu)]

    def _require_clock(self) -> None:
        if isinstance(self.clock, VirtualClock) and not self.clock.is_set:
            raise InvalidParams("virtual clock not set: send clock.advance_to first")

    # steps ------------------------------------------------------------------------------------
    async def step(self, fn: Callable[[Step], Any]) -> Any:
        """Run ``fn`` as one step under the lock (the executor's rules); a failed step is a
        -32603 answer and stops the process (crash-only, module rules)."""
        try:
            return await self.executor.step(fn)
        except StepFailed as exc:
            raise InternalError(str(exc)) from exc
        except Stopping:
            raise InternalError(SHUTTING_DOWN) from None

    async def _step_locked(self, fn: Callable[[Step], Any], now: float | None = None) -> Any:
        try:
            return await self.executor.run(fn, now)
        except StepFailed as exc:
            raise InternalError(str(exc)) from exc
        except Stopping:
            raise InternalError(SHUTTING_DOWN) from None

    # executor ports -----------------------------------------------------------------------------
    async def commit(self, ops: list) -> None:
        await self.store.commit(ops)

    def notify(self, method: str, note: Any) -> None:
        self._send(method, to_wire(method, note))

    def _send(self, method: str, wire: Any) -> None:
        """Every note to Electron — a step's, the router's ``delivery``, ``sender.state`` —
        goes out here, so :attr:`_last_seq` knows the stream's last seq this process sent."""
        self._last_seq = self.bridge.notify(method, wire)

    def step_done(self) -> None:
        if self._step_seqs is not None:  # platform.events: where this step's effects end
            self._step_seqs[self.executor.steps] = self._last_seq
        if not self.clock.virtual:
            self._wall_step_done()

    def _wall_step_done(self) -> None:
        """Wall clock, after each step's commit (issue 11, the latency at 1,000 events/s): the
        delivery timer, if due by now — a step routed rows — goes straight to the pump, as its
        firing would (:meth:`outbox_due`), instead of costing a ticker round and a step of its
        own per event; and the ticker is woken only when a timer is now due sooner than it
        sleeps (:meth:`_wake_ticker`)."""
        sched = self.engine.scheduler
        due = sched.due_of(OUTBOX_TIMER)
        if due is not None and due <= self.clock.now():
            sched.cancel(OUTBOX_TIMER)
            self.outbox_due(due)
        self._wake_ticker()

    def _wake_ticker(self) -> None:
        """Wall clock: wake the ticker if the next timer is due before the instant it sleeps
        until (it sleeps to the earliest timer, so a later one needs no wake)."""
        nd = self.engine.scheduler.next_due()
        if nd is not None and nd < self._tick_at:
            self._wake.set()

    def outbox_queued(self, at: float, channels: frozenset[str] | None = None) -> None:
        # the delivery timer fires at ``at`` for every target but Stack, at its flush instant
        # for Stack's writes (sidecar.router.cadence), or sooner
        self.engine.outbox_at(self.routing.queued(at, channels))

    def outbox_due(self, at: float) -> None:
        self._pump_kick.set()  # virtual: sent at the end of the advance; wall: by the pump loop
        self._others_due = True

    def step_failed(self, exc: BaseException) -> None:
        log.critical("a step failed; nothing of it was committed or sent; stopping so that a "
                     "restart restores from SQLite and Stack", exc_info=exc)
        self.fatal.set()

    async def perform(self, req: Request) -> tuple[Any, str | None]:
        params = p.PlatformRequest(project=req.project, tu=req.tu, method=req.method,
                                   params=req.params, at=req.at, batch_seen=self._batch_seen)
        try:
            res = await self.bridge.request("platform.request", params,
                                            timeout=self.settings.request_timeout_s)
            return res, None
        except Exception as exc:  # noqa: BLE001 - any failure is an answer: the pass retries later
            return None, f"{type(exc).__name__}: {exc}"

    # time -------------------------------------------------------------------------------------
    async def advance_to(self, t: float) -> dict:
        """Virtual clock: run everything due up to ``t`` (unix seconds) in order."""
        if not isinstance(self.clock, VirtualClock):
            raise InvalidParams("clock.advance_to needs --clock virtual")
        if not math.isfinite(t):
            raise InvalidParams("t must be a finite number of unix seconds")
        async with self._lock:
            await self._fire_until(self.clock, t, "clock.advance_to")
            if self._pump_kick.is_set():
                await self._pump_locked()
            return {"now": self.clock.now()}

    async def _fire_until(self, clock: VirtualClock, t: float, method: str) -> None:
        """Run every timer due up to ``t``, one step each at its instant, as one commit group
        (committed when this returns or raises; inside an open group — ``platform.events`` —
        it joins that one), and move the clock to ``t``; the caller holds the lock and pumps
        Stack's rows if the delivery timer fired."""
        if not clock.is_set:
            clock.advance_to(t)
        # Timers run one step each, in due order, at their own instants, and so do delivery
        # passes: every target but Stack at the instant its row is due, so alerts and their
        # retry ladder (+30 s, +2 min, …) keep their times to the second; Stack's writes at
        # its flush instants (sidecar.router.cadence: new writes on the grid of
        # ``stack_flush_interval_s``, retries on their ladder), everything due then in flight
        # together (one ``POST /v1/batch`` where Stack has it) — the Stack round trips
        # dominated a replay, and a write's delivery instant is not part of the domain
        # (markers are applied locally at once).  How the driver slices its advances
        # changes nothing.

        async def deliver_due() -> None:
            if self._others_due or self.executor.outbox_due_pending():
                await self._pass_locked(clock.now(), stack=self.routing.stack_due(clock.now()))

        try:
            await self.executor.fire_due(t, advance_clock=clock.advance_to,
                                         limit=MAX_FIRES_PER_ADVANCE, after_each=deliver_due,
                                         every=(64, self._advance_yield))
        except TooManyTimers:
            # a far-future target must not hold the one worker (and every frame behind
            # it) for minutes: everything so far is committed, the client continues
            raise InvalidParams(
                f"{method}: more than {MAX_FIRES_PER_ADVANCE} timers are due "
                f"before t; ran them up to {clock.now()}. Advance in smaller steps",
                data={"now": clock.now(), "next_due": self.next_due()}) from None
        except StepFailed as exc:
            raise InternalError(str(exc)) from exc
        except Stopping:
            raise InternalError(SHUTTING_DOWN) from None
        clock.advance_to(t)

    async def _platform_events(self, a: p.PlatformEvents) -> dict:
        """``platform.events`` (see :class:`sidecar.protocol.PlatformEvents`): the events in
        order, each its own step, the whole call ONE commit group — plus, on the virtual clock,
        the advance to each event's ``received_at`` first (timers, and every delivery at its
        instant, exactly as ``clock.advance_to``).  Per event ``{"ok", "events", "seq"}`` or
        ``{"ok": false, "error": {"code": -32602, "message"}}``."""
        clock = self.clock
        virtual = isinstance(clock, VirtualClock)
        results: list[dict] = []
        marks: list[int] = []  # the number of the last step once each event's step was run
        async with self._lock:
            seq0 = self._last_seq = self.bridge.stream.last_seq
            self._batch_seen, self._step_seqs = 0, {}
            try:
                async with self.executor.group():
                    for i, ev in enumerate(a.events):
                        if virtual:
                            assert isinstance(clock, VirtualClock)
                            at = ev.received_at
                            if at is not None and (not clock.is_set or at > clock.now()):
                                if not math.isfinite(at):
                                    raise InvalidParams("platform.events: received_at must be finite")
                                await self._fire_until(clock, at, "platform.events")
                            self._require_clock()
                            if self._pump_kick.is_set() or self.executor.outbox_due_pending():
                                await self._pump_locked()  # as at the end of clock.advance_to
                        self._batch_seen = i + 1
                        results.append(await self._batch_event(ev))
                        marks.append(self.executor.steps + self.executor.pending_steps())
            except StepFailed as exc:
                raise InternalError(str(exc)) from exc
            except Stopping:
                raise InternalError(SHUTTING_DOWN) from None
            finally:
                self._batch_seen = None
                step_seqs, self._step_seqs = self._step_seqs or {}, None
            for res, mark in zip(results, marks):
                res["seq"] = step_seqs.get(mark, seq0)
        return {"taken": len(results), "results": results, "now": self._now_or_none()}

    async def _batch_event(self, ev: p.PlatformEvent) -> dict:
        """One event of a batch as one step of the open group; a refusal is its error result."""
        try:
            n = await self.executor.run(partial(
                self.engine.platform_event, tu=ev.tu, project=ev.project, name=ev.name, data=ev.data))
        except (EngineError, BadRawEvent, UnknownRawEvent, RpcError) as exc:
            code = exc.code if isinstance(exc, RpcError) else INVALID_PARAMS
            return {"ok": False, "error": {"code": code, "message": error_text(exc)}}
        return {"ok": True, "events": n}

    async def _advance_yield(self) -> None:
        if not self.bridge.connected:
            # nobody to answer platform requests or to receive the result: stop;
            # every step so far is committed, the rest stays due for the next advance
            raise InvalidParams("the client disconnected during clock.advance_to")
        await asyncio.sleep(0)  # noqa: TID251 - a yield, not a wait: a long advance must not starve signals and reads

    async def _route_pass(self, now: float, *, stack: bool = True) -> PassResult:
        """One pass of the router's pump; then the sender transitions it made (committed by
        the pass) go to Electron as ``sender.state``."""
        res = await self.routing.pump(now, stack=stack)
        for note in self.senders.gate.take_notes():
            self.notify("sender.state", note)
        return res

    def _pass_idle(self, *, stack: bool) -> bool:
        """A delivery pass could do nothing — no target but Stack is configured, no sender probe
        waits, and Stack's rows are not part of it (``stack`` False, or no Stack) — so it need
        neither commit the open group first nor read SQLite (the pass would find nothing)."""
        return (not self.routing.channels and not self.senders.gate.probes
                and (not stack or self.routing.stack is None))

    async def _pump_locked(self) -> None:
        now = self.clock.now()
        await self._pass_locked(now, stack=self.routing.stack_due(now))

    async def _pass_locked(self, now: float, *, stack: bool) -> PassResult | None:
        """Under the step lock: one delivery pass at ``now`` — Stack's due writes too when
        ``stack`` — after committing the open group (the pump reads SQLite); None when it
        could do nothing (then the delivery timer is re-armed at Stack's flush instant)."""
        self._pump_kick.clear()
        self._others_due = False
        if self._pass_idle(stack=stack):
            self.engine.outbox_at(self.routing.flush_at)  # armed before Stack's flush: wait for it
            return None
        await self.executor.flush()  # the pump reads SQLite: the group so far first
        res = await self._route_pass(now, stack=stack)
        self.acked += res.stack_acked
        self.engine.outbox_at(res.next_due)
        if res.events:  # the pass raised router events (sidecar/stack …): a step of their own
            await self._step_locked(lambda s: s.events.extend(res.events))
        return res

    async def flush_stack(self) -> dict:
        """``stack.flush`` (:class:`sidecar.protocol.StackFlush`): send every due Stack write now,
        ignoring the flush cadence (:mod:`sidecar.router.cadence`) — for whoever is about to read
        Stack (another machine's login, a check).  Retries keep their ladder instants: a write
        waiting for a retry is not due.  Answer ``{"acked", "failed", "pending", "waiting"?}``:
        writes acknowledged and writes whose attempt failed in this flush, Stack writes still
        queued after it, and — when some are — why and until when
        (:class:`sidecar.protocol_answers.StackWaiting`)."""
        if self.routing.stack is None:
            return {"acked": 0, "failed": 0, "pending": 0}
        if self.clock.virtual:
            async def flush() -> PassResult | None:  # under the step lock the flush instant
                if self.routing.flush_at is None:  # in memory is exact: nothing queued
                    return None
                return await self._pass_locked(self.clock.now(), stack=True)
            res = await self._locked(flush)
        else:  # beside the pump loop: the pump's own lock serialises the passes
            res = await self._route_pass(self.clock.now())
            self.acked += res.stack_acked
            if res.events:
                await self.step(lambda s: s.events.extend(res.events))
            self.engine.outbox_at(res.next_due)
            self._wake.set()
        if res is None:
            return {"acked": 0, "failed": 0, "pending": 0}
        out: dict[str, Any] = {"acked": res.stack_acked, "failed": res.stack_failed,
                               "pending": res.stack_pending}
        if res.stack_pending:
            out["waiting"] = self._stack_waiting(self.clock.now())
        return out

    def _stack_waiting(self, now: float) -> dict[str, Any]:
        """Why Stack's writes stay pending (:class:`sidecar.protocol_answers.StackWaiting`):
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

    async def _ticker(self) -> None:
        """Wall clock: fire due timers and outbox rows; sleep until the next one or a wake."""
        while self.failed is None:
            async with self._lock:
                now = self.clock.now()
                try:
                    async with self.executor.group():  # the timers due now: one commit
                        while (nd := self.engine.scheduler.next_due()) is not None and nd <= now:
                            await self._step_locked(self.engine.fire, now=now)
                except (InternalError, StepFailed, Stopping):
                    return  # crash-only (``fatal`` is set) or shutting down: serve exits
                nd = self.engine.scheduler.next_due()
                self._tick_at = now + 60.0 if nd is None else nd
                wait = self._tick_at - self.clock.now()
            self._wake.clear()
            await wait_event(self._wake, self.clock.real_delay(wait))

    async def _pump_loop(self) -> None:
        """Wall clock: send due deliveries whenever rows are due, outside the step lock."""
        while True:
            if self._pump_kick.is_set():  # the delivery timer fired (the ticker ran it)
                self._pump_kick.clear()
                if self._nothing_left and self._pass_idle(stack=True):
                    continue  # a pass could send nothing (module rules): no SQLite read per event
                now = self.clock.now()
                try:
                    res = await self._route_pass(now)
                except Exception:  # noqa: BLE001 - keep pumping; rows stay queued
                    log.exception("delivery pump failed")
                    try:  # sender health may be ahead of what the pass committed: take SQLite's
                        await self.senders.reload()
                    except Exception:  # noqa: BLE001 - the store is failing: the next pass retries
                        log.exception("sender health could not reload its state")
                    self.engine.scheduler.schedule(OUTBOX_TIMER, now + 5.0)
                    self._wake_ticker()
                    continue
                self.acked += res.stack_acked
                # no Stack, no other target, no probe, and no row left from an earlier config
                # (routing fails a row for a target not configured at once): from now on a pass
                # could send nothing — Stack's rows wait in SQLite for a process that has one
                self._nothing_left = res.next_due is None and self._pass_idle(stack=True)
                if res.events:
                    try:
                        await self.step(lambda s: s.events.extend(res.events))
                    except InternalError:
                        return  # crash-only (``fatal`` is set) or shutting down: serve exits
                # rows queued while this pass ran armed the timer already: keep the sooner
                self.engine.outbox_at(res.next_due)
                self._wake_ticker()  # when the timer's new instant is before the ticker's
                continue
            await wait_event(self._pump_kick, self.clock.real_delay(60.0))

    # sessions ---------------------------------------------------------------------------------
    async def login(self, a: p.SessionLogin) -> dict:
        try:
            client_for(a.project)  # before any I/O
        except KeyError as exc:
            raise InvalidParams(error_text(exc)) from None
        startup = None
        if self.stack is not None:
            await self._flush_observed()  # Stack's answer includes what this process wrote
            try:
                async with asyncio.timeout(self.settings.stack_startup_timeout_s):
                    raw = await self.stack.startup(a.tu)
                self.routing.note_startup(raw)  # "capabilities": ["batch"]
                parsed = parse_startup(a.tu, raw)
                if parsed is None:
                    log.warning("Stack startup for %s is unusable: restoring from local state", a.tu)
                else:
                    startup = {"favorites": parsed.favorites, "history": parsed.history}
            except TimeoutError:
                log.warning("Stack startup for %s took over %g s: restoring from local state",
                            a.tu, self.settings.stack_startup_timeout_s)
            except StackError as exc:
                log.warning("Stack startup for %s unavailable (%s): restoring from local state",
                            a.tu, exc)
        now = self.clock.now()
        favorites = await self.store.favorites(a.tu)
        tasks = await self.store.tasks_for(a.tu, since=now - HISTORY_WINDOW_S)
        open_ids = {t.task_id for t in tasks}
        tasks += [t for t in await self.store.open_tasks(a.tu) if t.task_id not in open_ids]
        pending = await self.store.pending_markers(a.tu)  # unacked local writes (DESIGN §9)
        state = await self.store.all_states(a.tu)  # every service's durable state, any scope
        prune = self.routing.prune_ops(now)  # the router's housekeeping rides the login step

        def login(s: Step) -> None:
            self.engine.login(s, a.tu, a.project, a.operator, startup=startup,
                              local_favorites=favorites, local_tasks=tasks,
                              pending_markers=pending, local_state=state)
            s.ops.extend(prune)
            # in the step, under its lock: never between another step's decide and apply
            self.routing.router.state.prune(now)

        await self.step(login)
        rt = self.engine.tus[a.tu]
        return {"ok": True, "favorites": len(rt.favorites), "restored_from_stack": startup is not None,
                "open_tasks": len(self.engine.factory.open_of_tu(a.tu))}

    async def poll(self, a: p.PlatformPoll) -> dict:
        """Electron pushed a poll result itself: handled like the answer to our own request."""
        rt = self.engine.tus.get(a.tu)
        if rt is None or not rt.logged_in:
            raise InvalidParams(f"TU {a.tu!r} is not logged in")
        try:
            pass_ = rt.client.pass_named(a.pass_)
        except KeyError:
            raise InvalidParams(f"{rt.project} has no pass {a.pass_!r}") from None
        req = Request("passes", pass_.method, dict(pass_.params), pass_.name, tu=rt.tu,
                      project=rt.project, epoch=rt.epoch)
        await self.step(lambda s: self.engine.request_done(s, req, a.data, None))
        return {"ok": True}

    def status(self) -> dict:
        return {"version": __version__, "protocol": PROTOCOL_VERSION,
                "clock": "virtual" if self.clock.virtual else "wall", "now": self._now_or_none(),
                "tus": sorted(self.engine.tus), "open_tasks": len(self.engine.factory.open),
                "timers": len(self.engine.scheduler) - (OUTBOX_TIMER in self.engine.scheduler),
                "events_in": self.engine.events_in,
                "stack_acked": self.acked,
                "outbox_due": self.engine.scheduler.due_of(OUTBOX_TIMER),
                "store": self.store.counters.as_dict()}

    def _spawn(self, coro) -> None:
        if self.executor.stopping:  # nothing new starts at shutdown (module rules)
            coro.close()
            return
        task = asyncio.get_running_loop().create_task(coro)
        self._bg.add(task)
        task.add_done_callback(self._bg.discard)
