"""A TU's inputs from Electron, besides its platform events: the session (``session.login`` with
Stack's startup read, ``session.logout``), the platform session (``platform.poll``,
``platform.reconnected``), the operator's actions (``favorite.update``, ``task.close``) — each
one step of the engine — and the reads that take no step (``tasks.list``, ``why``).

Rules / theory of operation
---------------------------
* Login restores a TU from Stack's startup data (favorites, task history) when Stack answers,
  else from local state; local state always adds the task history of the last
  :data:`HISTORY_WINDOW_S` seconds and the open tasks, the unacknowledged marker writes
  (DESIGN §9) and every service's durable state.
* Login waits for Stack's startup data at most ``stack_startup_timeout_s``; then it restores from
  local state (the bridge has one worker: a stuck Stack must not hold up every TU's frames).
  An unusable startup answer (:func:`sidecar.stack.startup.parse_startup` None) restores from
  local state too; either is a warning in the log, never an error to Electron.
* Stack is about to be read: Stack's due writes are flushed first (the login's startup read,
  the next machine's after a logout — :meth:`sidecar.app.deliveries.Deliveries.flush_observed`),
  so Stack's answer includes what this process wrote.
* Handed-over deliveries (DESIGN §9, :mod:`sidecar.router.handover`): a logout hands the TU's
  pending non-Stack deliveries to Stack (after its step, so the rows the logout itself routed —
  its tasks' ``closed`` events — go too) before Stack's due writes are flushed; a login continues
  the ones Stack's startup data lists, in the login step.  Without a Stack nothing is handed
  over: the rows stay here and go out while this machine runs.
* An unknown project is refused (-32602) before any I/O; an engine refusal (unknown TU …) is
  raised before anything changes (the app answers it -32602).
"""
from __future__ import annotations

import asyncio
import logging
from functools import partial
from typing import TYPE_CHECKING, Awaitable, Callable

import msgspec

from bridge.errors import InvalidParams, error_text
from platform_clients import client_for
from sidecar.protocol import inbound as p
from sidecar.app.deliveries import StepFn
from sidecar.config import Settings
from sidecar.protocol.paging import MAX_LIMIT, budget, page
from sidecar.core.clock import Clock
from sidecar.app.router import RouterComponent
from sidecar.runtime.decisions import explain
from sidecar.runtime.engine import Engine
from sidecar.runtime.step import Request, Step
from sidecar.router import handover
from sidecar.stack.errors import StackError
from sidecar.stack.startup import parse_startup
from sidecar.store.db import Store
from sidecar.app.task_pages import tasks_page
from sidecar.app.wire import task_view
from sidecar.protocol.answers import TasksPage

if TYPE_CHECKING:
    from sidecar.stack.client import StackClient  # imported where it is made (httpx)

log = logging.getLogger("sidecar.app.root")

HISTORY_WINDOW_S = 2 * 86400.0  # local task history loaded at login (restore input)


