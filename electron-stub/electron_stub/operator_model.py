"""The operator model: how the replayed operator works each TU's task list (the header's
``operator``, ``shared/scenarios/README.md``; DESIGN §6's sort).

Rules / theory of operation
---------------------------
* **First look** (the README's model, unchanged): every new task is looked at U(``*_delay_s``)
  seconds after its creation (keyed ``(task_id, "delay")``) and answered then, if it is still
  open, with probability ``*_answer_p`` (keyed ``(task_id, "answer")``) — the chat or mail
  parameters by the task's channel (:func:`keyed.channel_of`; e-mail tasks use the mail ones).
  Answering is sending on the task's channel: the world logs the send and the platform echoes it
  as a socket event (withheld while the TU's socket is down); an e-mail task is closed with
  ``task.close {reason: answered}``.  The trace gets ``operator.sent``.
* **The backlog** (issue 22 item 5): a task passed over at its first look (the draw said no) is
  not forgotten, as it was — the shift's open queue grew to 751 tasks, 734 still open at the end,
  and 3 of 1,357 overdue tasks were ever answered.  From its first-look instant it waits in its
  TU's backlog, and the operator works that backlog **one task at a time per TU in the sidecar's
  order**: whenever the TU's hand is free and its backlog is not empty, the model reads
  ``tasks.list {tu}`` from the machine the TU is logged in on (the list Electron shows, sorted by
  the sidecar: earliest deadline first — so the overdue ones lead —, then VIP tier, then
  strength, DESIGN §6) and takes the first listed task of the backlog.  Its n-th look lasts
  U(delay) (keyed ``(task_id, "look", n)``, n counting that task's looks) and answers it, if still open, with the channel's
  probability (keyed ``(task_id, "look-answer", n)``); a task passed over again stays in the
  backlog.  Then the hand is free and picks again at that instant.  A task the sidecar no longer
  lists (answered, expired, superseded, closed at logout) leaves the backlog at the next pick.
* A channel whose probability is 0 never answers, so its tasks never enter the backlog (seed
  scenarios with ``chat_answer_p: 0`` keep every task unanswered); with probability 1 every task
  is answered at its first look and no backlog forms — every seed scenario's trace is unchanged.
* Queue items (phase ``ACTION`` of the driver's queue): ``("answer", task_id, channel)`` a first
  look that answers (it may travel in a batched frame, :mod:`replay_frames`); ``("pass",
  task_id)`` a first look that passes over; ``("look", task_id, channel, n)`` a backlog look
  ending (then the hand picks at once).  A look, and a pass-over while the TU's hand is free,
  end a batched frame: they read the recorder and the sidecar's list (``tasks.list``) at their
  instant, the same one by one and batched.  A look whose draw answers an open task
  (:meth:`OperatorModel.look_answers`) is its frame's *last* item: its answer travels with
  ``if_open`` like a first look's, and once the frame is through (the sidecar at the look's
  instant) the answered count (:meth:`OperatorModel.answered_in_frame`) and the pick
  (:meth:`OperatorModel.looked`) follow — one by one it cost an advance and a lone
  ``platform.event``.  An item that sends nothing (:meth:`OperatorModel.reads_only`: a
  pass-over, a look that answers nothing) while no sidecar is due up to its instant is played
  without an advance (the list is the open tasks, which only a step changes).  A pass-over
  while the hand is busy only joins the
  backlog: it travels in the frame as a world-only item (:meth:`OperatorModel.travels`), and
  whether its task was still open at its instant is read once the frame's notifications are
  through, from the task's ``closed_at`` (:meth:`OperatorModel.passed_in_frame`).  Ending the
  frame there cost a ``clock.advance_to`` and a split ``platform.events`` frame each
  (docs/decisions.md, "where the shift's CPU went"; the looks: "the backlog's looks in the
  frame").
* Counters (``RunStats.operator_backlog``): ``passed_over`` (first looks that did not answer, of
  channels that answer at all), ``looks`` (backlog looks), ``answered`` (backlog looks that
  answered), ``picks_idle`` (picks that found nothing to take).
"""
from __future__ import annotations

from collections import Counter
from typing import Any, Callable

