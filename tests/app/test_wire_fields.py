"""The domain notes and their wire Structs keep the same fields: :mod:`sidecar.app.wire`
converts one into the other by attribute name, so a field added to one side only would be
dropped or fail at send time instead of here.  (A task's own views: test_task_views.py.)"""
from __future__ import annotations

import dataclasses

import msgspec
import pytest

from sidecar.protocol import outbound as out
from sidecar.domain import notes


def _note_fields(cls: type) -> dict[str, object]:
    if issubclass(cls, msgspec.Struct):  # TaskCreated (one per created task: a cheap Struct)
        return _wire_fields(cls)
    out: dict[str, object] = {}
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            out[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            out[f.name] = f.default_factory()
        else:
            out[f.name] = dataclasses.MISSING
    return out


def _wire_fields(cls: type[msgspec.Struct]) -> dict[str, object]:
    out: dict[str, object] = {}
    for f in msgspec.structs.fields(cls):
        if f.name == "seq":  # stamped by the bridge's stream, never by the domain
            continue
        if f.default is not msgspec.NODEFAULT:
            out[f.name] = f.default
        elif f.default_factory is not msgspec.NODEFAULT:
            out[f.name] = f.default_factory()
        else:
            out[f.name] = dataclasses.MISSING
    return out


@pytest.mark.parametrize(("note", "method"), [
    (notes.TaskCreated, "task.created"),
    (notes.TaskClosed, "task.closed"),
    (notes.TaskUpdated, "task.updated"),
    (notes.ChainAttempt, "chain.attempt"),
])
def test_every_note_has_the_fields_of_its_wire_struct(note, method):
    assert set(_note_fields(note)) == set(_wire_fields(out.OUTBOUND[method]))


def test_a_field_added_to_one_side_only_is_caught():
    @dataclasses.dataclass(frozen=True)
    class Wider(notes.TaskClosed):
        extra: int = 0

    assert set(_note_fields(Wider)) != set(_wire_fields(out.OUTBOUND["task.closed"]))


def test_task_created_of_is_the_constructors_value_and_stays_frozen():
    """``TaskCreated.of`` (issue 11 item 5) equals ``TaskCreated(task=snapshot(t))`` and is
    frozen like the other notes (a frozen Struct raises AttributeError, as a frozen dataclass's
    FrozenInstanceError is one)."""
    from sidecar.domain.tasks import Task, TaskType

    t = Task(task_id="t-1", type=TaskType.LIKE, project="prime", tu="p-tu", ru="p-ru",
             source="socket", created_at=1.5, deadline=301.5, meta={"answer_by": "mail"})
    note = notes.TaskCreated.of(t)
    assert type(note) is notes.TaskCreated and note == notes.TaskCreated(task=notes.snapshot(t))
    with pytest.raises(AttributeError):
        note.task = None  # type: ignore[misc]
