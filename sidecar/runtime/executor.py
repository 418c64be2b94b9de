"""The ONE step executor (DESIGN §5, §13): run a step, commit it, then notify, then request.

Rule 1.  ``run(fn, now)`` builds a :class:`~sidecar.runtime.step.Step`, lets ``fn`` (an engine input)
         fill it, then carries out its effects in this order, always:

         0. **route** its events (``step.events``, DESIGN §10): the router (``router.decide``) turns
            them into delivery rows whose ops join the step's ops;
         1. **commit** its store ops in ONE transaction (``ports.commit``); only then does the router
            learn what it decided (``router.apply``: dedup keys, throttle windows, event numbers);
         2. **notify** Electron of its notes (``ports.notify``) — only after the commit, so Electron
            never sees a task a crash could lose;
         3. tell the delivery pump it has rows (``ports.outbox_queued``) when routing made pending ones;
         4. make its platform **requests**: inline (the answer is the next step, at once — the virtual
            clock, so a replay is deterministic) or handed to ``ports.spawn`` (the wall clock: a slow
            platform scroll never holds up socket events); each answer is its own step.  Inline, the
            requests of one step are asked together (``ports.perform_many``, one round trip, when the
            ports have it) and their answers then run as steps in request order —
            the same steps as asking one by one, because an answer depends on the world at the
            asking step's instant (``Request.at``), not on the answer steps before it.
Rule 2.  ``fire_due(t)`` runs every timer due up to ``t`` (unix seconds) in due order, one step each at
         its own instant — the virtual clock's ``clock.advance_to`` and the wall clock's ticker both
         use it.
Rule 3.  **Group commit**: inside ``async with executor.group():`` the steps of one
         advance or one batch still run one at a time, each deciding on the memory the step before left,
         but their ops are committed together — ONE ``ports.commit`` (one SQLite transaction, one thread
         hop) when the group ends or :meth:`flush` is called, in step order, so SQLite holds exactly
         what one commit per step would have left.  Each step's routing is decided before that commit
         on top of the group's earlier routings (``router.decide(..., after)``: their dedup keys,
         throttle windows, event numbers, as if applied) and applied after it, step by step.  Until
         then nothing a step did leaves the process: the router's ``apply`` (and the ``delivery`` notes
         it sends), the step's notes (``sender.state`` among them), its "delivery due" and (wall
         clock) its background requests wait for the group's commit, then run per step in the order
         one commit per step would have run them; only two things happen at once because nothing
         outside sees them — the delivery timer is armed in the one scheduler
         (``ports.outbox_queued``), and on the virtual clock a step's platform requests are made
         inline (a read of the platform; its answer is the next step of the same group).  A failed
         group commit is a failed step (crash-only, below): nothing of any step of the group reaches
         SQLite, Electron, Stack or a target, and the router never learns of its routings.  Whoever
         lets other code observe memory (a yield) or reads SQLite (the delivery pump) flushes first.
         At shutdown a group behaves as its steps would alone: a step not begun is refused
         (:class:`Stopping`), the steps that ran are committed, a commit that meets the closing store
         is abandoned.
Rule 4.  **Crash-only** (DESIGN §13): the engine mutates memory while it decides, so a step that raises
         anything but a refusal (``refusals``: raised before anything changed), or whose commit fails,
         cannot be undone in place.  The executor then records :attr:`failed`, calls
         ``ports.step_failed`` once, sends nothing of that step, and refuses every later step with
         :class:`StepFailed`; the process exits and a restart restores from SQLite and Stack.
Rule 5.  **Shutdown refuses, never fails**: :meth:`StepExecutor.stop` marks the
         executor stopping; from then on every step that has not begun — a request from Electron, a
         platform answer, a timer, a pump pass's router events — is refused with :class:`Stopping`
         before anything changes, no platform request is started, and a step already under way whose
         commit then fails (the store closing beneath it) is abandoned, not failed: nothing of it was
         written, and the process is ending anyway.  Only a real failure sets :attr:`failed` (exit 6).
Rule 6.  The executor is sans-I/O in the python-websockets sense: it awaits only what its ports give it
         (:mod:`sidecar.runtime.ports`: the ports and the exceptions it raises) and imports no I/O
         library.  The app plugs in SQLite, the bridge and asyncio; the unit tests plug in lists
         and a platform stub (``tests/sidecar/driver.py``) — the same code runs in both.
"""
from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, NoReturn

