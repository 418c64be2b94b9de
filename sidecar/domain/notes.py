"""Notes for Electron as the domain states them (DESIGN §4 "sidecar → Electron"): frozen values a
step records (``step.notify(method, note)``); the app turns each into its wire Struct
(:mod:`sidecar.protocol.inbound`) only when it sends it, so the core never imports the wire format.

Every instant is unix seconds (UTC).  A note is a snapshot taken when the step decided it: a task
created and superseded in one step is announced as it was created.
"""
from __future__ import annotations

from dataclasses import dataclass

import msgspec

from sidecar.domain.tasks import Task


def snapshot(t: Task) -> Task:
    """A copy of ``t`` (and of its ``meta``) as it is now: what a note announces."""
    return msgspec.structs.replace(t, meta=dict(t.meta))


class TaskCreated(msgspec.Struct, frozen=True, gc=False):
    """``task``: the created task as it was then — its own copy (``meta`` too), which nothing else
    holds, so a close in the same step does not change what is announced.  Electron receives its
    :data:`~sidecar.domain.tasks.WIRE_FIELDS` (:class:`sidecar.protocol.outbound.TaskView`).

    A frozen msgspec Struct, not a dataclass like the other notes: one is built per created task,
    and a Struct costs a fraction of a frozen dataclass's ``__init__`` (docs/decisions.md
    "i24-eng4"); ``gc=False``: it holds one task and nothing refers back to it."""

    task: Task

    @classmethod
    def of(cls, t: Task) -> "TaskCreated":
        """``TaskCreated(snapshot(t))``: the note of ``t`` as it is now."""
        return cls(snapshot(t))


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
