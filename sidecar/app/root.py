"""The application: bridge ⇄ engine ⇄ store/Stack.  The only place that does I/O for the domain.

The composition root: :class:`SidecarApp` builds the parts, registers every bridge method, is
the step executor's ports, and starts and closes the process.  Its concepts live beside it:

* :mod:`sidecar.app.clockwork` — the virtual clock's advance, the wall clock's ticker, the
  per-event wall-clock path;
* :mod:`sidecar.app.deliveries` — when the router's delivery pump runs, ``stack.flush``, the
  wall clock's pump loop;
* :mod:`sidecar.app.inputs` — a TU's inputs besides its platform events: ``session.login``
  (Stack's startup read), ``session.logout``, ``platform.poll``, ``platform.reconnected``,
  ``favorite.update``, ``task.close``, ``tasks.list``, ``why``;
* :mod:`sidecar.app.batches` — ``platform.events``: a burst of raw events as one commit group;
* :mod:`sidecar.app.pushed_polls` — poll answers pushed into a virtual-clock frame;
* :mod:`sidecar.app.step_groups` — the wall clock's queued ``platform.event`` frames as one group.

Rules / theory of operation
---------------------------
* One asyncio lock serialises every step (inbound frame, timer, platform answer): the engine is
  single-threaded by construction and SQLite sees one writer.
* A step's store ops commit in ONE transaction; only then are its notifications sent, so
  Electron never shows a task a crash could lose.  Then its platform requests run: awaited inline
  on the virtual clock (a replay is deterministic), as background tasks on the wall clock (a slow
  platform scroll never holds up socket events).
* **Group commit**: the timers of one advance, the timers the ticker finds due
  at once, and the events of one ``platform.events`` batch commit as one group — one SQLite
  transaction, one thread hop — in step order (:meth:`StepExecutor.group`).  Each step's
  routing is decided before the group's commit (on the router state the group's earlier steps
  left) and applied after it; its notes, delivery notes and sender health's ``sender.state``
  notes are sent after it, step by step.  The group is committed before the delivery pump reads
  SQLite (a delivery timer fired: every target's rows at that instant, Stack's at the end of the
  advance) and before any yield.
* Everything outward — Stack writes included — leaves only through the router's delivery pump
  (:mod:`sidecar.app.router`, DESIGN §10; :mod:`sidecar.app.deliveries`); a Stack outage never
  blocks a step.
* **A step is atomic, in memory too — crash-only** (DESIGN §13).  The engine mutates memory while
  it decides, so a step whose commit fails (or that raises anything but a refusal, i.e. a
  programming error) cannot be undone in place: the app stops taking steps, answers every
  further request with -32603, sends nothing of that step, and sets :attr:`SidecarApp.fatal`;
  ``sidecar serve`` then exits with :data:`EXIT_STEP_FAILED` and Electron restarts it, which
  restores from SQLite and Stack — where the failed step left nothing.  Refusals
  (:data:`REFUSALS`: unknown TU, bad raw event, …) are raised before anything changes and stay
  -32602 answers; no other exception (a bare ``KeyError`` included) is ever turned into one.
* **Shutdown refuses new steps; it never fails one** (a step failed at shutdown would exit 6):
  :mod:`sidecar.app.closing` has the close's rules; a ``sidecar.shutdown`` request stops the
  executor at once and is answered by :meth:`SidecarApp.goodbye`, after the store closed.
"""
from __future__ import annotations

import asyncio
import logging
from functools import partial
from typing import TYPE_CHECKING, Any, Callable

