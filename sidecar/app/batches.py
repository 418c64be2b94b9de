"""``platform.events``: a burst of raw platform events handled in order, each its own step, the
whole call ONE commit group (params :class:`sidecar.protocol.inbound.PlatformEvents`).

Rules / theory of operation
---------------------------
* The call holds the app's step lock throughout; its events' steps run in ONE commit group
  (:meth:`StepExecutor.group`), each event's routing decided on the state the earlier ones left.
* On the virtual clock each event first advances the clock to its ``received_at`` exactly as
  ``clock.advance_to`` would (:meth:`sidecar.app.clockwork.Clockwork.fire_until`: the timers due
  meanwhile, each at its instant), then runs the delivery pass due now
  (:meth:`sidecar.app.deliveries.Deliveries.pump_locked`), as at the end of an advance.
  ``stop_at_due`` stops before any event but the first when the sidecar would act by itself
  first (:meth:`EventBatches._acts_before`).  On the wall clock ``received_at`` is informational.
* An ``if_open`` event whose task is no longer open is skipped: nothing runs, and its index goes
  into the ``batch_skipped`` of the ``platform.request`` calls after it (:attr:`~EventBatches.
  skipped`, which the app hands to :mod:`sidecar.app.requests` with :attr:`~EventBatches.seen`).
* On the virtual clock the call's grid passes take the answers it carried (``poll_answers``)
  instead of a round trip (:mod:`sidecar.app.pushed_polls`); the answer says which.
* A refused event (bad raw event, TU not logged in) is its own error result and changes
  nothing; the others are handled.  Each result carries ``seq``: the stream's last seq once its
  step's notes were sent (``step_seqs``, filled by the app's ``step_done`` port from
  ``last_seq``, which the app's every note sets).
* Shutdown inside the call keeps the events taken (committed with the group) and answers
  -32603 with ``data.taken`` / ``data.now``; a failed step is -32603 (crash-only, the app's
  rules).
"""
from __future__ import annotations

import asyncio
import math
from functools import partial
from typing import Callable

from bridge.errors import CutShort, InternalError, InvalidParams, RpcError, ShuttingDown, as_rpc_error
from sidecar.protocol import inbound as p
from sidecar.app.deliveries import Deliveries
from sidecar.app.clockwork import Clockwork
from sidecar.app.pushed_polls import PushedPolls
from sidecar.core.clock import Clock, VirtualClock
from sidecar.runtime.engine import REFUSALS, Engine
from sidecar.runtime.executor import StepExecutor
from sidecar.runtime.ports import Stopping, StepFailed