from sidecar.core.clock import Clock
from sidecar.runtime.engine import Engine
from sidecar.runtime.ports import NoLock, Ports, RouterPort, StepFailed, Stopping, TooManyTimers
from sidecar.runtime.step import Request, Step


@dataclass(slots=True)
class _Done:
    """One step of the open group: what it leaves to carry out once the group has committed."""

    now: float
    routing: Any  # the router's decision (applied after the commit), or None
    notes: list[tuple[str, Any]]
    outbox_due: bool
    requests: list[Request] = field(default_factory=list)  # wall clock: spawned after the commit


@dataclass(slots=True)
class _Pending:
    """What the open group's steps left to carry out at its commit, in step order."""

    steps: list[_Done] = field(default_factory=list)
    ops: list = field(default_factory=list)
    routings: Any = field(default_factory=list)  # decided, not applied: later steps see them
    # (the router's ``ahead()``: appended to in order)


class StepExecutor:
    """Runs engine inputs as steps over ``ports``.

    ``spawn``: None runs requests inline (virtual clock); else it starts a coroutine beside the
    steps (wall clock).  ``lock``: an async context manager serialising steps (an
    ``asyncio.Lock`` in the app).  ``refusals``: exception types a step raises before it changes
    anything (they pass through untouched)."""

    def __init__(self, engine: Engine, clock: Clock, ports: Ports, *,
                 refusals: tuple[type[BaseException], ...] = (),
                 spawn: Callable[[Coroutine[Any, Any, None]], None] | None = None,
                 lock: Any = None, router: RouterPort | None = None) -> None:
        self.engine = engine
        self.router = router  # routes step.events; a step with events and no router fails
        self.clock = clock
        self.ports = ports
        self.refusals = refusals
        self.spawn = spawn
        self.lock = lock if lock is not None else NoLock()
        self.failed: BaseException | None = None  # the step failure that stopped this process
        self.steps = 0  # steps committed (status, tests)
        self.commits = 0  # ports.commit calls made (one per step with ops, or per group)
        self._pending: _Pending | None = None  # the open group's effects, None outside a group
        self.stopping = False  # set by stop(): no step begins any more (module rules)

    def stop(self) -> None:
        """Shutdown began: refuse every step that has not begun (:class:`Stopping`) and start no
        platform request.  Idempotent; there is no way back (the process is ending)."""
        self.stopping = True

    # one step ---------------------------------------------------------------------------------
    async def step(self, fn: Callable[[Step], Any]) -> Any:
        """Run ``fn`` as one step under the lock at the clock's ``now``."""
        if self.stopping:  # before the lock: close() keeps it to the end
            raise Stopping("the sidecar is shutting down; the step was not started")
        async with self.lock:
            return await self.run(fn)

    async def run(self, fn: Callable[[Step], Any], now: float | None = None) -> Any:
        """Run ``fn`` as one step (the caller holds the lock); see the module rules.
        Raises a refusal unchanged, :class:`Stopping` (shutdown began: nothing was done), or
        :class:`StepFailed`."""
        if self.failed is not None:
            raise StepFailed("the sidecar stopped after a failed step; it must be restarted")
        if self.stopping:
            raise Stopping("the sidecar is shutting down; the step was not started")
        step = Step(self.clock.now() if now is None else now)
        try:
            result = fn(step)
            routing = self._route(step) if step.events else None
        except self.refusals:
            raise  # raised before anything changed
        except Exception as exc:  # noqa: BLE001 - memory may be half-changed: crash-only
            self._fail(exc)
            raise StepFailed(f"internal error: {type(exc).__name__}") from exc
        pending = self._pending
        if pending is not None:
            await self._join(pending, step, routing)
            return result
        # a lone step (most platform events) is finished here, not in a coroutine of its own
        if step.ops:  # _commit, inlined likewise
            self.commits += 1
            try:
                await self.ports.commit(step.ops)
            except Exception as exc:  # noqa: BLE001 - StoreError or worse: crash-only
                self._commit_failed(exc)
        self._after_commit(step, routing)
        if step.requests:
            await self._requests(step.requests)
        self.ports.step_done()
        return result

    def _route(self, step: Step) -> Any:
        """The router's decision on ``step.events`` (the caller checks there are some)."""
        if self.router is None:
            raise RuntimeError("a step emitted routing events but the executor has no router")
        after = () if self._pending is None else self._pending.routings
        routing = self.router.decide(step.events, step.now, after)
        step.ops.extend(routing.ops())
        return routing

    def _fail(self, exc: BaseException) -> None:
        if self.failed is None:
            self.failed = exc
            self.ports.step_failed(exc)

    async def _commit(self, ops: list) -> None:
        """ONE transaction of a step's or a group's ops; on failure nothing of them may leave
        the process: the open group is dropped (its routings never applied), then crash-only —
        or, at shutdown, the store closed beneath it: abandoned, not failed (module rules)."""
        try:
            self.commits += 1
            await self.ports.commit(ops)
        except Exception as exc:  # noqa: BLE001 - StoreError or worse: crash-only
            self._commit_failed(exc)

    def _commit_failed(self, exc: Exception) -> NoReturn:
        """:meth:`_commit`'s failure (also :meth:`run`'s, which awaits the port itself)."""
        self._pending = None  # nothing of the group may leave the process
        if self.stopping:  # the store closed beneath it: nothing was written, we exit
            raise Stopping(f"the step was abandoned at shutdown ({exc!r})") from exc
        self._fail(exc)
        raise StepFailed("a step could not be saved; the sidecar must be restarted") from exc

    def _after_commit(self, step: Step, routing: Any) -> None:
        """A lone step is committed: the router applies, Electron is told, the pump hears of
        its rows and of a delivery timer that fired (module rules 1.1–1.3)."""
        self._committed(routing, step.notes)
        if routing is not None and routing.pending:
            self.ports.outbox_queued(step.now, routing.channels)
        if step.outbox_due:
            self.ports.outbox_due(step.now)

    async def _requests(self, requests: list[Request]) -> None:
        """A committed lone step's platform requests (module rule 1.4): inline on the virtual
        clock, else each spawned beside the steps (none once shutdown began)."""
        if self.spawn is None:
            await self._inline(requests)
            return
        for req in requests:
            if self.stopping:
                break  # no new platform request at shutdown (its pass retries after a restart)
            self.spawn(self._request_bg(req))

    def _committed(self, routing: Any, notes: list[tuple[str, Any]]) -> None:
        """A step's ops are committed: the router learns what it decided (only now: decide /
        evolve, so a failed commit leaves it as it was), then Electron gets the step's notes."""
        if routing is not None:
            assert self.router is not None
            self.router.apply(routing)
        self.steps += 1
        for method, note in notes:
            self.ports.notify(method, note)

    # group commit -------------------------------------------------------------------------------
    @asynccontextmanager
    async def group(self) -> AsyncIterator[None]:
        """Run the steps inside as one commit group (module rules); the caller holds the lock.
        Committed when the block ends normally or with a refusal, :class:`Stopping` or a
        cancelled yield (the steps that ran stand, as each would have been committed alone); a
        :class:`StepFailed` inside leaves nothing of the group.  Nested groups join the outer one."""
        if self._pending is not None:
            yield
            return
        self._pending = self._new_pending()
        try:
            yield
        except StepFailed:
            self._pending = None
            raise
        except BaseException:
            if self._pending is not None and self.failed is None:
                await self.flush()  # a refusal, Stopping or a cancelled yield: the steps before it stand
            self._pending = None
            raise
        try:
            await self.flush()
        finally:
            self._pending = None

    async def flush(self) -> None:
        """Commit the open group's steps so far in ONE transaction, then carry out, step by step
        in order, what waited for it — exactly what each step's own commit would have been
        followed by: the router's ``apply`` of its routing, its notes, its outbox "due", its
        background requests (wall clock; none at shutdown), ``step_done``.  No-op outside a group
        or when it has nothing.  Raises :class:`StepFailed` (nothing of the group was written or
        applied; crash-only) or, at shutdown, :class:`Stopping`."""
        pending = self._pending
        if pending is None or not pending.steps:
            return
        self._pending = self._new_pending()
        if pending.ops:
            await self._commit(pending.ops)
        for done in pending.steps:
            self._committed(done.routing, done.notes)
            if done.outbox_due:
                self.ports.outbox_due(done.now)
            for req in done.requests:
                if self.stopping:
                    break  # no new platform request at shutdown
                assert self.spawn is not None  # only the wall clock defers requests
                self.spawn(self._request_bg(req))
            self.ports.step_done()

    def _new_pending(self) -> _Pending:
        return _Pending(routings=self.router.ahead() if self.router is not None else [])

    def pending_steps(self) -> int:
        """Steps of the open group not committed yet (0 outside a group)."""
        return 0 if self._pending is None else len(self._pending.steps)

    def outbox_due_pending(self) -> bool:
        """The delivery timer fired in the open group (``ports.outbox_due`` waits for its
        commit): flush before the delivery pump reads SQLite."""
        return self._pending is not None and any(d.outbox_due for d in self._pending.steps)

    async def _join(self, pending: _Pending, step: Step, routing: Any) -> None:
        done = _Done(step.now, routing, step.notes, step.outbox_due)
        pending.steps.append(done)
        pending.ops += step.ops
        if routing is not None:
            pending.routings.append(routing)
            if routing.pending:  # in memory: the one scheduler's delivery timer, due in this group
                self.ports.outbox_queued(step.now, routing.channels)
        if self.spawn is None:  # virtual clock: the answers are the group's next steps
            if step.requests:
                await self._inline(step.requests)
        else:
            done.requests += step.requests

    async def _inline(self, requests: list[Request]) -> None:
        """Virtual clock: make a step's requests and run each answer as a step, in order —
        together in one round trip when the ports can (module rules).  None at shutdown (its
        pass retries after a restart)."""
        many = getattr(self.ports, "perform_many", None)
        if many is not None and len(requests) > 1 and not self.stopping:
            outcomes = await many(requests)
        else:
            outcomes = None
        for i, req in enumerate(requests):
            if self.stopping:
                break  # no new platform request (or answer step) at shutdown
            outcome = outcomes[i] if outcomes is not None else None
            if not await self._answer_inline(req, outcome):
                break

    async def _answer_inline(self, req: Request, outcome: tuple[Any, str | None] | None = None) -> bool:
        """Virtual clock: make ``req`` (unless ``outcome``: it was asked together with its step's
        other requests) and run its answer as the next step; False when shutdown
        began meanwhile and refused that step.  The step that asked is committed (or joined
        its group) already, so that refusal is not its own: the answer is dropped as the wall
        clock's background request drops it (its pass asks again after a restart), and the
        caller's result stands — it must not read "nothing was done"."""
        result, error = outcome if outcome is not None else await self.ports.perform(req)
        try:
            await self.run(self._answer(req, result, error))
        except Stopping:
            return False
        return True

    def _answer(self, req: Request, result: Any, error: str | None) -> Callable[[Step], None]:
        return lambda s: self.engine.request_done(s, req, result, error)

    async def _request_bg(self, req: Request) -> None:
        result, error = await self.ports.perform(req)
        try:
            await self.step(self._answer(req, result, error))
        except (StepFailed, Stopping):
            pass  # crash-only (reported once) or shutdown (refused): the process is ending

    # time -------------------------------------------------------------------------------------
    def due(self, t: float) -> bool:
        """Whether a timer is due at or before ``t``: :meth:`fire_due` would run one.  A sync
        check its callers make first — most advances have nothing due, and a coroutine made
        and run to say so costs more than the look (docs/decisions.md "i24-eng4")."""
        nxt = self.engine.scheduler.next_due()
        return nxt is not None and nxt <= t

    async def fire_due(self, t: float, *, advance_clock: Callable[[float], object] | None = None,
                       limit: int | None = None,
                       every: tuple[int, Callable[[], Awaitable[None]]] | None = None,
                       after_each: Callable[[], Awaitable[None]] | None = None) -> int:
        """Run every timer due at or before ``t`` in due order, each its own step at
        ``max(due, now)`` (the caller holds the lock).  ``advance_clock`` moves a virtual clock to
        each due instant first.  ``limit``: raise :class:`TooManyTimers` before the timer past
        it.  ``after_each``: awaited after every timer, inside the group (it calls :meth:`flush`
        itself before it reads SQLite or lets other code look, e.g. to send what the delivery
        timer made due at that instant).  ``every = (n, hook)``: await ``hook()`` after every
        ``n`` timers (a yield; it may raise to stop).  The timers form one commit group
        (:meth:`group`), flushed before each ``hook`` and at the end — also when a limit or a
        hook stops it: every step that ran is committed.  Returns how many timers ran."""
        fired = 0
        scheduler = self.engine.scheduler
        nxt = scheduler.next_due()
        if nxt is None or nxt > t:
            return 0  # nothing due (most advances): a group of no steps would commit nothing
        async with self.group():
            while (nxt := scheduler.next_due()) is not None and nxt <= t:
                if limit is not None and fired >= limit:
                    raise TooManyTimers(fired)
                if advance_clock is not None:
                    advance_clock(nxt)
                await self.run(self.engine.fire, now=max(nxt, self.clock.now()))
                fired += 1
                if after_each is not None:
                    await after_each()
                if every is not None and fired % every[0] == 0:
                    await self.flush()  # the hook may let other code look: commit first
                    await every[1]()
        return fired