class Inputs:
    """The handlers of a TU's inputs (module rules).

    ``step(fn)`` runs ``fn`` as one step (-32603 once the process stopped or shuts down);
    ``flush_observed()`` flushes Stack's due writes before Stack is read."""

    def __init__(self, *, settings: Settings, clock: Clock, engine: Engine, store: Store,
                 stack: StackClient | None, routing: RouterComponent, step: StepFn,
                 flush_observed: Callable[[], Awaitable[None]],
                 queued: Callable[[float, frozenset[str] | None], None] = lambda at, ch: None) -> None:
        self.settings = settings
        self.clock = clock
        self.engine = engine
        self.store = store
        self.stack = stack
        self.routing = routing
        self._step = step
        self._flush_observed = flush_observed
        self._queued = queued  # rows committed outside the router's routing arm the delivery timer

    async def login(self, a: p.SessionLogin) -> dict:
        """``session.login``: answer ``{"ok", "favorites", "restored_from_stack",
        "no_favorites_list", "open_tasks"}`` (counts; whether Stack's startup data was used;
        whether Stack answered with no favorites list for the TU — DESIGN §12.5)."""
        try:
            client_for(a.project)  # before any I/O
        except KeyError as exc:
            raise InvalidParams(error_text(exc), data={"field": "project"}) from None
        startup = None
        listed = None  # Stack's handed-over deliveries of the TU (DESIGN §9)
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
                    listed = raw.get("deliveries") if isinstance(raw, dict) else None
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
        resumed = any(row.tu == a.tu for row in await self.store.sessions())  # a crash ended it
        prune = self.routing.prune_ops(now)  # the router's housekeeping rides the login step
        continued, skipped = handover.restored(a.tu, listed, now)
        if skipped:
            log.warning("Stack startup for %s: skipping %d handed-over deliveries that do not match",
                        a.tu, skipped)

        def login(s: Step) -> None:
            self.engine.login(s, a.tu, a.project, a.operator, startup=startup,
                              local_favorites=favorites, local_tasks=tasks,
                              pending_markers=pending, local_state=state, resumed=resumed)
            s.ops.extend(prune)
            s.ops.extend(continued)
            if continued:
                self._queued(s.now, None)
            # in the step, under its lock: never between another step's decide and apply
            self.routing.router.state.prune(now)

        await self._step(login)
        rt = self.engine.tus[a.tu]
        return {"ok": True, "favorites": len(rt.favorites), "restored_from_stack": startup is not None,
                "no_favorites_list": startup is not None and startup["favorites"] is None,
                "open_tasks": len(self.engine.factory.open_of_tu(a.tu))}

    async def logout(self, a: p.SessionLogout) -> dict:
        """``session.logout``: the TU's step, then Stack's due writes flushed."""
        await self._step(partial(self.engine.logout, tu=a.tu))
        if self.stack is not None:
            rows = await self.routing.store.pending_kept(a.tu)
            if rows:
                def hand_over(s: Step) -> None:
                    s.ops.extend(handover.handover_ops(rows, a.tu, s.now))
                    self._queued(s.now, frozenset({"stack"}))

                await self._step(hand_over)
                log.info("logout of %s hands %d pending deliveries over through Stack", a.tu, len(rows))
        await self._flush_observed()  # the next machine to log this TU in reads Stack
        return {"ok": True}

    async def poll(self, a: p.PlatformPoll) -> dict:
        """Electron pushed a poll result itself: handled like the answer to our own request."""
        rt = self.engine.tus.get(a.tu)
        if rt is None or not rt.logged_in:
            raise InvalidParams(f"TU {a.tu!r} is not logged in", data={"field": "tu"})
        try:
            pass_ = rt.client.pass_named(a.pass_)
        except KeyError:
            raise InvalidParams(f"{rt.project} has no pass {a.pass_!r}", data={"field": "pass"}) from None
        req = Request("passes", pass_.method, dict(pass_.params), pass_.name, tu=rt.tu,
                      project=rt.project, epoch=rt.epoch)
        await self._step(lambda s: self.engine.request_done(s, req, a.data, None))
        return {"ok": True}

    async def reconnected(self, a: p.PlatformReconnected) -> dict:
        """``platform.reconnected``: the platform socket came back — check chat again."""
        await self._step(partial(self.engine.reconnected, tu=a.tu))
        return {"ok": True}

    async def favorite_update(self, a: p.FavoriteUpdate) -> dict:
        """``favorite.update``: the fields given (not None) replace the favorite's."""
        changes = {k: v for k, v in msgspec.structs.asdict(a).items()
                   if k not in ("tu", "ru", "project") and v is not None}
        await self._step(partial(self.engine.favorite_update, tu=a.tu, ru=a.ru, changes=changes))
        return {"ok": True}

    async def task_close(self, a: p.TaskClose) -> dict:
        """``task.close``: answer ``{"ok", "closed"}`` (whether an open task was closed)."""
        closed = await self._step(partial(self.engine.task_close, task_id=a.task_id, reason=a.reason))
        return {"ok": True, "closed": closed}

    async def tasks_list(self, a: p.TasksList) -> list | TasksPage:
        """``tasks.list``: the TU's open tasks as wire rows, no step; a page when asked
        (:mod:`sidecar.app.task_pages`)."""
        if a.limit is None and a.cursor is None:
            return [task_view(t) for t in self.engine.open_tasks(a.tu)]
        return tasks_page(self.engine.open_tasks(a.tu), a.limit, a.cursor, budget(self.settings.max_frame))

    async def why(self, a: p.Why) -> dict:
        """``why {tu, ru, since?}`` (DESIGN §13): the pair's decisions in order, no step.

        Answer ``{"tu", "ru", "since", "decisions": [{"id", "at", "type", "source", "outcome",
        "task_id", "detail", "text"}], "next"}`` (``at`` unix seconds; one page under the frame
        cap, :mod:`sidecar.protocol.paging`); rows past the retention are gone.  ``limit`` null: 1000."""
        limit = a.limit or MAX_LIMIT
        found = await self.store.decisions(a.tu, a.ru, since=a.since, after_id=a.after_id,
                                           limit=limit + 1)
        for row in found:
            row["text"] = explain(row)
        rows, nxt = page(found, limit, budget(self.settings.max_frame), lambda r: r["id"])
        return {"tu": a.tu, "ru": a.ru, "since": a.since, "decisions": rows, "next": nxt}