from electron_stub import encode, keyed
from electron_stub import scenario as sc
from electron_stub.replay_lines import LinePlayer
from electron_stub.replay_sidecars import ACTION, Sidecars, VirtualTime
from electron_stub.report import RunStats
from electron_stub.trace import Recorder, Task
from electron_stub.world import World


class OperatorModel:
    """The replayed operator; ``push(t, phase, item)`` queues an item for the driver."""

    def __init__(self, scenario: sc.Scenario, clock: VirtualTime, *, rec: Recorder, world: World,
                 sidecars: Sidecars, lines: LinePlayer, stats: RunStats, op_sent: Counter,
                 push: Callable[[float, int, Any], None]) -> None:
        self.op, self.seed = scenario.header.operator, scenario.header.seed
        self.clock, self.rec, self.world, self.sidecars, self.lines = clock, rec, world, sidecars, lines
        self.stats, self.op_sent, self.push = stats, op_sent, push
        self.backlog: dict[str, set[str]] = {}  # tu -> task ids passed over, still to be worked
        self.in_hand: dict[str, str] = {}  # tu -> the backlog task being looked at
        self.looks: Counter = Counter()  # task id -> backlog looks taken
        self.counts: Counter = Counter()

    def _params(self, channel: str) -> tuple[float, tuple[float, float]]:
        op = self.op
        return (op.chat_answer_p, op.chat_delay_s) if channel == "chat" else (op.mail_answer_p, op.mail_delay_s)

    def _rel(self) -> float:
        return self.clock.now - self.clock.start

    # ---- first look ----------------------------------------------------------------------

    def plan(self, task: Task) -> None:
        """A new task (``task.created``): its first look (module rules)."""
        channel = keyed.channel_of(task.type, task.meta)
        p, (lo, hi) = self._params(channel)
        due = task.created_at - self.clock.start + keyed.uniform(self.seed, lo, hi, task.task_id, "delay")
        if keyed.chance(self.seed, p, task.task_id, "answer"):
            self.push(due, ACTION, ("answer", task.task_id, channel))
        elif p > 0.0:
            self.push(due, ACTION, ("pass", task.task_id))

    async def act(self, item: tuple, t: float) -> None:
        """Play one of this model's queue items at its instant ``t`` (seconds from start)."""
        kind = item[0]
        if kind == "answer":
            await self.answer(item[1], item[2], t)
        elif kind == "pass":
            task = self.rec.tasks.get(item[1])
            if task is not None and task.is_open:
                self._passed_over(task)
                if task.tu not in self.in_hand:
                    await self.pick(task.tu)
        elif kind == "look":
            await self.look(item[1], item[2], item[3], t)
        else:
            raise ValueError(f"unknown operator item {item!r}")

    def _passed_over(self, task: Task) -> None:
        self.counts["passed_over"] += 1
        self.backlog.setdefault(task.tu, set()).add(task.task_id)

    # ---- a pass-over inside a batched frame ------------------------------------------------

    def travels(self, item: tuple) -> bool:
        """``item`` is a pass-over whose TU's hand is busy with a backlog task: it only joins
        the backlog (the hand picks when it is free, at its look's end), so it reads nothing
        from the sidecar and may travel in a batched frame (module rules)."""
        if item[0] != "pass":
            return False
        task = self.rec.tasks.get(item[1])
        return task is not None and task.tu in self.in_hand

    def passed_in_frame(self, task_id: str, t: float) -> None:
        """The pass-over of ``task_id`` at ``t`` (seconds from start) that travelled in a frame,
        once the frame's notifications are through: the task was open at ``t`` unless the
        sidecar closed it at or before ``t`` (one by one the advance to ``t`` brings the closes
        of that instant first).  The hand was busy the whole frame: only a look's end (never
        inside a frame) frees it."""
        task = self.rec.tasks.get(task_id)
        if task is not None and (task.closed_at is None or task.closed_at > self.clock.start + t):
            self._passed_over(task)

    # ---- a look inside a batched frame, or without an advance ------------------------------

    def look_answers(self, item: tuple) -> bool:
        """``item`` is a backlog look (``("look", task_id, channel, n)``) that answers if its
        task is still open at its instant: its draw says yes and the recorder knows the task
        open now (the sidecar's ``if_open`` decides the rest at the look's turn in a frame)."""
        if item[0] != "look":
            return False
        task = self.rec.tasks.get(item[1])
        p, _ = self._params(item[2])
        return task is not None and task.is_open and keyed.chance(self.seed, p, item[1], "look-answer", item[3])

    def reads_only(self, item: tuple) -> bool:
        """``item`` sends the sidecar nothing: a pass-over (it may read ``tasks.list``) or a
        look that answers nothing (:meth:`look_answers` is False; it reads the list to pick).
        The driver plays one at its instant without advancing a sidecar that does nothing by
        itself before then: the list is the open tasks, which only a step changes."""
        return item[0] == "pass" or (item[0] == "look" and not self.look_answers(item))

    def answered_in_frame(self, task_id: str) -> None:
        """A look's answer travelled in a frame and the sidecar sent it (not skipped: the task
        was open at its turn): it counts as answered and leaves the backlog, as in :meth:`look`."""
        task = self.rec.tasks.get(task_id)
        if task is not None:
            self.counts["answered"] += 1
            self.backlog.get(task.tu, set()).discard(task_id)

    async def looked(self, tu: str) -> None:
        """The end of a look that travelled as a frame's last item, once the frame is through
        (every note of it handed on, the sidecar at the look's instant): the hand is free and
        picks at once, as :meth:`look` does after its answer."""
        self.in_hand.pop(tu, None)
        await self.pick(tu)

    # ---- the backlog, in the sidecar's order ---------------------------------------------

    async def pick(self, tu: str) -> None:
        """The TU's hand is free: take the first backlog task of the sidecar's sorted list."""
        waiting = self.backlog.get(tu)
        m = self.sidecars.tu_machine.get(tu)
        if not waiting or m is None or not m.running:
            return
        listed = await self.sidecars.send(m, "tasks.list", {"tu": tu})
        ids = [v.get("task_id") for v in listed if isinstance(v, dict)] if isinstance(listed, list) else []
        still = set(ids)
        waiting &= still  # what the sidecar no longer lists is not the operator's to work
        head = next((i for i in ids if i in waiting), None)
        if head is None:
            self.counts["picks_idle"] += 1
            return
        task = self.rec.tasks.get(head)
        if task is None:  # listed by the sidecar but never announced: leave it
            waiting.discard(head)
            return
        channel = keyed.channel_of(task.type, task.meta)
        _, (lo, hi) = self._params(channel)
        self.looks[head] += 1  # n: this task's looks so far, a stable key on every run
        n = self.looks[head]
        self.counts["looks"] += 1
        self.in_hand[tu] = head
        self.push(self._rel() + keyed.uniform(self.seed, lo, hi, head, "look", n), ACTION,
                  ("look", head, channel, n))

    async def look(self, task_id: str, channel: str, n: int, t: float) -> None:
        task = self.rec.tasks.get(task_id)
        tu = task.tu if task is not None else None
        if tu is not None:
            self.in_hand.pop(tu, None)
        p, _ = self._params(channel)
        if task is not None and task.is_open and keyed.chance(self.seed, p, task_id, "look-answer", n):
            if await self.answer(task_id, channel, t):
                self.counts["answered"] += 1
                self.backlog.get(task.tu, set()).discard(task_id)
        if tu is not None:
            await self.pick(tu)

    # ---- answering ------------------------------------------------------------------------

    async def answer(self, task_id: str, channel: str, t: float) -> bool:
        """Send on ``channel`` for the task if it is still open and its TU logged in; True when sent."""
        task = self.rec.tasks.get(task_id)
        if task is None or not task.is_open:
            return False
        m = self.sidecars.tu_machine.get(task.tu)
        if m is None or not m.running:
            return False
        now = self.clock.now
        if t < now - self.clock.start - 1e-6:
            self.stats.operator_late += 1
        if channel == "email":
            await self.sidecars.send(m, "task.close", {"task_id": task_id, "reason": "answered"})
        else:
            item_id = f"op-{task_id}"
            self.world.record_send(task.project, task.tu, task.ru, channel, item_id, now, body="…")
            frame = encode.own_send(task.project, task.tu, task.ru, channel, item_id, now, "…")
            for method, params in self.lines.delivered(task.tu, [frame]):  # the echo is a socket event
                await self.sidecars.send(m, method, params)
        self.op_sent[channel] += 1
        self.rec.operator_sent(self.clock.now, channel, task.project, task.tu, task.ru, task_id)
        return True
