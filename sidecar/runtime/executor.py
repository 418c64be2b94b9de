"""The ONE step executor (DESIGN §5, §13): run a step, commit it, then notify, then request.

Rules / theory of operation
---------------------------
* ``run(fn, now)`` builds a :class:`~sidecar.runtime.step.Step`, lets ``fn`` (an engine input)
  fill it, then carries out its effects in this order, always:

  1. **commit** its store ops in ONE transaction (``ports.commit``);
  2. **notify** Electron of its notes (``ports.notify``) — only after the commit, so Electron
     never sees a task a crash could lose;
  3. tell the outbox it has rows (``ports.outbox_queued``) when the step enqueued any;
  4. make its platform **requests**: inline (the answer is the next step, at once — the virtual
     clock, so a replay is deterministic) or handed to ``ports.spawn`` (the wall clock: a slow
     platform scroll never holds up socket events); each answer is its own step.

* ``fire_due(t)`` runs every timer due up to ``t`` (unix seconds) in due order, one step each at
  its own instant — the virtual clock's ``clock.advance_to`` and the wall clock's ticker both
  use it.
* **Group commit** (issue 11 item 4): inside ``async with executor.group():`` the steps of one
  advance or one batch still run one at a time, each deciding on the memory the step before left,
  but their ops are committed together — ONE ``ports.commit`` (one SQLite transaction, one thread
  hop) when the group ends or :meth:`flush` is called, in step order, so SQLite holds exactly
  what one commit per step would have left.  Until then nothing a step did leaves the process:
  its notes, its "outbox due" and (wall clock) its background requests wait for the group's
  commit; only two things happen at once because nothing outside sees them — the outbox timer
  is armed in the one scheduler (``ports.outbox_queued``), and on the virtual clock a step's
  platform requests are made inline (a read of the platform; its answer is the next step of the
  same group).  A failed group commit is a failed step (crash-only, below): nothing of any step
  of the group reaches SQLite, Electron or Stack.  Whoever lets other code observe memory (a
  yield, the Stack pump reading the outbox) flushes first.
* **Crash-only** (DESIGN §13): the engine mutates memory while it decides, so a step that raises
  anything but a refusal (``refusals``: raised before anything changed), or whose commit fails,
  cannot be undone in place.  The executor then records :attr:`failed`, calls
  ``ports.step_failed`` once, sends nothing of that step, and refuses every later step with :class:`StepFailed`; the
  process exits and a restart restores from SQLite and Stack.
* The executor is sans-I/O in the python-websockets sense: it awaits only what its ports give it
  and imports no I/O library.  The app plugs in SQLite, the bridge and asyncio; the unit tests
  plug in lists and a platform stub (``tests/sidecar/driver.py``) — the same code runs in both.
"""
from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

from sidecar.core.clock import Clock
from sidecar.runtime.engine import Engine
from sidecar.runtime.step import Request, Step


class StepFailed(Exception):
    """A step crashed or could not be committed; the process must restart (exit 6)."""


class TooManyTimers(Exception):
    """``fire_due`` ran its ``limit`` of timers; everything so far is committed."""


class Ports(Protocol):
    """The I/O the executor needs; every call is made in the order of the module rules."""

    async def commit(self, ops: list) -> None:
        """Apply ``ops`` in one transaction (raise on failure: nothing was written)."""

    def notify(self, method: str, note: Any) -> None:
        """Send one note to Electron (after the commit)."""

    def outbox_due(self, at: float) -> None:
        """The outbox timer (:data:`~sidecar.runtime.engine.OUTBOX_TIMER`) fired at ``at``:
        send what is due."""

    def outbox_queued(self, at: float) -> None:
        """The step enqueued Stack writes due at ``at``."""

    async def perform(self, request: Request) -> tuple[Any, str | None]:
        """Make one platform request: ``(result, None)`` or ``(None, error text)``."""

    def step_failed(self, exc: BaseException) -> None:
        """A step failed (called once): stop the process (crash-only)."""

    def step_done(self) -> None:
        """A step's effects are carried out (its requests started): e.g. wake a ticker."""


