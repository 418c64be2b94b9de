"""One Task shape (issue 19 item 6): :class:`sidecar.domain.tasks.Task` is the one Struct; the
wire view (``TaskView``), the Stack body (``_TaskBody``) and the history row (``HistoryRow``) are
its ``WIRE_FIELDS`` / ``STACK_FIELDS`` / ``HISTORY_FIELDS`` views.  These tests keep each view's
Struct equal to its declaration and to Task's field types, and each encoding equal to the
projection of a Task's fields, so a field added to Task and not to a view (or the other way
round) fails here instead of being dropped at send time."""
from __future__ import annotations

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from sidecar.app.wire import task_view, to_wire
from sidecar.domain import notes
from sidecar.domain.tasks import (HISTORY_FIELDS, STACK_FIELDS, WIRE_FIELDS, CloseReason,
                                  HistoryRow, Task, TaskType, wire_type)
from sidecar.protocol.outbound import TaskView
from sidecar.stack import writes

_VIEWS = [(TaskView, WIRE_FIELDS), (writes._TaskBody, STACK_FIELDS), (HistoryRow, HISTORY_FIELDS)]


def _drift(view: type[msgspec.Struct], names: tuple[str, ...], task: type = Task) -> list[str]:
    """What differs between ``view`` and Task's ``names``: field names and order, types (an enum
    as ``str``), and a default the view has that Task lacks or changes."""
    problems = []
    task_fields = {f.name: f for f in msgspec.structs.fields(task)}
    view_fields = [f for f in msgspec.structs.fields(view) if f.name != "seq"]
    if [f.name for f in view_fields] != list(names):
        problems.append(f"fields {[f.name for f in view_fields]} != {list(names)}")
    if not set(names) <= set(task_fields):
        problems.append(f"not Task fields: {set(names) - set(task_fields)}")
    for f in view_fields:
        t = task_fields.get(f.name)
        if t is None:
            continue
        if f.type != wire_type(t.type):
            problems.append(f"{f.name}: {f.type} != Task's {t.type}")
        if t.default is not msgspec.NODEFAULT or t.default_factory is not msgspec.NODEFAULT:
            task_default = t.default if t.default is not msgspec.NODEFAULT else t.default_factory()
            view_default = f.default if f.default is not msgspec.NODEFAULT else (
                f.default_factory() if f.default_factory is not msgspec.NODEFAULT else task_default)
            if view_default != task_default:
                problems.append(f"{f.name}: default {view_default!r} != Task's {task_default!r}")
    return problems


def test_every_view_is_its_declared_projection_of_task():
    for view, names in _VIEWS:
        assert _drift(view, names) == [], view.__name__


def test_the_declarations_cover_task():
    """Every Task field is shown somewhere: WIRE lacks only the close (a task is announced
    open), STACK only ``overdue`` (derived, not stored)."""
    assert set(Task.__struct_fields__) - set(WIRE_FIELDS) == {"closed_at", "reason"}
    assert set(Task.__struct_fields__) - set(STACK_FIELDS) == {"overdue"}


def test_a_field_added_to_task_only_is_caught():
    class Wider(Task):
        extra: int = 0

    assert _drift(TaskView, (*WIRE_FIELDS, "extra"), Wider)  # the view lacks it
    assert _drift(TaskView, WIRE_FIELDS + ("closed_at",))  # a view with a field more


_text = st.text(max_size=12)
_time = st.floats(min_value=0, max_value=4e9, allow_nan=False)
_meta = st.dictionaries(st.text(max_size=8), st.one_of(st.none(), st.booleans(), st.integers(),
                                                       st.text(max_size=8)), max_size=3)
tasks = st.builds(
    Task, _text, st.sampled_from(TaskType), _text, _text, _text, _text, _time, _time,
    st.sampled_from([None, "red", "yellow", "green"]), st.none() | _time,
    st.none() | st.sampled_from(CloseReason), _meta, st.booleans())


def _value(v: object) -> object:
    return getattr(v, "_value_", v)


def _projection(task: Task, names: tuple[str, ...]) -> dict:
    return {n: _value(getattr(task, n)) for n in names}


@given(tasks)
def test_each_encoding_is_the_projection_of_the_task(task):
    enc = msgspec.json.encode
    wire = enc(_projection(task, WIRE_FIELDS))
    assert enc(task_view(task)) == wire
    note = to_wire("task.created", notes.TaskCreated.of(task))
    assert enc(note) == b'{"seq":0,"task":' + wire + b"}"
    assert msgspec.json.decode(wire, type=TaskView) == task_view(task)  # and it round-trips

    stack = enc({"event": "created", "task": _projection(task, STACK_FIELDS)})
    assert writes.task_event(task, "created").body == stack
    routed = writes.task_routed(task, "created").write
    assert routed is not None and routed.body == stack

    assert HistoryRow.of(task) == HistoryRow(**_projection(task, HISTORY_FIELDS))


@given(tasks)
def test_a_note_keeps_the_task_as_it_was_created(task):
    note = notes.TaskCreated.of(task)
    assert note.task == task and note.task is not task and note.task.meta is not task.meta
    before = msgspec.json.encode(note.task)
    task.meta["later"] = 1
    task.closed_at, task.reason = -1.0, CloseReason.SUPERSEDED  # closed in the same step
    assert msgspec.json.encode(note.task) == before


@given(st.text(max_size=12), st.text(max_size=12), st.sampled_from(TaskType), _time, st.text(max_size=12))
def test_task_ids_are_the_reference_hash(tu, ru, type_, at, source):
    """:func:`task_id_for` copies a prepared hasher (issue 24 lever 6): the id is still
    ``"t-"`` + BLAKE2b-72 of ``tu|ru|type|at (3 decimals)|source``, as every stored id and trace has it."""
    import hashlib
    from sidecar.domain.tasks import task_id_for
    raw = f"{tu}|{ru}|{type_.value}|{at:.3f}|{source}".encode()
    assert task_id_for(tu, ru, type_, at, source) == "t-" + hashlib.blake2b(raw, digest_size=9).hexdigest()
    assert task_id_for(tu, ru, type_, at, source) == task_id_for(tu, ru, type_, at, source)  # no state kept
