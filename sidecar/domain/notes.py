"""Notes for Electron as the domain states them (DESIGN §4 "sidecar → Electron"): frozen values a
step records (``step.notify(method, note)``); the app turns each into its wire Struct
(:mod:`sidecar.protocol.inbound`) only when it sends it, so the core never imports the wire format.

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
        # one per created task (issue 11 item 5): filled as an unfrozen twin with the same slots
        # (plain slot stores, ~60 instructions each), then made a TaskSnapshot by __class__
        # assignment, which CPython allows between classes of the same layout — the same value,
        # frozen from then on.  A frozen dataclass's __init__ (object.__setattr__ per field) or
        # the slots' own setters cost ~800 instructions a field.
        snap = _TaskSnapshotFill()
        snap.task_id = t.task_id
        snap.type = t.type._value_
        snap.project = t.project
        snap.tu = t.tu
        snap.ru = t.ru
        snap.source = t.source
        snap.created_at = t.created_at
        snap.deadline = t.deadline
        snap.vip = t.vip
        snap.meta = dict(t.meta)
        snap.overdue = t.overdue
        snap.__class__ = TaskSnapshot  # type: ignore[assignment]
        return snap  # type: ignore[return-value]


class _TaskSnapshotFill:
    """:class:`TaskSnapshot`'s slots, unfrozen: what ``TaskSnapshot.of`` fills (never leaves it)."""

    __slots__ = TaskSnapshot.__slots__
    task_id: str
    type: str
    project: str
    tu: str
    ru: str
    source: str
    created_at: float
    deadline: float
    vip: str | None
    meta: dict[str, Any]
    overdue: bool


assert [f.name for f in fields(TaskSnapshot)] == list(_TaskSnapshotFill.__slots__) == [
    "task_id", "type", "project", "tu", "ru", "source", "created_at", "deadline", "vip", "meta",
    "overdue"], "TaskSnapshot.of fills every field: keep it in step with the fields"


@dataclass(frozen=True, slots=True)
class TaskCreated:
    task: TaskSnapshot

    @classmethod
    def of(cls, t: Task) -> "TaskCreated":
        """``TaskCreated(task=TaskSnapshot.of(t))``, built as ``TaskSnapshot.of`` builds (one per
        created task: the frozen ``__init__`` alone was ~3 k instructions; issue 11 item 5)."""
        if cls is not TaskCreated:
            return cls(task=TaskSnapshot.of(t))
        note = _TaskCreatedFill()
        note.task = TaskSnapshot.of(t)
        note.__class__ = TaskCreated  # type: ignore[assignment]
        return note  # type: ignore[return-value]


class _TaskCreatedFill:
    """:class:`TaskCreated`'s slots, unfrozen: what ``TaskCreated.of`` fills."""

    __slots__ = TaskCreated.__slots__
    task: TaskSnapshot


assert list(_TaskCreatedFill.__slots__) == [f.name for f in fields(TaskCreated)] == ["task"]


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
