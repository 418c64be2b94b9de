"""The Task Factory (DESIGN §6, seed 003 "Цільовий набір").

Rules / theory of operation
---------------------------
* Services hand it **candidates**; it creates a task or refuses with a reason.  It is the only
  place that creates or closes tasks, so its invariants hold everywhere:
  - one open task per (TU, RU, type): a second trigger while one is open is refused as
    ``open`` and the deadline stays at the first trigger + TTL;
  - deadline = created_at + TTL (``unanswered_email``: the e-mail's receipt + 12 h);
  - no task for a logged-out TU or a blocked pair; online-only types need the RU online;
  - a new task of a stronger type closes the weaker ones of the pair as ``superseded``
    (:data:`~sidecar.domain.tasks.SUPERSEDES`).
* Every open task has an expiry timer at its deadline (``("expire", task_id)``).
* Create and close each produce: the task row (store op), a Stack task-history outbox row, a
  notification for Electron, and the services' ``on_task_created`` / ``on_task_closed`` hooks —
  all inside the caller's step, so they commit together.
* Task ids are deterministic (:func:`~sidecar.domain.tasks.task_id_for`), so the same trigger on
  any machine or after a crash names the same task.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from sidecar.decisions import recorded
from sidecar.domain.tasks import (SPECS, SUPERSEDES, Channel, CloseReason, Task, TaskType,
                                  task_id_for, vip_tier)
from sidecar.protocol import TaskClosed, TaskCreated, TaskView

if TYPE_CHECKING:  # pragma: no cover
    from sidecar.services.base import Step
    from sidecar.tu import TuRuntime


@dataclass(frozen=True, slots=True)
class Candidate:
    """A service's proposal.  ``anchor``: the instant the deadline counts from (default: now)."""

    type: TaskType
    ru: str
    source: str
    anchor: float | None = None
    meta: dict | None = None


@dataclass(frozen=True, slots=True)
class Refused:
    reason: str  # open | blocked | offline | logged_out | <service reason>


class TaskFactory:
    """Open tasks of every TU, indexed by id and by (tu, ru, type)."""

    def __init__(self) -> None:
        self.open: dict[str, Task] = {}  # task_id -> open task
        self.by_pair: dict[tuple[str, str], dict[TaskType, Task]] = {}  # (tu, ru) -> type -> task
        self.created_total = 0  # tasks created by this process (status)

    # queries ----------------------------------------------------------------------------------
    def open_for(self, tu: str, ru: str, type_: TaskType) -> Task | None:
        pair = self.by_pair.get((tu, ru))
        return None if pair is None else pair.get(type_)

    def open_of_pair(self, tu: str, ru: str) -> list[Task]:
        pair = self.by_pair.get((tu, ru))
        return [] if not pair else list(pair.values())

    def open_of_tu(self, tu: str) -> list[Task]:
        return sorted((t for t in self.open.values() if t.tu == tu), key=Task.sort_key)

    # create -----------------------------------------------------------------------------------
    @recorded  # every outcome goes to the decision log and Stack (DESIGN §9, §13)
    def propose(self, step: "Step", rt: "TuRuntime", cand: Candidate) -> Task | Refused:
        """Create the candidate's task or refuse it.  See the module rules."""
        if not rt.logged_in:
            return Refused("logged_out")
        if self.open_for(rt.tu, cand.ru, cand.type) is not None:
            return Refused("open")
        fav = rt.favorites.get(cand.ru, {})
        if fav.get("blocked_by_tu") or fav.get("blocked_by_ru"):
            return Refused("blocked")
        spec = SPECS[cand.type]
        if spec.online_only and cand.ru not in rt.online and cand.source != "post_chat":
            return Refused("offline")
        now = step.now
        anchor = now if cand.anchor is None else cand.anchor
        task = Task(
            task_id=task_id_for(rt.tu, cand.ru, cand.type, now, cand.source),
            type=cand.type, project=rt.project, tu=rt.tu, ru=cand.ru, source=cand.source,
            created_at=now, deadline=anchor + spec.ttl_s, vip=vip_tier(rt.spend_30d(cand.ru)),
            meta=dict(cand.meta or {}))
        for weaker in SUPERSEDES.get(cand.type, ()):
            old = self.open_for(rt.tu, cand.ru, weaker)
            if old is not None:
                self.close(step, rt, old, CloseReason.SUPERSEDED)
        self._index(task)
        rt.schedule(("expire", task.task_id), task.deadline)
        self.created_total += 1
        rt.persist_task(step, task, "created")
        step.notify("task.created", TaskCreated(task=task_view(task)))
        for svc in rt.services:
            svc.on_task_created(step, task)
        return task

    # close ------------------------------------------------------------------------------------
    def close(self, step: "Step", rt: "TuRuntime", task: Task, reason: CloseReason) -> bool:
        """Close an open task; False if it was not open (closing twice is a no-op)."""
        if self.open.pop(task.task_id, None) is None:
            return False
        pair = self.by_pair.get((task.tu, task.ru))
        if pair is not None:
            pair.pop(task.type, None)
            if not pair:
                del self.by_pair[(task.tu, task.ru)]
        rt.cancel(("expire", task.task_id))
        task.closed_at = step.now
        task.reason = reason
        rt.persist_task(step, task, "closed")
        step.notify("task.closed", TaskClosed(task_id=task.task_id, type=task.type.value,
                                              tu=task.tu, ru=task.ru, reason=reason.value,
                                              closed_at=step.now))
        for svc in rt.services:
            svc.on_task_closed(step, task)
        return True

    def close_channel(self, step: "Step", rt: "TuRuntime", ru: str, channel: Channel,
                      reason: CloseReason = CloseReason.ANSWERED) -> list[Task]:
        """The TU sent on ``channel`` to ``ru``: close the pair's tasks answered by it."""
        done = [t for t in self.open_of_pair(rt.tu, ru) if t.channel == channel]
        for t in done:
            self.close(step, rt, t, reason)
        return done

    def close_pair(self, step: "Step", rt: "TuRuntime", ru: str, reason: CloseReason) -> None:
        for t in self.open_of_pair(rt.tu, ru):
            self.close(step, rt, t, reason)

    def close_tu(self, step: "Step", rt: "TuRuntime", reason: CloseReason) -> None:
        for t in self.open_of_tu(rt.tu):
            self.close(step, rt, t, reason)

    def on_expire(self, step: "Step", rt: "TuRuntime", task_id: str) -> None:
        task = self.open.get(task_id)
        if task is not None:
            self.close(step, rt, task, CloseReason.EXPIRED)

    # restore ----------------------------------------------------------------------------------
    def adopt(self, rt: "TuRuntime", task: Task) -> None:
        """Take an open task loaded from SQLite after a restart (no events: it already exists)."""
        if task.task_id in self.open:
            return
        self._index(task)
        rt.schedule(("expire", task.task_id), task.deadline)

    def _index(self, task: Task) -> None:
        self.open[task.task_id] = task
        self.by_pair.setdefault((task.tu, task.ru), {})[task.type] = task


def task_view(t: Task) -> TaskView:
    """A task as Electron shows it (``task.created``, ``tasks.list``)."""
    return TaskView(task_id=t.task_id, type=t.type.value, project=t.project, tu=t.tu, ru=t.ru,
                    source=t.source, created_at=t.created_at, deadline=t.deadline, vip=t.vip,
                    meta=t.meta)
