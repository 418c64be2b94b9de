"""Notes for Electron as the domain states them (DESIGN §4 "sidecar → Electron"): frozen values a
step records (``step.notify(method, note)``); the app turns each into its wire Struct
(:mod:`sidecar.protocol.inbound`) only when it sends it, so the core never imports the wire format.

Every instant is unix seconds (UTC).  A note is a snapshot taken when the step decided it: a task
created and superseded in one step is announced as it was created.
"""
from __future__ import annotations

from dataclasses import dataclass, fields

import msgspec

from sidecar.domain.tasks import Task


def snapshot(t: Task) -> Task:
    """A copy of ``t`` (and of its ``meta``) as it is now: what a note announces."""
    return msgspec.structs.replace(t, meta=dict(t.meta))


@dataclass(frozen=True, slots=True)
class TaskCreated:
    """``task``: the created task as it was then — its own copy (``meta`` too), which nothing else
    holds, so a close in the same step does not change what is announced.  Electron receives its
    :data:`~sidecar.domain.tasks.WIRE_FIELDS` (:class:`sidecar.protocol.outbound.TaskView`)."""

    task: Task

    @classmethod
    def of(cls, t: Task) -> "TaskCreated":
        """``TaskCreated(task=snapshot(t))``, its slot filled directly (one per created task: the
        frozen ``__init__`` alone was ~3 k instructions; issue 11 item 5)."""
        if cls is not TaskCreated:
            return cls(task=snapshot(t))
        note = _TaskCreatedFill()
        note.task = snapshot(t)
        note.__class__ = TaskCreated  # type: ignore[assignment]
        return note  # type: ignore[return-value]


class _TaskCreatedFill:
    """:class:`TaskCreated`'s slots, unfrozen: what ``TaskCreated.of`` fills."""

    __slots__ = TaskCreated.__slots__
    task: Task


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
