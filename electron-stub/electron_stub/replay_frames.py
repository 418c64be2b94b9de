"""The replay's batched frames: which queue items travel together in one ``platform.events``
frame, and playing that frame (the bookkeeping that keeps the result the same as one by one is
:mod:`electron_stub.batch`).

Rules / theory of operation
---------------------------
* **Batched frames** (issue 11 item 3; on unless ``batch=False`` / ``--no-batch``): every world
  line and operator chat/mail answer up to the next sync point travels in ONE
  ``platform.events`` frame whose events' ``received_at`` advance the clock — instead of
  ``clock.advance_to`` then ``platform.event`` per line.  The sidecar's own timers and delivery
  passes run between the frame's events at their instants.  Sync points: a line that is no
  platform event, an e-mail answer, and the answer horizon (the operator's shortest delay after
  the earliest instant a task of the frame can be created: its first event or the sidecar's
  ``next_due``).  Answers go with ``if_open`` (the sidecar skips one whose task closed earlier
  in the frame); world changes wait until the sidecar begins their event or a step of its own
  asks at a later instant (``batch_seen``, ``at`` of ``platform.request``); notifications are
  handed on after the frame in stream order with each line's sample at its event's ``seq``:
  module :mod:`electron_stub.batch`.  Only while one sidecar runs (an advance goes to every
  running machine); routing-world lines never travel batched.  The reference Stack and the
  receivers record each call at the instant the sidecar stamps on it, so a call inside a frame
  is recorded where one by one records it.  The result — tasks, trace, deliveries, expectations,
  samples — is the same as without batching; the tests compare both.  An operator's pass-over
  while the TU's hand is busy travels as a world-only item (:mod:`electron_stub.operator_model`);
  a backlog look whose draw answers travels as the frame's last item (its answer with
  ``if_open``; the hand's pick, ``Item.then``, once the frame is through); every other operator
  item but a chat/mail answer ends the frame.
"""
from __future__ import annotations

import heapq
import math
from collections import Counter
from typing import TYPE_CHECKING, Any, Callable

from electron_stub import batch, encode
from electron_stub.batch import Frame, Item
from electron_stub.machine import Machine
from electron_stub.replay_lines import NOT_WORLD, ROUTING_LINES, LinePlayer
from electron_stub.replay_sidecars import ACTION, TIMELINE, Sidecars, VirtualTime
from electron_stub.report import RunStats
from electron_stub.trace import Recorder
from electron_stub.world import World

if TYPE_CHECKING:
    from electron_stub.operator_model import OperatorModel


