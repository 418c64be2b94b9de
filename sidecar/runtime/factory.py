"""The Task Factory (DESIGN §6, seed 003 "Цільовий набір").

Rule 1.  Services hand it **candidates**; it creates a task or refuses with a reason.  It is the only
         place that creates or closes tasks, so its invariants hold everywhere:
         - one open task per (TU, RU, type): a second trigger while one is open is refused as
           ``open`` and the deadline stays at the first trigger + TTL;
         - deadline = created_at + TTL (``unanswered_email``: the e-mail's receipt + 12 h);
         - no task for a logged-out TU or a blocked pair; online-only types need the RU online (a
           candidate may override its type's rule, :attr:`Candidate.online_required`);
         - one strength order per channel (:data:`~sidecar.domain.tasks.STRENGTH`): a candidate is
           refused as ``stronger_task_open`` while a stronger task of its channel is open, and a new
           task closes the weaker ones of the pair as ``superseded`` — after the services heard of the
           new task, so e.g. a chain Follow-up superseded by a new Unanswered message writes only the
           chain's removal, never a step and its clear in one step (DESIGN §6, §7).
Rule 2.  Every open task has a timer at its deadline (``("deadline", task_id)``): an answer-awaiting task
         becomes **overdue** (``task.updated {overdue: true}``, stays open); a prompt closes ``expired``
         (DESIGN §6).  The same timer fires again :data:`OVERDUE_ALERT_S` after the deadline: the
         operator is told through the router (``sidecar`` / ``operator`` / ``overdue``, DESIGN §10) when
         a TU has ≥ :data:`OVERDUE_ALERT_COUNT` overdue tasks or one overdue ≥ 10 min, at most once per
         TU per clock hour (the event's ``dedup_key`` names the TU and the hour).  An online-only
         prompt (Follow-up message; Follow-up mail except post-chat) also expires
         as soon as RU Online says its RU went offline (:meth:`TaskFactory.expire_offline`).
Rule 3.  Create and close each produce: the task row (store op), a Stack task-history outbox row, a
         notification for Electron, and the services' ``on_task_created`` / ``on_task_closed`` hooks —
         all inside the caller's step, so they commit together.  A close's Stack event is queued after
         the hooks' marker writes, so Stack never holds a close without the marker it caused (restore
         reads both, DESIGN §7).
Rule 4.  Task ids are deterministic (:func:`~sidecar.domain.tasks.task_id_for`), so the same trigger on
         any machine or after a crash names the same task.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import msgspec

from sidecar.runtime.decisions import Recorder, recorded
from sidecar.domain.tasks import (ONLINE_REQUIRED, SPECS, Channel, CloseReason, Task, TaskType, stronger_or_same,
                                  task_id_for, vip_tier, weaker_than)
from sidecar.domain.notes import TaskClosed, TaskCreated, TaskUpdated, snapshot
from sidecar.router.model import RoutingEvent

OVERDUE_ALERT_S = 600.0  # one task overdue this long alerts the shift lead (DESIGN §10)
OVERDUE_ALERT_COUNT = 5  # or this many overdue tasks of one TU at once

if TYPE_CHECKING:  # pragma: no cover
    from sidecar.domain.favorites import Favorite
    from sidecar.runtime.step import Step


class Candidate(msgspec.Struct, frozen=True):
    """A service's proposal.  ``anchor``: the instant the deadline counts from (default: now).
    ``online_required``: None keeps the type's rule (:data:`~sidecar.domain.tasks.SPECS`
    ``online_only``); True / False overrides it for this task — at creation and for the offline
    expiry of the open task (DESIGN §6: a Follow-up mail is online-only "except post-chat").  The
    factory applies the flag and knows nothing of why a service sets it.  A frozen Struct, built
    positionally or by name (one per candidate: docs/decisions.md "Keywords vs positions")."""

    type: TaskType
    ru: str
    source: str
    anchor: float | None = None
    meta: dict | None = None
    online_required: bool | None = None

    def needs_online(self) -> bool:
        spec_rule = SPECS[self.type].online_only
        return spec_rule if self.online_required is None else self.online_required


@dataclass(frozen=True, slots=True)
class Refused:
    reason: str  # open | stronger_task_open | blocked | offline | logged_out | <service reason>


class TaskOwner(Recorder, Protocol):
    """What the factory needs of the TU a task belongs to (a
    :class:`~sidecar.runtime.tu.TuRuntime`): its gates, its timers, and the two reports —
    :meth:`task_created` / :meth:`task_closed` — through which the TU tells its services."""

    project: str
    logged_in: bool
    online: set[str]

    def attrs(self, ru: str) -> "Favorite": ...
    def blocked(self, ru: str) -> bool: ...
    def spend_30d(self, ru: str) -> float | None: ...
    def schedule(self, key: tuple, due: float, payload: Any = None) -> None: ...
    def cancel(self, key: tuple) -> bool: ...
    def persist_task(self, step: "Step", task: Task, event: str) -> None: ...
    def note_history(self, task: Task) -> None: ...
    def task_created(self, step: "Step", task: Task) -> None: ...
    def task_closed(self, step: "Step", task: Task) -> None: ...


#: what ``propose`` builds a Task from, positionally: keep in step with Task's fields
assert Task.__struct_fields__[:12] == ("task_id", "type", "project", "tu", "ru", "source",
                                       "created_at", "deadline", "vip", "closed_at", "reason",
                                       "meta"), "TaskFactory.propose builds Task positionally"

class TaskFactory:
    """Open tasks of every TU, indexed by id and by (tu, ru, type)."""

    def __init__(self) -> None:
        self.open: dict[str, Task] = {}  # task_id -> open task
        self.by_pair: dict[tuple[str, str], dict[TaskType, Task]] = {}  # (tu, ru) -> type -> task
        self.rus_by_tu: dict[str, set[str]] = {}  # tu -> RUs with an open task (online passes)
        # tu -> ids of its open overdue tasks: a deadline counts them without listing every open
        # task (that was O(open tasks) per deadline timer)
        self.overdue_by_tu: dict[str, set[str]] = {}
        self.created_total = 0  # tasks created by this process (status)
        self._overdue_alerted: dict[str, float] = {}  # tu -> last operator-overdue alert (unix s)

    # queries ----------------------------------------------------------------------------------
    def open_for(self, tu: str, ru: str, type_: TaskType) -> Task | None:
        pair = self.by_pair.get((tu, ru))
        return None if pair is None else pair.get(type_)

    def open_of_pair(self, tu: str, ru: str) -> list[Task]:
        pair = self.by_pair.get((tu, ru))
        return [] if not pair else list(pair.values())

    def open_rus(self, tu: str) -> frozenset[str]:
        """The RUs of ``tu`` with at least one open task — what an online pass judges, without
        listing (and sorting) every open task of the TU on every pass."""
        return frozenset(self.rus_by_tu.get(tu, ()))

    def open_of_tu(self, tu: str) -> list[Task]:
        return sorted((t for t in self.open.values() if t.tu == tu), key=Task.sort_key)

    def overdue_count(self, tu: str) -> int:
        """How many of ``tu``'s open tasks are overdue (O(1))."""
        return len(self.overdue_by_tu.get(tu, ()))

    # create -----------------------------------------------------------------------------------
    @recorded  # every outcome goes to the decision log and Stack (DESIGN §9, §13)
    def propose(self, step: "Step", rt: TaskOwner, cand: Candidate) -> Task | Refused:
        """Create the candidate's task or refuse it.  See the module rules."""
        if not rt.logged_in:
            return Refused("logged_out")
        tu, ru, type_ = rt.tu, cand.ru, cand.type
        pair = self.by_pair.get((tu, ru))
        if pair:  # stronger_open(), with the pair looked up once
            held = next((t for t in stronger_or_same(type_) if t in pair), None)
            if held is not None:
                return Refused("open" if held is type_ else "stronger_task_open")
        if rt.blocked(ru):
            return Refused("blocked")
        spec = SPECS[type_]
        online_only = spec.online_only if cand.online_required is None else cand.online_required
        if online_only and ru not in rt.online:  # cand.needs_online()
            return Refused("offline")
        now = step.now
        anchor = now if cand.anchor is None else cand.anchor
        source = cand.source
        task = Task(  # positional, in Task's field order (see Task)
            task_id_for(tu, ru, type_, now, source), type_, rt.project, tu, ru, source, now,
            anchor + spec.ttl_s, vip_tier(rt.spend_30d(ru)), None, None,
            dict(cand.meta) if cand.meta else {})
        if cand.online_required is not None and cand.online_required != spec.online_only:
            task.meta[ONLINE_REQUIRED] = cand.online_required  # the task keeps the override
        weaker = [pair[w] for w in weaker_than(type_) if w in pair] if pair else []
        self._index(task)
        rt.schedule(("deadline", task.task_id), task.deadline)
        self.created_total += 1
        rt.persist_task(step, task, "created")
        step.notify("task.created", TaskCreated(snapshot(task)))
        rt.task_created(step, task)  # the TU tells its services
        for old in weaker:  # after the hooks: see the module rules
            self.close(step, rt, old, CloseReason.SUPERSEDED)
        return task

    def stronger_open(self, tu: str, ru: str, type_: TaskType) -> str | None:
        """Why a ``type_`` candidate must wait: ``open`` (the same type is open),
        ``stronger_task_open`` (a stronger one of its channel is), or None."""
        t = self.blocking_type(tu, ru, type_)
        if t is None:
            return None
        return "open" if t is type_ else "stronger_task_open"

    def blocking_type(self, tu: str, ru: str, type_: TaskType) -> TaskType | None:
        """The open task type of the pair that holds a ``type_`` candidate back (the same type
        or a stronger one of its channel, :data:`~sidecar.domain.tasks.STRENGTH`), or None."""
        pair = self.by_pair.get((tu, ru))
        if not pair:
            return None
        return next((t for t in stronger_or_same(type_) if t in pair), None)

    # close ------------------------------------------------------------------------------------
    def close(self, step: "Step", rt: TaskOwner, task: Task, reason: CloseReason) -> bool:
        """Close an open task; False if it was not open (closing twice is a no-op)."""
        if self.open.pop(task.task_id, None) is None:
            return False
        pair = self.by_pair.get((task.tu, task.ru))
        if pair is not None:
            pair.pop(task.type, None)
            if not pair:
                del self.by_pair[(task.tu, task.ru)]
                rus = self.rus_by_tu.get(task.tu)
                if rus is not None:
                    rus.discard(task.ru)
                    if not rus:
                        del self.rus_by_tu[task.tu]
        if task.overdue:
            self._unmark_overdue(task)
        rt.cancel(("deadline", task.task_id))
        task.closed_at = step.now
        task.reason = reason
        rt.note_history(task)
        step.notify("task.closed", TaskClosed(task_id=task.task_id, type=task.type.value,
                                              tu=task.tu, ru=task.ru, reason=reason.value,
                                              closed_at=step.now))
        rt.task_closed(step, task)  # the TU tells its services
        rt.persist_task(step, task, "closed")  # after the hooks' marker writes (module rules)
        return True

    def close_channel(self, step: "Step", rt: TaskOwner, ru: str, channel: Channel,
                      reason: CloseReason = CloseReason.ANSWERED) -> list[Task]:
        """The TU sent on ``channel`` to ``ru``: close the pair's tasks answered by it."""
        done = [t for t in self.open_of_pair(rt.tu, ru) if t.channel == channel]
        for t in done:
            self.close(step, rt, t, reason)
        return done

    def close_pair(self, step: "Step", rt: TaskOwner, ru: str, reason: CloseReason) -> None:
        for t in self.open_of_pair(rt.tu, ru):
            self.close(step, rt, t, reason)

    def close_tu(self, step: "Step", rt: TaskOwner, reason: CloseReason) -> None:
        for t in self.open_of_tu(rt.tu):
            self.close(step, rt, t, reason)

    def on_deadline(self, step: "Step", rt: TaskOwner, task_id: str) -> None:
        """The deadline timer: a prompt expires, an answer-awaiting task becomes overdue."""
        task = self.open.get(task_id)
        if task is None:
            return
        if not task.awaits_answer:
            self.close(step, rt, task, CloseReason.EXPIRED)
            return
        if not task.overdue:
            self._mark_overdue(task)
            step.notify("task.updated", TaskUpdated(task_id=task.task_id, type=task.type.value,
                                                    tu=task.tu, ru=task.ru, overdue=True,
                                                    deadline=task.deadline, at=step.now))
            rt.schedule(("deadline", task.task_id), task.deadline + OVERDUE_ALERT_S)
            if self.overdue_count(task.tu) < OVERDUE_ALERT_COUNT:
                return
        self._operator_overdue(step, task)

    def _mark_overdue(self, task: Task) -> None:
        task.overdue = True
        self.overdue_by_tu.setdefault(task.tu, set()).add(task.task_id)

    def _unmark_overdue(self, task: Task) -> None:
        ids = self.overdue_by_tu.get(task.tu)
        if ids is not None:
            ids.discard(task.task_id)
            if not ids:
                del self.overdue_by_tu[task.tu]

    def _operator_overdue(self, step: "Step", task: Task) -> None:
        """``sidecar/operator/overdue`` (high): the shift lead hears of an operator falling behind,
        once per TU per hour (DESIGN §10 table): an hour after the TU's last alert at the
        earliest — so twelve TUs do not all alert at a clock hour's first second — and, across a
        restart that forgot it, the ``dedup_key`` (TU + clock hour) still refuses a second one."""
        last = self._overdue_alerted.get(task.tu)
        if last is not None and step.now < last + 3600.0:
            return
        self._overdue_alerted[task.tu] = step.now
        overdue = [self.open[i] for i in self.overdue_by_tu.get(task.tu, ())]
        step.emit(RoutingEvent(source="sidecar", subject="operator", action="overdue", priority="high",
                        payload={"tu": task.tu, "count": len(overdue),
                                 "oldest_overdue_s": round(max(step.now - t.deadline for t in overdue), 3),
                                 "task_id": task.task_id, "ru": task.ru},
                        dedup_key=f"operator-overdue:{task.tu}:{int(step.now // 3600)}"))

    def expire_offline(self, step: "Step", rt: TaskOwner, ru: str) -> list[Task]:
        """RU Online says ``ru`` went offline: its open online-only prompts close as ``expired``
        (DESIGN §6; seed 003 "або RU вийде в офлайн і таск закриється як прострочений").  A task
        whose candidate was made online-exempt (:attr:`Candidate.online_required` False, e.g. the
        post-chat Follow-up mail) stays open."""
        done = [t for t in self.open_of_pair(rt.tu, ru)
                if t.online_required and not t.awaits_answer]
        for t in done:
            self.close(step, rt, t, CloseReason.EXPIRED)
        return done

    # restore ----------------------------------------------------------------------------------
    def adopt(self, rt: TaskOwner, task: Task, now: float) -> None:
        """Take an open task loaded from SQLite after a restart (no events: it already exists;
        a new process starts a new stream and Electron lists the open tasks).  An answer-awaiting
        task already past its deadline is overdue at once; any other keeps its deadline timer."""
        if task.task_id in self.open:
            return
        self._index(task)
        if task.awaits_answer and task.deadline <= now:
            self._mark_overdue(task)
            if now < task.deadline + OVERDUE_ALERT_S:
                rt.schedule(("deadline", task.task_id), task.deadline + OVERDUE_ALERT_S)
        else:
            rt.schedule(("deadline", task.task_id), task.deadline)

    def _index(self, task: Task) -> None:
        self.open[task.task_id] = task
        self.by_pair.setdefault((task.tu, task.ru), {})[task.type] = task
        self.rus_by_tu.setdefault(task.tu, set()).add(task.ru)
        if task.overdue:  # (a task comes in overdue only through _mark_overdue; kept exact anyway)
            self.overdue_by_tu.setdefault(task.tu, set()).add(task.task_id)
