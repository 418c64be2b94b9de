"""The bounded close of the app (DESIGN §3): what :meth:`SidecarApp.close` and
:meth:`SidecarApp.goodbye` do, stage by stage.

1. **Shutdown refuses new steps; it never fails one** (a step failed at shutdown would exit 6).
   The close first stops the executor (:meth:`StepExecutor.stop`): every step not yet begun — a
   frame the bridge still hands over, a platform answer, a timer, the pump loop's router events —
   is refused (-32002 "shutting down" to a caller, silently for background work) and no platform
   request starts.
2. Then it cancels the background tasks and quiesces the bridge, which answers every request
   asked so far (the one in flight its result if it ends within the grace, else -32003 "cut
   short"; :mod:`bridge.server`).  An answer cut short says what was kept: an advance the
   instant it reached (``data.now``), ``platform.events`` the events it took (``data.taken``); a
   step's own platform request answered after the stop is dropped, not the step (it is
   committed).
3. It takes the step lock (bounded) so the step under way commits before the delivery flush at
   exit, the router channels and the Stack client close; it keeps the lock, so nothing touches
   the router state after.
3a. After the flush it lists what stays with this machine (DESIGN §10 "Process-wide deliveries
   stay with their machine and are listed at shutdown"): one INFO line naming the pending
   non-Stack deliveries — process-wide ones, and a TU's, saying which were handed over
   through Stack (this machine keeps sending those too) and which wait for Stack to take the
   handover (a WARNING: they go out only when this machine runs again;
   :func:`sidecar.router.handover.stays_summary`).
4. Every stage has its own bound, cut to what is left of :data:`CLOSE_BUDGET_S`; a stage that
   overruns is abandoned and named in the returned list (``sidecar serve`` logs it instead of a
   clean shutdown; :mod:`sidecar.app.aio` "Abandoned is not done").
5. **Goodbye** comes last, after the caller closed the store: every ``sidecar.shutdown`` is
   answered ``{"ok": true, "abandoned": [...]}``, then the connection closes with 1001, within
   :data:`GOODBYE_S`.  The close + the database close (0.3 s) + goodbye end before the 1.5 s
   watchdog (exit 5).
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any, Protocol

from bridge import BridgeServer
from bridge.worker import Deferred
from sidecar.app.aio import bounded, cancel_all
from sidecar.router.handover import stays_summary

log = logging.getLogger("sidecar.app.root")

CLOSE_BUDGET_S = 0.95  # seconds close() may take at most (rule 4)
GOODBYE_S = 0.2  # goodbye(): sidecar.shutdown's answers and the 1001 close, at most (rule 5)


class Closable(Protocol):
    """What the close uses of :class:`sidecar.app.root.SidecarApp` (named here, not imported:
    the app imports this module)."""

    executor: Any
    bridge: BridgeServer
    engine: Any
    deliveries: Any
    routing: Any
    stack: Any
    clock: Any
    _bg: set[asyncio.Task]
    _lock: asyncio.Lock

    def _now_or_none(self) -> float | None: ...

    async def goodbye(self, left: list[str]) -> None: ...


async def close(app: Closable, *, final: bool) -> list[str]:
    """Close ``app`` (rules 1–4); the stages left behind, e.g. ``["delivery flush at exit
    (over 0.40 s)"]`` (empty: all done).  ``final=False`` leaves the connection open for
    :func:`goodbye` (``sidecar serve`` closes the store between the two); ``final=True`` (tests,
    embedding) ends with it."""
    left: list[str] = []
    loop = asyncio.get_running_loop()
    end = loop.time() + CLOSE_BUDGET_S

    def cap(bound_s: float) -> float:  # a stage's own bound, cut to what is left of the budget
        return max(0.0, min(bound_s, end - loop.time()))

    app.executor.stop()  # rule 1
    await cancel_all(app._bg, cap(0.3), "background tasks", left)
    await bounded(app.bridge.quiesce(grace=0.3), cap(0.6), "bridge quiesce", left)
    locked = await bounded(app._lock.acquire(), cap(0.2), "the step under way", left)  # rule 3
    if not locked:
        log.warning("closing with a step still under way; it is abandoned, not failed")
    if app._now_or_none() is not None and app.deliveries.exit_flush_due():
        # flush what we can (DESIGN §3); anything left stays queued for the next start
        res = await bounded(app.deliveries.flush_at_exit(app.clock.now()), cap(0.4),
                            "delivery flush at exit", left)
        if res is not None:
            app.deliveries.acked += res.stack_acked
    async def kept() -> tuple[int, str] | None:
        return stays_summary(await app.routing.store.pending_kept(), await app.routing.store.handed_over())

    stays = await bounded(kept(), cap(0.1), "pending deliveries listed", left)
    if stays is not None:
        log.log(*stays)
    await bounded(app.routing.close(), cap(0.1), "router channels close", left)
    if app.stack is not None:
        await bounded(app.stack.close(), cap(0.2), "Stack client close", left)
    if final:
        await app.goodbye(left)
    return left


async def goodbye(bridge: BridgeServer, answers: list[Deferred], left: list[str]) -> None:
    """Rule 5: answer each ``sidecar.shutdown`` (``abandoned``: ``left``, the stages that
    overran so far), then close the connection with 1001 within :data:`GOODBYE_S`; an overrun is
    added to ``left``."""
    for answer in answers:
        answer.resolve({"ok": True, "abandoned": list(left)})
    await bounded(bridge.close(grace=0.1), GOODBYE_S, "bridge close", left)
