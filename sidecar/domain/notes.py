"""Notes for Electron as the domain states them (DESIGN §4 "sidecar → Electron"): frozen values a
step records (``step.notify(method, note)``); the app turns each into its wire Struct
(:mod:`sidecar.protocol`) only when it sends it, so the core never imports the wire format.

Every instant is unix seconds (UTC).  A note is a snapshot taken when the step decided it: a task
created and superseded in one step is announced as it was created.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from sidecar.domain.tasks import Task


@dataclass(frozen=True, slots=True)
class TaskSnapshot:
    """A task as Electron shows it (``task.created``, ``tasks.list``)."""

    task_id: str
    type: str
    project: str
    tu: str
    ru: str
    source: str
    created_at: float
    deadline: float
    vip: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    overdue: bool = False

    @classmethod
    def of(cls, t: Task) -> "TaskSnapshot":
        if cls is not TaskSnapshot:  # a subclass may add fields: its own __init__
            return cls(task_id=t.task_id, type=t.type.value, project=t.project, tu=t.tu, ru=t.ru,
                       source=t.source, created_at=t.created_at, deadline=t.deadline, vip=t.vip,
                       meta=dict(t.meta), overdue=t.overdue)
        # one per created task: filled through the slots (a frozen dataclass's __init__ sets
        # each field with object.__setattr__, ~3x slower; issue 11 item 5) — the same value
        snap = _new(TaskSnapshot)
        s = _SNAPSHOT_SLOTS
        s[0](snap, t.task_id)
        s[1](snap, t.type._value_)
        s[2](snap, t.project)
        s[3](snap, t.tu)
        s[4](snap, t.ru)
        s[5](snap, t.source)
        s[6](snap, t.created_at)
        s[7](snap, t.deadline)
        s[8](snap, t.vip)
        s[9](snap, dict(t.meta))
        s[10](snap, t.overdue)
        return snap


_new = object.__new__
#: the slot setters of TaskSnapshot's fields, in field order (what ``of`` fills)
_SNAPSHOT_SLOTS = tuple(TaskSnapshot.__dict__[f.name].__set__ for f in fields(TaskSnapshot))
assert [f.name for f in fields(TaskSnapshot)] == [
    "task_id", "type", "project", "tu", "ru", "source", "created_at", "deadline", "vip", "meta",
    "overdue"], "TaskSnapshot.of fills the slots in this order: keep it in step with the fields"


@dataclass(frozen=True, slots=True)
class TaskCreated:
    task: TaskSnapshot


@dataclass(frozen=True, slots=True)
class TaskClosed:
    task_id: str
    type: str
    tu: str
    ru: str
    reason: str
    closed_at: float


@dataclass(frozen=True, slots=True)
class TaskUpdated:
    """An answer-awaiting task passed its deadline and stays open (DESIGN §6)."""

    task_id: str
    type: str
    tu: str
    ru: str
    overdue: bool
    deadline: float
    at: float


@dataclass(frozen=True, slots=True)
class ChainAttempt:
    """One roll of a Follow-up chain (DESIGN §7), a diagnostic for the trace."""

    tu: str
    ru: str
    step: int
    chance: float
    hit: bool
    outcome: str
    at: float
