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
  runs with ``now`` = its due time), pumps the outbox at its due times too, and answers only when
  everything up to ``t`` has run.  Wall clock: a ticker task sleeps until the next due timer.
* Stack writes leave only through the outbox pump; a Stack outage never blocks a step.  On the
  wall clock the pump is its own task beside the steps (a slow Stack delays only Stack); on the
  virtual clock it runs at the end of each advance, so a replay stays deterministic.
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
"""
from __future__ import annotations

import asyncio
import logging
import math
from urllib.parse import unquote
from typing import Any, Callable

import msgspec

from bridge import BridgeServer
from bridge.errors import InternalError, InvalidParams, MethodNotFound, RpcError, error_text
from platform_clients import BadRawEvent, UnknownRawEvent, client_for
from sidecar import PROTOCOL_VERSION, __version__
from sidecar import protocol as p
from sidecar.aio import bounded, cancel_all, wait_event
from sidecar.config import Settings
from sidecar.core.clock import Clock, ScaledClock, VirtualClock, WallClock
from sidecar.core.rng import KeyedRandom
from sidecar.decisions import why_answer
from sidecar.engine import Engine, EngineError
from sidecar.factory import task_view
from sidecar.services import default_services
from sidecar.services.base import Request, Step
from sidecar.stack.client import StackClient, seg
from sidecar.stack.errors import StackError
from sidecar.stack.outbox import OutboxPump
from sidecar.stack.startup import parse_startup
from sidecar.store.db import Store
from sidecar.tu import TuRuntime

log = logging.getLogger("sidecar.app")

EXIT_STEP_FAILED = 6  # a step could not commit (or crashed): restart restores from SQLite and Stack
REFUSALS = (EngineError, BadRawEvent, UnknownRawEvent, RpcError)  # raised before any change

HISTORY_WINDOW_S = 2 * 86400.0  # local task history loaded at login (restore input)
STATE_SCOPES = ("passes", "contact")  # durable service state loaded at login
MAX_FIRES_PER_ADVANCE = 10_000  # timers one clock.advance_to may run (then -32602 with "now")
CLOSE_BUDGET_S = 1.5  # seconds SidecarApp.close may take at most (the sum of its stage deadlines)


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
        self.pump = (OutboxPump(store, self.stack, concurrency=settings.stack_concurrency)
                     if self.stack else None)
        self.bridge = BridgeServer(settings.resolved_token(), self.handle, host=settings.host,
                                   port=settings.port, max_frame=settings.max_frame,
                                   allowed_origins=settings.allowed_origins)
        self._lock = asyncio.Lock()  # one step at a time
        self._outbox_due: float | None = None  # earliest outbox row to try, None = nothing queued
        self._wake = asyncio.Event()  # wall clock: a timer became due sooner
        self._pump_kick = asyncio.Event()  # wall clock: outbox rows were queued
        self._bg: set[asyncio.Task] = set()  # background tasks (wall-clock requests, ticker)
        self.acked = 0  # Stack writes acknowledged (status)
        # registered read-only methods (DESIGN §13): params Struct -> answer, no step, no clock
        self.methods: dict[str, Callable[[Any], Any]] = {
            "why": lambda a: why_answer(self.store, a),
        }
        self.failed: BaseException | None = None  # the step failure that stopped this process
        self.fatal = asyncio.Event()  # set with ``failed``: ``sidecar serve`` exits EXIT_STEP_FAILED

    # lifecycle --------------------------------------------------------------------------------
    async def start(self) -> int:
        self._outbox_due = await self.store.outbox_next_due()
        port = await self.bridge.start()
        if not self.clock.virtual:
            self._spawn(self._ticker())
            if self.pump is not None:
                self._spawn(self._pump_loop())
        return port

    async def close(self) -> None:
        """Stop everything within :data:`CLOSE_BUDGET_S` seconds in every state (issue 7):
        each stage has its own deadline, and a stage that overruns is logged and left behind —
        the process exits anyway (``sidecar.cli`` enforces the hard limit)."""
        await cancel_all(self._bg, 0.3, "background tasks")
        await bounded(self.bridge.close(grace=0.3), 0.6, "bridge close")
        if self.pump is not None and self._outbox_due is not None and self._now_or_none() is not None:
            # flush what we can (DESIGN §3); anything left stays queued for the next start
            res = await bounded(self.pump.run_due(self.clock.now()), 0.4, "outbox flush at exit")
            if res is not None:
                self.acked += len(res.acked)
        if self.stack is not None:
            await bounded(self.stack.close(), 0.2, "Stack client close")

    def _now_or_none(self) -> float | None:
        try:
            return self.clock.now()
        except RuntimeError:
            return None

    # bridge handler ---------------------------------------------------------------------------
    async def handle(self, method: str, params: Any) -> Any:
        typ = p.INBOUND.get(method)
        if typ is None or method in ("auth", "stream.ack"):
            raise MethodNotFound(f"unknown method {method!r}")
        try:
            args = msgspec.convert(params if params is not None else {}, typ)
        except msgspec.ValidationError as exc:
            raise InvalidParams(f"{method}: {exc}") from None
        if self.failed is not None:
            raise InternalError(f"the sidecar stopped after a failed step ({self.failed!r}); "
                                f"it must be restarted")
        try:
            result = await self._dispatch(method, args)
        except (EngineError, BadRawEvent, UnknownRawEvent) as exc:
            raise InvalidParams(error_text(exc)) from None
        if self.clock.virtual and isinstance(result, dict):
            # the driver of a virtual clock may jump straight to this instant: nothing the
            # sidecar does on its own happens before it (timers, outbox retries)
            result["next_due"] = self.next_due()
        return result

    def next_due(self) -> float | None:
        """The earliest instant the sidecar acts by itself — a timer or an outbox retry — or
        None.  Rows queued for now are not counted: the next advance, whenever it comes, sends
        them."""
        now = self._now_or_none()
        retry = self._outbox_due if (self._outbox_due is not None and now is not None
                                     and self._outbox_due > now) else None
        dues = [d for d in (self.engine.scheduler.next_due(), retry) if d is not None]
        return min(dues, default=None)

    async def _dispatch(self, method: str, a: Any) -> Any:
        registered = self.methods.get(method)
        if registered is not None:
            return await registered(a)
        if method == "clock.advance_to":
            return await self.advance_to(a.t)
        if method == "status":
            return self.status()
        self._require_clock()
        if method == "session.login":
            return await self.login(a)
        if method == "session.logout":
            await self.step(lambda s: self.engine.logout(s, a.tu))
            return {"ok": True}
        if method == "platform.event":
            n = await self.step(lambda s: self.engine.platform_event(s, a.tu, a.project, a.name, a.data))
            return {"ok": True, "events": n}
        if method == "platform.reconnected":
            await self.step(lambda s: self.engine.reconnected(s, a.tu))
            return {"ok": True}
        if method == "platform.poll":
            return await self.poll(a)
        if method == "favorite.update":
            changes = {k: v for k, v in msgspec.structs.asdict(a).items()
                       if k not in ("tu", "ru", "project") and v is not None}
            await self.step(lambda s: self.engine.favorite_update(s, a.tu, a.ru, changes))
            return {"ok": True}
        if method == "task.close":
            closed = await self.step(lambda s: self.engine.task_close(s, a.task_id, a.reason))
            return {"ok": True, "closed": closed}
        if method == "tasks.list":
            return [task_view(t) for t in self.engine.open_tasks(a.tu)]
        raise MethodNotFound(f"unknown method {method!r}")

    def _require_clock(self) -> None:
        if isinstance(self.clock, VirtualClock) and not self.clock.is_set:
            raise InvalidParams("virtual clock not set: send clock.advance_to first")

    # steps ------------------------------------------------------------------------------------
    async def step(self, fn: Callable[[Step], Any]) -> Any:
        """Run ``fn`` as one step under the lock and carry out its effects."""
        async with self._lock:
            return await self._step_locked(fn)

    async def _step_locked(self, fn: Callable[[Step], Any], now: float | None = None) -> Any:
        if self.failed is not None:
            raise InternalError("the sidecar stopped after a failed step; it must be restarted")
        step = Step(now=self.clock.now() if now is None else now)
        try:
            result = fn(step)
        except REFUSALS:
            raise  # raised before anything changed
        except Exception as exc:  # noqa: BLE001 - memory may be half-changed: crash-only
            self._fail(exc)
            raise InternalError(f"internal error: {type(exc).__name__}") from exc
        await self._finish(step)
        return result

    def _fail(self, exc: BaseException) -> None:
        """Stop taking steps; ``sidecar serve`` exits EXIT_STEP_FAILED (module rules)."""
        if self.failed is None:
            log.critical("a step failed; nothing of it was committed or sent; stopping so that a "
                         "restart restores from SQLite and Stack", exc_info=exc)
            self.failed = exc
            self.fatal.set()

    async def _finish(self, step: Step) -> None:
        if step.ops:
            try:
                await self.store.commit(step.ops)
            except Exception as exc:  # noqa: BLE001 - StoreError or worse: crash-only
                self._fail(exc)
                raise InternalError("a step could not be saved; the sidecar must be restarted") from exc
        for method, params in step.notes:
            self.bridge.notify(method, params)
        if step.outbox:
            if self._outbox_due is None or self._outbox_due > step.now:
                self._outbox_due = step.now
            self._pump_kick.set()
        for rt, req in step.requests:
            if self.clock.virtual:
                result, error = await self._platform_request(rt, req)
                await self._step_locked(lambda s: self.engine.request_done(s, rt, req, result, error))
            else:
                self._spawn(self._request_bg(rt, req))
        if not self.clock.virtual:
            self._wake.set()

    async def _platform_request(self, rt: TuRuntime, req: Request) -> tuple[Any, str | None]:
        params = p.PlatformRequest(project=rt.project, tu=rt.tu, method=req.method, params=req.params)
        try:
            res = await self.bridge.request("platform.request", params,
                                            timeout=self.settings.request_timeout_s)
            return res, None
        except Exception as exc:  # noqa: BLE001 - any failure is an answer: the pass retries later
            return None, f"{type(exc).__name__}: {exc}"

    async def _request_bg(self, rt: TuRuntime, req: Request) -> None:
        result, error = await self._platform_request(rt, req)
        try:
            await self.step(lambda s: self.engine.request_done(s, rt, req, result, error))
        except InternalError:
            pass  # crash-only: the failure is logged once and ``fatal`` ends the process

    # time -------------------------------------------------------------------------------------
    async def advance_to(self, t: float) -> dict:
        """Virtual clock: run everything due up to ``t`` (unix seconds) in order."""
        if not isinstance(self.clock, VirtualClock):
            raise InvalidParams("clock.advance_to needs --clock virtual")
        if not math.isfinite(t):
            raise InvalidParams("t must be a finite number of unix seconds")
        async with self._lock:
            clock = self.clock
            if not clock.is_set:
                clock.advance_to(t)
            # Timers run one step each, in due order, at their own instants.  The outbox is
            # pumped once at the end, with everything queued meanwhile in flight together: the
            # Stack round trips dominate a replay, and a write's delivery instant is not part of
            # the domain (markers are applied locally at once; Stack sees them by ``t``).
            fired = 0
            while (nxt := self.engine.scheduler.next_due()) is not None and nxt <= t:
                if fired >= MAX_FIRES_PER_ADVANCE:
                    # a far-future target must not hold the one worker (and every frame behind
                    # it) for minutes: everything so far is committed, the client continues
                    raise InvalidParams(
                        f"clock.advance_to: more than {MAX_FIRES_PER_ADVANCE} timers are due "
                        f"before t; ran them up to {clock.now()}. Advance in smaller steps",
                        data={"now": clock.now(), "next_due": self.next_due()})
                clock.advance_to(nxt)
                await self._step_locked(self.engine.fire, now=max(nxt, clock.now()))
                fired += 1
                if fired % 64 == 0:
                    if not self.bridge.connected:
                        # nobody to answer platform requests or to receive the result: stop;
                        # every step so far is committed, the rest stays due for the next advance
                        raise InvalidParams("the client disconnected during clock.advance_to")
                    await asyncio.sleep(0)  # noqa: TID251 - a yield, not a wait: a long advance must not starve signals and reads
            clock.advance_to(t)
            if self._outbox_due is not None and self._outbox_due <= t:
                await self._pump_locked()
            return {"now": clock.now()}

    async def _pump_locked(self) -> None:
        if self.pump is None:
            self._outbox_due = None
            return
        res = await self.pump.run_due(self.clock.now())
        self.acked += len(res.acked)
        self._outbox_due = res.next_due

    async def _ticker(self) -> None:
        """Wall clock: fire due timers and outbox rows; sleep until the next one or a wake."""
        while self.failed is None:
            async with self._lock:
                now = self.clock.now()
                while (nd := self.engine.scheduler.next_due()) is not None and nd <= now:
                    try:
                        await self._step_locked(self.engine.fire, now=now)
                    except InternalError:
                        return  # crash-only: ``fatal`` is set, serve exits (module rules)
                nd = self.engine.scheduler.next_due()
                wait = (now + 60.0 if nd is None else nd) - self.clock.now()
            self._wake.clear()
            await wait_event(self._wake, self.clock.real_delay(wait))

    async def _pump_loop(self) -> None:
        """Wall clock: send queued Stack writes whenever rows are due, outside the step lock."""
        assert self.pump is not None  # started only with a Stack
        while True:
            now = self.clock.now()
            due = self._outbox_due
            if due is not None and due <= now:
                self._pump_kick.clear()
                try:
                    res = await self.pump.run_due(now)
                except Exception:  # noqa: BLE001 - keep pumping; rows stay queued
                    log.exception("outbox pump failed")
                    self._outbox_due = now + 5.0
                    continue
                self.acked += len(res.acked)
                if self._pump_kick.is_set():  # rows were queued while this pass ran
                    dues = [d for d in (res.next_due, self._outbox_due) if d is not None]
                    self._outbox_due = min(dues, default=None)
                else:
                    self._outbox_due = res.next_due
                continue
            wait = 60.0 if due is None else due - now
            await wait_event(self._pump_kick, self.clock.real_delay(wait))

    # sessions ---------------------------------------------------------------------------------
    async def login(self, a: p.SessionLogin) -> dict:
        try:
            client_for(a.project)  # before any I/O
        except KeyError as exc:
            raise InvalidParams(error_text(exc)) from None
        startup = None
        if self.stack is not None:
            try:
                async with asyncio.timeout(self.settings.stack_startup_timeout_s):
                    raw = await self.stack.startup(a.tu)
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
        pending = await self._pending_markers(a.tu)
        state = {scope: await self.store.states(a.tu, scope) for scope in STATE_SCOPES}
        await self.step(lambda s: self.engine.login(
            s, a.tu, a.project, a.operator, startup=startup, local_favorites=favorites,
            local_tasks=tasks, pending_markers=pending, local_state=state))
        rt = self.engine.tus[a.tu]
        return {"ok": True, "favorites": len(rt.favorites), "restored_from_stack": startup is not None,
                "open_tasks": len(self.engine.factory.open_of_tu(a.tu))}

    async def _pending_markers(self, tu: str) -> dict[tuple[str, str], Any]:
        """Unacknowledged marker writes of ``tu``, newest per (ru, name) (DESIGN §9 precedence)."""
        out: dict[tuple[str, str], Any] = {}
        prefix = f"/v1/tus/{seg(tu)}/favorites/"
        for row in await self.store.outbox_rows():
            if row.kind == "marker" and row.path.startswith(prefix):
                ru, _, name = row.path[len(prefix):].partition("/markers/")
                out[(unquote(ru), unquote(name))] = msgspec.json.decode(row.body).get("value")
        return out

    async def poll(self, a: p.PlatformPoll) -> dict:
        """Electron pushed a poll result itself: handled like the answer to our own request."""
        rt = self.engine.tus.get(a.tu)
        if rt is None or not rt.logged_in:
            raise InvalidParams(f"TU {a.tu!r} is not logged in")
        try:
            pass_ = rt.client.pass_named(a.pass_)
        except KeyError:
            raise InvalidParams(f"{rt.project} has no pass {a.pass_!r}") from None
        req = Request("passes", pass_.method, dict(pass_.params), pass_.name)
        await self.step(lambda s: self.engine.request_done(s, rt, req, a.data, None))
        return {"ok": True}

    def status(self) -> dict:
        return {"version": __version__, "protocol": PROTOCOL_VERSION,
                "clock": "virtual" if self.clock.virtual else "wall", "now": self._now_or_none(),
                "tus": sorted(self.engine.tus), "open_tasks": len(self.engine.factory.open),
                "timers": len(self.engine.scheduler), "events_in": self.engine.events_in,
                "stack_acked": self.acked, "outbox_due": self._outbox_due}

    def _spawn(self, coro) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._bg.add(task)
        task.add_done_callback(self._bg.discard)