from bridge import BridgeServer
from bridge.worker import Deferred
from bridge.errors import INTERNAL_ERROR, InternalError, InvalidParams, RpcError, ShuttingDown, as_rpc_error
from sidecar import PROTOCOL_MAJOR, PROTOCOL_VERSION, __version__
from sidecar.app import closing, requests as app_requests
from sidecar.app.closing import CLOSE_BUDGET_S, GOODBYE_S  # noqa: F401 - re-exported (tests, serve)
from sidecar.protocol import inbound as p
from sidecar.app.batches import EventBatches
from sidecar.app.pushed_polls import PushedPolls
from sidecar.app.deliveries import Deliveries
from sidecar.app.inputs import Inputs
from sidecar.app.log_feed import LogFeed
from sidecar.app.clockwork import Alarm, Clockwork, make_clock
from sidecar.config import Settings
from sidecar.core.clock import Clock, VirtualClock
from sidecar.core.rng import KeyedRandom
from sidecar.domain.errors import SidecarError
from sidecar.protocol.contract import CAPABILITIES
from sidecar.protocol.methods import Methods
from sidecar.runtime.engine import OUTBOX_TIMER, REFUSALS as DOMAIN_REFUSALS, Engine
from sidecar.runtime.executor import StepExecutor
from sidecar.runtime.ports import Stopping, StepFailed
from sidecar.runtime.step import Request, Step
from sidecar.app.senders import SendersComponent
from sidecar.senders.manage import ManageError
from sidecar.services import default_services
from sidecar.app.step_groups import StepGroups
from sidecar.app.router import RouterComponent
from sidecar.store.db import Store
from sidecar.app.wire import to_wire

if TYPE_CHECKING:
    from sidecar.stack.client import StackClient  # imported where it is made (httpx)

log = logging.getLogger("sidecar.app.root")

EXIT_STEP_FAILED = 6  # a step could not commit (or crashed): restart restores from SQLite and Stack
# raised before any change (a manage error by the pure manage functions: sidecar.app.senders)
REFUSALS = (*DOMAIN_REFUSALS, ManageError, RpcError)

MAX_FIRES_PER_ADVANCE = 10_000  # timers one clock.advance_to may run (then -32602 with "now")
SHUTTING_DOWN = "the sidecar is shutting down; nothing was done"  # -32002 to a late request

GROUPED = ("platform.event",)  # wall clock: queued runs of these commit as one group


def _event_answer(n: Any) -> dict:
    """``platform.event``'s answer: how many domain events the raw event became."""
    return {"ok": True, "events": n}