@dataclass(slots=True)
class _Pending:
    """What the open group's steps left to carry out at its commit."""

    steps: int = 0
    ops: list = field(default_factory=list)
    notes: list[tuple[str, Any]] = field(default_factory=list)
    outbox_due: float | None = None  # instant of the last step whose outbox timer fired
    requests: list[Request] = field(default_factory=list)  # wall clock: spawned after the commit


class NoLock:
    """The lock of a single-caller executor (tests, one coroutine at a time)."""

    async def __aenter__(self) -> None:
        return None

    async def __aexit__(self, *exc: object) -> None:
        return None


class StepExecutor:
    """Runs engine inputs as steps over ``ports``.

    ``spawn``: None runs requests inline (virtual clock); else it starts a coroutine beside the
    steps (wall clock).  ``lock``: an async context manager serialising steps (an
    ``asyncio.Lock`` in the app).  ``refusals``: exception types a step raises before it changes
    anything (they pass through untouched)."""

    def __init__(self, engine: Engine, clock: Clock, ports: Ports, *,
                 refusals: tuple[type[BaseException], ...] = (),
                 spawn: Callable[[Coroutine[Any, Any, None]], None] | None = None,
                 lock: Any = None) -> None:
        self.engine = engine
        self.clock = clock
        self.ports = ports
        self.refusals = refusals
        self.spawn = spawn
        self.lock = lock if lock is not None else NoLock()
        self.failed: BaseException | None = None  # the step failure that stopped this process
        self.steps = 0  # steps committed (status, tests)
        self.commits = 0  # ports.commit calls made (one per step with ops, or per group)
        self._pending: _Pending | None = None  # the open group's effects, None outside a group

    # one step ---------------------------------------------------------------------------------
    async def step(self, fn: Callable[[Step], Any]) -> Any:
        """Run ``fn`` as one step under the lock at the clock's ``now``."""
        async with self.lock:
            return await self.run(fn)

    async def run(self, fn: Callable[[Step], Any], now: float | None = None) -> Any:
        """Run ``fn`` as one step (the caller holds the lock); see the module rules.
        Raises a refusal unchanged, or :class:`StepFailed`."""
        if self.failed is not None:
            raise StepFailed("the sidecar stopped after a failed step; it must be restarted")
        step = Step(now=self.clock.now() if now is None else now)
        try:
            result = fn(step)
        except self.refusals:
            raise  # raised before anything changed
        except Exception as exc:  # noqa: BLE001 - memory may be half-changed: crash-only
            self._fail(exc)
            raise StepFailed(f"internal error: {type(exc).__name__}") from exc
        await self._finish(step)
        return result

    def _fail(self, exc: BaseException) -> None:
        if self.failed is None:
            self.failed = exc
            self.ports.step_failed(exc)

    async def _commit(self, ops: list) -> None:
        try:
            self.commits += 1
            await self.ports.commit(ops)
        except Exception as exc:  # noqa: BLE001 - StoreError or worse: crash-only
            self._pending = None  # nothing of the group may leave the process
            self._fail(exc)
            raise StepFailed("a step could not be saved; the sidecar must be restarted") from exc

    async def _finish(self, step: Step) -> None:
        pending = self._pending
        if pending is not None:
            await self._join(pending, step)
            return
        if step.ops:
            await self._commit(step.ops)
        self.steps += 1
        for method, note in step.notes:
            self.ports.notify(method, note)
        if step.outbox:
            self.ports.outbox_queued(step.now)
        if step.outbox_due:
            self.ports.outbox_due(step.now)
        for req in step.requests:
            if self.spawn is None:
                result, error = await self.ports.perform(req)
                await self.run(self._answer(req, result, error))
            else:
                self.spawn(self._request_bg(req))
        self.ports.step_done()

    # group commit -------------------------------------------------------------------------------
    @asynccontextmanager
    async def group(self) -> AsyncIterator[None]:
        """Run the steps inside as one commit group (module rules); the caller holds the lock.
        Committed when the block ends normally or with a refusal; a :class:`StepFailed` inside
        leaves nothing of the group.  Nested groups join the outer one."""
        if self._pending is not None:
            yield
            return
        self._pending = _Pending()
        try:
            yield
        except StepFailed:
            self._pending = None
            raise
        except BaseException:
            if self._pending is not None and self.failed is None:
                await self.flush()  # a refusal or a cancelled yield: the steps before it stand
            self._pending = None
            raise
        try:
            await self.flush()
        finally:
            self._pending = None

    async def flush(self) -> None:
        """Commit the open group's steps so far in one transaction, then carry out what waited
        for it: notes in step order, the outbox's "due", background requests, ``step_done``.
        No-op outside a group or when it has nothing."""
        pending = self._pending
        if pending is None or not pending.steps:
            return
        self._pending = _Pending()
        if pending.ops:
            await self._commit(pending.ops)
        self.steps += pending.steps
        for method, note in pending.notes:
            self.ports.notify(method, note)
        if pending.outbox_due is not None:
            self.ports.outbox_due(pending.outbox_due)
        for req in pending.requests:
            self.spawn(self._request_bg(req))  # type: ignore[misc]  # wall clock only
        self.ports.step_done()

    def pending_notes(self) -> int:
        """Notes of the open group not sent yet (0 outside a group): a caller marks where a step
        ended in the stream before the group commits."""
        return 0 if self._pending is None else len(self._pending.notes)

    def outbox_due_pending(self) -> bool:
        """The outbox timer fired in the open group (``ports.outbox_due`` waits for its commit)."""
        return self._pending is not None and self._pending.outbox_due is not None

    async def _join(self, pending: "_Pending", step: Step) -> None:
        pending.steps += 1
        pending.ops += step.ops
        pending.notes += step.notes
        if step.outbox:
            self.ports.outbox_queued(step.now)  # in memory: the one scheduler's outbox timer
        if step.outbox_due:
            pending.outbox_due = step.now
        for req in step.requests:
            if self.spawn is None:  # virtual clock: the answer is the group's next step
                result, error = await self.ports.perform(req)
                await self.run(self._answer(req, result, error))
            else:
                pending.requests.append(req)

    def _answer(self, req: Request, result: Any, error: str | None) -> Callable[[Step], None]:
        return lambda s: self.engine.request_done(s, req, result, error)

    async def _request_bg(self, req: Request) -> None:
        result, error = await self.ports.perform(req)
        try:
            await self.step(self._answer(req, result, error))
        except StepFailed:
            pass  # crash-only: the failure was reported once; the process is ending

    # time -------------------------------------------------------------------------------------
    async def fire_due(self, t: float, *, advance_clock: Callable[[float], object] | None = None,
                       limit: int | None = None,
                       every: tuple[int, Callable[[], Awaitable[None]]] | None = None) -> int:
        """Run every timer due at or before ``t`` in due order, each its own step at
        ``max(due, now)`` (the caller holds the lock).  ``advance_clock`` moves a virtual clock to
        each due instant first.  ``limit``: raise :class:`TooManyTimers` before the timer past
        it.  ``every = (n, hook)``: await ``hook()`` after every ``n`` timers (a yield; it may
        raise to stop).  The timers form one commit group (:meth:`group`), flushed before each
        ``hook`` and at the end — also when a limit or the hook stops it: every step that ran is
        committed.  Returns how many timers ran."""
        fired = 0
        scheduler = self.engine.scheduler
        async with self.group():
            while (nxt := scheduler.next_due()) is not None and nxt <= t:
                if limit is not None and fired >= limit:
                    raise TooManyTimers(fired)
                if advance_clock is not None:
                    advance_clock(nxt)
                await self.run(self.engine.fire, now=max(nxt, self.clock.now()))
                fired += 1
                if every is not None and fired % every[0] == 0:
                    await self.flush()  # the hook may let other code look: commit first
                    await every[1]()
        return fired