class FramePlayer:
    """Takes frames off the driver's ``queue`` (``(t, phase, order, item)`` heap) and plays them;
    ``frame`` is the frame in flight (the driver's callbacks hold notifications and apply world
    changes through it), ``frame_events`` counts events taken per frame -> frames."""

    def __init__(self, clock: VirtualTime, queue: list[tuple[float, int, int, Any]], *, enabled: bool,
                 answer_lo: float, sidecars: Sidecars, lines: LinePlayer, world: World, rec: Recorder,
                 stats: RunStats, op_sent: Counter, frame_events: Counter,
                 deliver: Callable[[Machine, str, Any], None], operator: OperatorModel | None = None) -> None:
        self.clock, self.queue, self.enabled, self.answer_lo = clock, queue, enabled, answer_lo
        self.operator = operator  # whose busy-hand pass-overs travel in frames (None: none do)
        self.sidecars, self.lines, self.world, self.rec = sidecars, lines, world, rec
        self.stats, self.op_sent, self.frame_events, self.deliver = stats, op_sent, frame_events, deliver
        self.frame: Frame | None = None  # the platform.events frame in flight (module batch)

    def take(self, end: float) -> tuple[Machine, Frame] | None:
        """Pop the queue items that travel in the next ``platform.events`` frame (module
        ``batch``: up to the next sync point), or None when the queue's head does not."""
        if not self.enabled or not self.queue:
            return None
        running = self.sidecars.running()
        if len(running) != 1:
            return None  # an advance goes to every running machine
        m, due_of, start = running[0], self.sidecars.due, self.clock.start
        if m.name not in due_of:
            return self._take_one(m)  # unknown next_due (an older binary): one item a frame
        due = due_of[m.name]
        # no task of this frame is created before its first event or the sidecar's next_due,
        # nor answered sooner than answer_lo after its creation: the items before that
        # horizon precede every answer the frame's tasks bring
        created = math.inf if due is None else due - start
        items: list[Item] = []
        n = 0
        while self.queue and n < batch.MAX_EVENTS:
            entry = self.queue[0]
            if entry[0] > end or entry[0] >= min(created, entry[0]) + self.answer_lo:
                break
            it = self._item(entry, m)
            if it is None:
                break
            heapq.heappop(self.queue)
            items.append(it)
            if it.event is not None:
                created = min(created, it.t)
                n += 1
            if it.then is not None:
                break  # a look's pick reads the sidecar at the look's instant: the frame ends there
        while items and items[-1].event is None:  # trailing world-only items need no frame
            heapq.heappush(self.queue, items.pop().entry)
        return (m, Frame(items, start=start)) if items else None

    def _take_one(self, m: Machine) -> tuple[Machine, Frame] | None:
        it = self._item(self.queue[0], m)
        if it is None or it.event is None:
            return None
        heapq.heappop(self.queue)
        return m, Frame([it], start=self.clock.start)

    def _item(self, entry: tuple, m: Machine) -> Item | None:
        """``entry`` as an item of a frame to ``m`` (module ``batch``), or None: it ends the frame."""
        t, phase, _, it = entry
        start, tu_machine = self.clock.start, self.sidecars.tu_machine
        now = start + t
        if phase == ACTION:
            if self.operator is not None and self.operator.travels(it):
                # a pass-over while the hand is busy reads nothing from the sidecar (operator_model)
                task_id, operator = it[1], self.operator
                return Item(entry, None, settle=lambda: operator.passed_in_frame(task_id, t))
            if it[0] == "look" and self.operator is not None and self.operator.look_answers(it):
                return self._look(entry, m)
            if it[0] != "answer":
                return None  # a look, or a pass-over that picks, reads the list at its instant
            task = self.rec.tasks.get(it[1])
            if task is None or not task.is_open:
                return Item(entry, None)  # closed already: the answer is no answer (one by one)
            return self._own_send(entry, m, it[1], it[2])
        if type(it) in NOT_WORLD or type(it) in ROUTING_LINES:
            return None
        tu = getattr(it, "tu", None)
        frames = self.lines.delivered(tu, encode.frames_for(it, now, self.world), it)
        to = tu_machine.get(tu) if tu else None
        apply = lambda: self.lines.apply_world(it, now)  # noqa: E731
        if to is None or not to.running or not frames:
            return Item(entry, None, apply=apply)  # no frame for any sidecar: the world alone
        if to is not m or len(frames) != 1 or frames[0][0] != "platform.event":
            return None
        return Item(entry, frames[0][1], apply=apply, after=lambda: self.lines.sample(it, now))

    def _own_send(self, entry: tuple, m: Machine, task_id: str, channel: str,
                  answered: Callable[[], None] | None = None) -> Item | None:
        """The operator's answer to the (open) task ``task_id`` on ``channel`` as a frame item:
        the own-send event with ``if_open`` (the sidecar sends it only if the task is still open
        at its turn), or None when it does not travel (an e-mail's ``task.close``, another
        machine, a withheld echo: one by one, ``LinePlayer.answer``).  ``answered``: what else
        follows a sent answer (a backlog look's count)."""
        task = self.rec.tasks[task_id]
        now = self.clock.start + entry[0]
        if channel == "email" or self.sidecars.tu_machine.get(task.tu) is not m \
                or task.tu in self.lines.socket_down:
            return None
        item_id = f"op-{task_id}"
        method, params = encode.own_send(task.project, task.tu, task.ru, channel, item_id, now, "…")
        if method != "platform.event":
            return None

        def sent() -> None:
            self.op_sent[channel] += 1
            self.rec.operator_sent(now, channel, task.project, task.tu, task.ru, task_id)
            if answered is not None:
                answered()
        return Item(entry, {**params, "if_open": task_id}, apply=lambda: self.world.record_send(
            task.project, task.tu, task.ru, channel, item_id, now, body="…"), after=sent)

    def _look(self, entry: tuple, m: Machine) -> Item | None:
        """A backlog look whose draw answers (:meth:`OperatorModel.look_answers`) as the
        frame's last item: its answer with ``if_open``, then — once the frame is through, the
        sidecar at the look's instant — the hand's pick (``then``), as one by one plays
        ``OperatorModel.look``; None when its answer does not travel."""
        operator = self.operator
        assert operator is not None
        task_id, channel = entry[3][1], entry[3][2]
        tu = self.rec.tasks[task_id].tu
        item = self._own_send(entry, m, task_id, channel, answered=lambda: operator.answered_in_frame(task_id))
        if item is not None:
            item.then = lambda: operator.looked(tu)
        return item

    async def play(self, m: Machine, frame: Frame) -> tuple[float, int]:
        """Send ``frame`` as one ``platform.events`` frame (its advance inside); put back what
        the sidecar did not take; returns the instant reached (seconds from start) and the
        timeline lines played."""
        events, start = frame.events, self.clock.start
        self.clock.now = start + frame.items[0].t
        self.frame = frame
        try:
            answer = await self.sidecars.send(m, "platform.events", {"events": events})
        finally:
            self.frame = None
        taken, results = len(events), []
        if isinstance(answer, dict):  # an error answer (reported by send): as if all were taken
            taken = max(1, min(taken, int(answer.get("taken", taken))))
            results = answer.get("results") or []
            frame.skip([i for i, res in enumerate(results) if isinstance(res, dict) and res.get("skipped")])
            for ev, res in zip(events, results):
                if isinstance(res, dict) and not res.get("ok", True):
                    self.stats.warnings.append(
                        f"{m.name} answered platform.event ({ev.get('name')}) with an error: "
                        f"{(res.get('error') or {}).get('message')}")
        done, rest = frame.taken_items(taken)
        frame.seen(taken)
        for it in rest:
            heapq.heappush(self.queue, it.entry)
        self.clock.now = start + done[-1].t
        self.frame_events[taken] += 1
        frame.hand_on(done, results, self.deliver)
        for it in done:  # only the last can have one (it ends the frame): a look's pick
            if it.then is not None:
                await it.then()
        return done[-1].t, sum(it.entry[1] == TIMELINE for it in done)