class EventBatches:
    """The ``platform.events`` handler (:meth:`handle`) and the state of the call under way
    (module rules).  ``stream_last_seq()``: the bridge stream's last seq; ``require_clock()``
    raises -32602 while the virtual clock is unset; ``now_or_none()``: the clock's now, or
    None before it is set."""

    def __init__(self, *, clock: Clock, engine: Engine, executor: StepExecutor, lock: asyncio.Lock,
                 deliveries: Deliveries, clockwork: Clockwork, pushed: PushedPolls,
                 stream_last_seq: Callable[[], int],
                 require_clock: Callable[[], None], now_or_none: Callable[[], float | None]) -> None:
        self.clock, self.engine, self.executor = clock, engine, executor
        self._lock = lock  # the app's step lock: the whole call holds it
        self.deliveries, self.clockwork = deliveries, clockwork
        self.pushed = pushed  # poll answers pushed into the frame
        self._pump_kick = deliveries.pump_kick  # the delivery timer fired
        self._stream_last_seq = stream_last_seq
        self._require_clock = require_clock
        self._now_or_none = now_or_none
        self.seen: int | None = None  # events begun (platform.request's batch_seen); None outside a call
        self.skipped: list[int] = []  # if_open events skipped so far (platform.request's batch_skipped)
        self.taken = 0  # events of the call under way whose steps all ran (kept with the group)
        self.last_seq = 0  # stream seq of the last note this process sent (any kind)
        self.step_seqs: dict[int, int] | None = None  # in a call: step number -> last_seq once its effects were sent

    def cut_short_data(self, method: str) -> dict | None:
        """The ``data`` of a call cut short at shutdown (the bridge's ``cut_short_data``; README
        "shutdown"): what it kept — an advance the instant it reached (``now``),
        ``platform.events`` also the events it took (``taken``); None for other methods."""
        if method == "clock.advance_to":
            return {"now": self._now_or_none()}
        if method == "platform.events":
            return {"taken": self.taken, "now": self._now_or_none()}
        return None

    async def handle(self, a: p.PlatformEvents) -> dict:
        """``platform.events`` (see :class:`sidecar.protocol.inbound.PlatformEvents`): the events in
        order, each its own step, the whole call ONE commit group — plus, on the virtual clock,
        the advance to each event's ``received_at`` first (timers, and every delivery at its
        instant, exactly as ``clock.advance_to``).  Per event ``{"ok", "events", "seq"}`` or
        ``{"ok": false, "error": {"code": -32602, "message"}}``."""
        clock = self.clock
        virtual = isinstance(clock, VirtualClock)
        results: list[dict] = []
        marks: list[int] = []  # the number of the last step once each event's step was run
        async with self._lock:
            with self.pushed.offered(a.poll_answers if virtual else None) as used:
                seq0 = self.last_seq = self._stream_last_seq()
                self.seen, self.step_seqs, self.skipped, self.taken = 0, {}, [], 0
                try:
                    async with self.executor.group():
                        for i, ev in enumerate(a.events):
                            if virtual:
                                assert isinstance(clock, VirtualClock)
                                at = ev.received_at
                                if a.stop_at_due and i > 0 and self._acts_before(clock, at):
                                    break  # the caller sends the rest once it saw that
                                if at is not None and (not clock.is_set or at > clock.now()):
                                    if not math.isfinite(at):
                                        raise InvalidParams("platform.events: received_at must be finite",
                                                            data={"field": f"events.{i}.received_at"})
                                    await self.clockwork.fire_until(clock, at, "platform.events")
                                self._require_clock()
                                if self._pump_kick.is_set() or self.executor.outbox_due_pending():
                                    await self.deliveries.pump_locked()  # as at the end of clock.advance_to
                            self.seen = i + 1
                            if ev.if_open is not None and ev.if_open not in self.engine.factory.open:
                                self.skipped.append(i)  # the task closed before its answer
                                results.append({"ok": True, "skipped": True, "events": 0})
                            else:
                                results.append(await self._batch_event(ev))
                            marks.append(self.executor.steps + self.executor.pending_steps())
                            self.taken = len(results)  # a cut short at shutdown says it (app.py)
                except StepFailed as exc:
                    raise InternalError(str(exc)) from exc
                except (Stopping, ShuttingDown, CutShort):
                    # shutdown began inside the call (a step refused, or an advance cut short): the
                    # events before it were committed with the group — say how many
                    taken = len(results)
                    raise CutShort(
                        f"the sidecar is shutting down; platform.events took {taken} of {len(a.events)}"
                        f" events (kept); send the rest after a restart",
                        data={"taken": taken, "now": self._now_or_none()}) from None
                finally:
                    self.seen, self.skipped = None, []
                    step_seqs, self.step_seqs = self.step_seqs or {}, None
                for res, mark in zip(results, marks):
                    res["seq"] = step_seqs.get(mark, seq0)
        out = {"taken": len(results), "results": results, "now": self._now_or_none()}
        if virtual and a.poll_answers is not None:
            out["poll_answers_used"] = used
        return out

    def _acts_before(self, clock: VirtualClock, at: float | None) -> bool:
        """``platform.events`` with ``stop_at_due``: would a timer or a delivery pass of the
        sidecar's own run before an event received at ``at`` (None: now)?  An outbox attempt
        due now counts too (``next_due`` leaves it out: the next input makes it)."""
        if self._pump_kick.is_set() or self.deliveries.others_due or self.executor.outbox_due_pending():
            return True
        due = self.engine.next_due(None)  # every timer, an outbox attempt due by now included
        limit = clock.now() if at is None or at <= clock.now() else at
        return due is not None and due <= limit

    async def _batch_event(self, ev: p.BatchEvent) -> dict:
        """One event of a batch as one step of the open group; a refusal is its error result."""
        try:
            n = await self.executor.run(partial(
                self.engine.platform_event, tu=ev.tu, project=ev.project, name=ev.name, data=ev.data))
        except (*REFUSALS, RpcError) as exc:
            err = as_rpc_error(exc)  # a refusal's own error object (sidecar.domain.errors)
            assert err is not None
            error = {"code": err.code, "message": err.message}
            if err.data is not None:
                error["data"] = err.data  # data.field: the event's own (/data/… for its raw data)
            return {"ok": False, "error": error}
        return {"ok": True, "events": n}