class SidecarApp:
    """Owns the clock, engine, store, Stack client, outbox pump and bridge of one process."""

    def __init__(self, settings: Settings, store: Store, *, clock: Clock | None = None) -> None:
        self.settings = settings
        self.clock = clock or make_clock(settings)  # the one clock
        self.engine = Engine(KeyedRandom(settings.seed), default_services)
        self.pushed = PushedPolls(self.engine)  # poll answers pushed into the frame
        self.store = store  # SQLite, opened (and locked) by the caller
        self.stack: StackClient | None = None
        if settings.stack_url:
            # imported here: httpx is loaded only by a sidecar that has a Stack
            from sidecar.stack.client import StackClient
            self.stack = StackClient(settings.stack_url, timeout=settings.stack_timeout_s)
        wall = not self.clock.virtual  # the wall clock groups queued frames (sidecar.app.step_groups)
        self.bridge = BridgeServer(settings.resolved_token(), self.handle, host=settings.host,
                                   port=settings.port, max_frame=settings.max_frame, protocol=PROTOCOL_VERSION,
                                   allowed_origins=settings.allow_origin, capabilities=CAPABILITIES,
                                   open_timeout=settings.handshake_timeout_s,
                                   auth_timeout=settings.handshake_timeout_s,
                                   raw_params=True,  # decoded once, by each method
                                   group_handler=self._handle_group if wall else None,
                                   group_methods=GROUPED if wall else (),
                                   cut_short_data=lambda method: self.batches.cut_short_data(method))
        self._lock = asyncio.Lock()  # one step at a time
        self._bg: set[asyncio.Task] = set()  # background tasks (wall-clock requests, ticker)
        self.asker = app_requests.Asker(self.bridge, settings.request_timeout_s)  # platform.request(s)
        # the router: every outward delivery, Stack's built-in route included (ConfigError: exit 2)
        self.routing = RouterComponent(settings, store, self.stack, self._send, flush_interval_s=(
            settings.stack_flush_interval_s if self.clock.virtual else 0.0),  # sidecar.router.cadence
            stamp_at=self.clock.virtual)  # HTTP calls carry the virtual instant (router.channels)
        self.methods = Methods()  # every bridge method this process answers (registry)
        self._register_methods()
        # sender health (seed 000, DESIGN §10): process-wide, its timers in the one scheduler
        self.senders = SendersComponent(self.engine, store, KeyedRandom(settings.seed),
                                        max_frame=settings.max_frame)
        self.senders.attach(self.methods, self.step)
        self.logs = LogFeed(self.bridge)  # logs.subscribe / logs.unsubscribe, the `log` notes
        self.logs.attach(self.methods)
        self.routing.plug_health(self.senders.gate)  # the router's one attempt gate asks it
        self.senders.route_events = lambda step, events: step.events.extend(events)
        self.fatal = asyncio.Event()  # set with ``failed``: ``sidecar serve`` exits EXIT_STEP_FAILED
        # set by a sidecar.shutdown request: ``sidecar serve`` stops as on SIGTERM
        self.shutdown_requested = asyncio.Event()
        self._shutdown_answers: list[Deferred] = []  # sidecar.shutdown requests, answered by goodbye()
        # the ONE step executor (commit, then notify, then requests); this app is its ports
        self.executor = StepExecutor(self.engine, self.clock, self, refusals=REFUSALS,
                                     spawn=None if self.clock.virtual else self._spawn,
                                     lock=self._lock, router=self.routing.port)
        self.groups = StepGroups(self.methods, self.executor, self._lock, refusals=DOMAIN_REFUSALS,
                                 stopped=self._stopped_error, shutting_down=SHUTTING_DOWN)
        self.groups.register("platform.event", self._event_step, _event_answer)
        # the app's concepts beside it (module docstring); each gets what it uses, explicitly
        self.alarm = Alarm(self.engine.scheduler)  # wall clock: the ticker's wake-up
        self.deliveries = Deliveries(clock=self.clock, engine=self.engine, executor=self.executor,
                                     routing=self.routing, senders=self.senders, ports=self,
                                     step=self.step, step_locked=self._step_locked, locked=self._locked,
                                     wake=self.alarm.wake, wake_if_sooner=self.alarm.wake_if_sooner)
        self._pump_kick = self.deliveries.pump_kick  # the delivery timer fired
        self.clockwork = Clockwork(clock=self.clock, engine=self.engine, executor=self.executor,
                                   lock=self._lock, deliveries=self.deliveries, alarm=self.alarm,
                                   step_locked=self._step_locked, connected=lambda: self.bridge.connected,
                                   next_due=self.next_due, max_fires=MAX_FIRES_PER_ADVANCE,
                                   pushed=self.pushed)
        self.inputs = Inputs(settings=settings, clock=self.clock, engine=self.engine, store=store,
                             stack=self.stack, routing=self.routing, step=self.step,
                             flush_observed=self.deliveries.flush_observed,
                             queued=self.outbox_queued)
        self.batches = EventBatches(clock=self.clock, engine=self.engine, executor=self.executor,
                                    lock=self._lock, deliveries=self.deliveries, clockwork=self.clockwork,
                                    pushed=self.pushed,
                                    stream_last_seq=lambda: self.bridge.stream.last_seq,
                                    require_clock=self._require_clock, now_or_none=self._now_or_none)

    @property
    def failed(self) -> BaseException | None:
        """The step failure that stopped this process, or None."""
        return self.executor.failed

    @property
    def acked(self) -> int:
        """Stack writes acknowledged by this process (``status``)."""
        return self.deliveries.acked

    # lifecycle --------------------------------------------------------------------------------
    async def start(self) -> int:
        self.engine.outbox_at(await self.routing.start(self._now_or_none()))
        await self.senders.start(["stack", *self.routing.cfg.targets])
        port = await self.bridge.start()
        if not self.clock.virtual:
            self._spawn(self.clockwork.ticker())
            self._spawn(self.deliveries.pump_loop())
        return port

    async def close(self, *, final: bool = True) -> list[str]:
        """Stop everything within :data:`~sidecar.app.closing.CLOSE_BUDGET_S` seconds in every
        state; the stages left behind (:func:`sidecar.app.closing.close`).  ``final=False``
        leaves the connection for :meth:`goodbye`, after the caller closed the store."""
        return await closing.close(self, final=final)

    async def goodbye(self, left: list[str]) -> None:
        """Answer every ``sidecar.shutdown``, then close the connection (1001)
        (:func:`sidecar.app.closing.goodbye`)."""
        await closing.goodbye(self.bridge, self._shutdown_answers, left)

    def _now_or_none(self) -> float | None:
        try:
            return self.clock.now()
        except RuntimeError:
            return None

    async def handle(self, method: str, params: Any) -> Any:
        """The bridge's handler: ``method``'s answer, or the :class:`RpcError` it raises — a
        sidecar exception is mapped HERE, once, by its branch (``sidecar.domain.errors``)."""
        m = self.methods.get(method)  # MethodNotFound for an unknown one
        args = m.decode(params)  # InvalidParams naming the method
        stopped = self._stopped_error()
        if stopped is not None:
            raise stopped
        if m.needs_clock:
            self._require_clock()
        try:
            result = await m.handler(args)
        except SidecarError as exc:  # the one mapping of a sidecar exception to a JSON-RPC error
            err = as_rpc_error(exc)
            assert err is not None  # every SidecarError has its error object
            if err.code == INTERNAL_ERROR:  # not the caller's fault: keep the traceback
                log.error("%s raised", method, exc_info=exc)
            raise err from None
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
        as one commit group, each answered as it would be alone (:mod:`sidecar.app.step_groups`)."""
        return await self.groups.handle(method, params)

    def next_due(self) -> float | None:
        """The earliest instant the sidecar acts by itself — a timer or an outbox retry — or
        None.  Rows queued for now are not counted: the next advance, whenever it comes, sends
        them."""
        return self.engine.next_due(self._now_or_none())

    def _register_methods(self) -> None:
        """Every method Electron may call (``sidecar.protocol.methods``); a new one registers here or is
        handed in by its component, never by extending an if-chain."""
        reg = self.methods.register
        reg("why", p.Why, lambda a: self.inputs.why(a), needs_clock=False)
        reg("clock.advance_to", p.ClockAdvance, self._advance, needs_clock=False)
        reg("status", p.Status, self._status, needs_clock=False)
        reg("session.login", p.SessionLogin, lambda a: self.inputs.login(a))
        reg("session.logout", p.SessionLogout, lambda a: self.inputs.logout(a))
        reg("platform.event", p.PlatformEventIn, self._platform_event)
        reg("platform.events", p.PlatformEvents, self._events, needs_clock=False)
        reg("platform.reconnected", p.PlatformReconnected, lambda a: self.inputs.reconnected(a))
        reg("platform.poll", p.PlatformPoll, lambda a: self.inputs.poll(a))
        reg("favorite.update", p.FavoriteUpdate, lambda a: self.inputs.favorite_update(a))
        reg("task.close", p.TaskClose, lambda a: self.inputs.task_close(a))
        reg("tasks.list", p.TasksList, lambda a: self.inputs.tasks_list(a))
        reg("stack.flush", p.StackFlush, lambda a: self.deliveries.flush_stack())
        reg("sidecar.shutdown", p.SidecarShutdown, self._shutdown, needs_clock=False)
        self.routing.register(reg, self.step, self._locked, self.clock.now)

    async def _advance(self, a: p.ClockAdvance) -> dict:
        result = await self.clockwork.advance_to(a.t, a.poll_answers)
        return self._listed(a, result)

    async def _events(self, a: p.PlatformEvents) -> dict:
        return self._listed(a, await self.batches.handle(a))

    def _listed(self, a: p.PollsAsked, result: dict) -> dict:
        return self.pushed.list_into(result, a.polls_ahead_s if self.clock.virtual else None,
                                     self.next_due(), self.bridge.client)

    async def _locked(self, fn: Callable[[], Any]) -> Any:
        """Run ``fn()`` (a coroutine function) under the step lock: a change outside a step
        (a rule) never interleaves with one."""
        if self.executor.stopping:
            raise ShuttingDown(SHUTTING_DOWN)
        async with self._lock:
            if self.executor.stopping:
                raise ShuttingDown(SHUTTING_DOWN)
            return await fn()

    async def _shutdown(self, a: p.SidecarShutdown) -> Deferred:
        """``sidecar.shutdown`` (DESIGN §3): no step begins from here (a later frame gets -32002);
        ``sidecar serve`` sees :attr:`shutdown_requested` and closes; :meth:`goodbye` answers."""
        self.executor.stop()
        answer = Deferred()
        self._shutdown_answers.append(answer)
        self.shutdown_requested.set()
        return answer

    async def _status(self, a: p.Status) -> dict:
        return self.status()

    async def _platform_event(self, a: p.PlatformEvent) -> dict:
        return _event_answer(await self.step(self._event_step(a)))

    def _event_step(self, a: p.PlatformEvent) -> Callable[[Step], Any]:
        """``platform.event``'s step (alone, or one of a wall-clock group)."""
        return partial(self.engine.platform_event, tu=a.tu, project=a.project, name=a.name, data=a.data)

    def _require_clock(self) -> None:
        if isinstance(self.clock, VirtualClock) and not self.clock.is_set:
            raise InvalidParams("virtual clock not set: send clock.advance_to first", data={"field": "params"})

    # steps ------------------------------------------------------------------------------------
    async def step(self, fn: Callable[[Step], Any]) -> Any:
        """Run ``fn`` as one step under the lock (the executor's rules); a failed step is a
        -32603 answer and stops the process (crash-only, module rules)."""
        try:
            return await self.executor.step(fn)
        except StepFailed as exc:
            raise InternalError(str(exc)) from exc
        except Stopping:
            raise ShuttingDown(SHUTTING_DOWN) from None

    async def _step_locked(self, fn: Callable[[Step], Any], now: float | None = None) -> Any:
        try:
            return await self.executor.run(fn, now)
        except StepFailed as exc:
            raise InternalError(str(exc)) from exc
        except Stopping:
            raise ShuttingDown(SHUTTING_DOWN) from None

    # executor ports -----------------------------------------------------------------------------
    async def commit(self, ops: list) -> None:
        await self.store.commit(ops)

    def notify(self, method: str, note: Any) -> None:
        self._send(method, to_wire(method, note))

    def _send(self, method: str, wire: Any) -> None:
        """Every note to Electron — a step's, the router's ``delivery``, ``sender.state`` —
        goes out here, so :attr:`EventBatches.last_seq` knows the stream's last seq this process
        sent."""
        self.batches.last_seq = self.bridge.notify(method, wire)

    def step_done(self) -> None:
        batches = self.batches
        if batches.step_seqs is not None:  # platform.events: where this step's effects end
            batches.step_seqs[self.executor.steps] = batches.last_seq
        if not self.clock.virtual:
            self.clockwork.step_done_wall()

    def outbox_queued(self, at: float, channels: frozenset[str] | None = None) -> None:
        # the delivery timer fires at ``at`` for every target but Stack, at its flush instant
        # for Stack's writes (sidecar.router.cadence), or sooner
        self.engine.outbox_at(self.routing.queued(at, channels))

    def outbox_due(self, at: float) -> None:
        self.deliveries.due()

    def step_failed(self, exc: BaseException) -> None:
        log.critical("a step failed; nothing of it was committed or sent; stopping so that a "
                     "restart restores from SQLite and Stack", exc_info=exc)
        self.fatal.set()

    async def perform(self, req: Request) -> tuple[Any, str | None]:
        """One ``platform.request`` (:mod:`sidecar.app.requests`) or its pushed answer."""
        pushed, result = self.pushed.take(req)
        if pushed:
            return result, None
        return await self.asker.one(app_requests.params_of(req, self.batches.seen, self.batches.skipped))

    async def perform_many(self, reqs: list[Request]) -> list[tuple[Any, str | None]]:
        """One step's requests in one ``platform.requests`` round trip, or their pushed answers."""
        return await self.pushed.perform_many(reqs, self.perform, lambda rs: self.asker.many(
            [app_requests.params_of(r, self.batches.seen, self.batches.skipped) for r in rs]))

    # status -----------------------------------------------------------------------------------
    def status(self) -> dict:
        return {"version": __version__, "protocol": PROTOCOL_MAJOR,
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
