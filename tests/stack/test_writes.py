"""Stack write builders: paths, bodies, idempotency keys, pairs (DESIGN §9)."""
from __future__ import annotations

import msgspec
import pytest

from sidecar.domain.tasks import CloseReason, Task, TaskType
from sidecar.stack.writes import (StackWrite, candidate, followup_chat_key, followup_mail_key,
                                  marker_key, marker_write, task_event)

T0 = 1_796_025_600.0  # 2026-11-30T08:00:00Z


def test_marker_write_set_and_clear():
    marker = {"sourceUnansweredTaskId": "t-1", "step": 0, "nextCheckAt": "2026-11-30T08:02:00Z"}
    key = followup_chat_key("g-tu-1", "g-ru-1", "t-1", 0)
    w = marker_write("g-tu-1", "g-ru-1", "followUpChat", marker, key)
    assert w == StackWrite(
        pair="g-tu-1/g-ru-1", idem_key="followUpChat:g-tu-1:g-ru-1:t-1:0:set", method="PUT",
        path="/v1/tus/g-tu-1/favorites/g-ru-1/markers/followUpChat",
        body=msgspec.json.encode({"value": marker}), kind="marker", tu="g-tu-1", ru="g-ru-1",
        marker="followUpChat")
    clear = marker_write("g-tu-1", "g-ru-1", "followUpChat", None,
                         followup_chat_key("g-tu-1", "g-ru-1", "t-1", 0, "clear"))
    assert clear.body == b'{"value":null}'
    assert clear.idem_key == "followUpChat:g-tu-1:g-ru-1:t-1:0:clear" != w.idem_key


def test_keys():
    assert followup_mail_key("tu", "ru", "postChat", "t-9") == "followUpMail:tu:ru:postChat:t-9:set"
    assert marker_key("followUpMail", "tu", "ru", "read", "ev-1", op="clear") == \
        "followUpMail:tu:ru:read:ev-1:clear"
    with pytest.raises(ValueError):
        marker_key("followUpChat", "tu", "ru", op="delete")
    with pytest.raises(ValueError):
        marker_write("tu", "ru", "somethingElse", {}, "k")


def test_path_segments_are_quoted():
    w = marker_write("tu 1/x", "ru?#", "followUpMail", {}, "k")
    assert w.path == "/v1/tus/tu%201%2Fx/favorites/ru%3F%23/markers/followUpMail"


def _task(**kw) -> Task:
    base = dict(task_id="t-abc", type=TaskType.UNANSWERED_MESSAGE, project="golden", tu="g-tu-1",
                ru="g-ru-1", source="socket", created_at=T0, deadline=T0 + 120, vip="red")
    base.update(kw)
    return Task(**base)


def test_task_events():
    created = task_event(_task(), "created")
    assert (created.method, created.path, created.idem_key, created.pair, created.kind) == \
        ("POST", "/v1/tus/g-tu-1/tasks", "task:t-abc:created", "g-tu-1/g-ru-1", "task")
    assert msgspec.json.decode(created.body) == {"event": "created", "task": {
        "task_id": "t-abc", "type": "unanswered_message", "project": "golden", "tu": "g-tu-1",
        "ru": "g-ru-1", "source": "socket", "created_at": T0, "deadline": T0 + 120, "closed_at": None, "reason": None, "vip": "red",
        "meta": {}}}
    closed = task_event(_task(closed_at=T0 + 30.25, reason=CloseReason.ANSWERED), "closed")
    body = msgspec.json.decode(closed.body)
    assert closed.idem_key == "task:t-abc:closed"
    assert (body["event"], body["task"]["closed_at"], body["task"]["reason"]) == \
        ("closed", T0 + 30.25, "answered")
    with pytest.raises(ValueError):
        task_event(_task(), "closed")
    with pytest.raises(ValueError):
        task_event(_task(), "updated")


def test_candidate():
    c = candidate("c-tu", "c-ru", TaskType.FOLLOW_UP_MESSAGE, "chain", T0, outcome="created",
                  ref="t-1:0", task_id="t-2")
    assert (c.path, c.idem_key, c.pair, c.kind) == (
        "/v1/tus/c-tu/candidates", "candidate:c-tu:c-ru:follow_up_message:t-1:0:created",
        "c-tu/c-ru", "candidate")
    assert msgspec.json.decode(c.body) == {
        "ru": "c-ru", "type": "follow_up_message", "source": "chain",
        "at": T0, "outcome": "created", "task_id": "t-2", "detail": {}}
    d = candidate("c-tu", "c-ru", "like", "socket", T0 + 0.5, outcome="refused:no_limit")
    assert d.idem_key == "candidate:c-tu:c-ru:like:socket@1796025600.500:refused:no_limit"


def test_routing_events_carry_exactly_the_writes_builders_make():
    """task_routed / candidate_event / marker_event build their routing event straight from the
    write's fields (issue 11 item 5): each equals the write of task_event / candidate /
    marker_write turned into its event, field for field — same path, key, body, source, priority,
    and the same payload once it is made (the task and candidate events keep it in ``facts``
    until a rule can see them: :func:`sidecar.router.model.with_payload`)."""
    from sidecar.router.model import with_payload
    from sidecar.stack.writes import candidate_event, marker_event, task_routed
    for task, event in ((_task(), "created"), (_task(meta={"answer_by": "mail"}), "created"),
                        (_task(closed_at=T0 + 30.25, reason=CloseReason.ANSWERED), "closed")):
        assert task_routed(task, event).payload == {} and task_routed(task, event).facts is not None
        assert with_payload(task_routed(task, event)) == task_event(task, event).event("task", event, {
            "tu": task.tu, "ru": task.ru, "project": task.project, "task_id": task.task_id,
            "type": task.type.value, "source": task.source,
            "reason": None if task.reason is None else task.reason.value, "vip": task.vip})
    with pytest.raises(ValueError):
        task_routed(_task(), "closed")
    for type_, outcome, task_id, detail in (
            (TaskType.UNANSWERED_MESSAGE, "created", "t-1", None),
            ("like", "refused:stronger_task_open", None, {"open_type": "unanswered_message"}),
            (TaskType.FOLLOW_UP_MESSAGE, "miss", "t-3", {"step": 1, "chance": 0.5})):
        ev = candidate_event("c-tu", "c-ru", type_, "socket", T0 + 0.25, outcome=outcome,
                             task_id=task_id, detail=detail)
        value = getattr(type_, "value", type_)
        assert with_payload(ev) == candidate("c-tu", "c-ru", type_, "socket", T0 + 0.25, outcome=outcome,
                               task_id=task_id, detail=detail).event(
            value, outcome.split(":", 1)[0], {"tu": "c-tu", "ru": "c-ru", "type": value,
                                              "source": "socket", "outcome": outcome,
                                              "task_id": task_id})
        assert ev.source == "candidates" and ev.priority == "low"
    for value in ({"step": 0}, None):
        key = followup_chat_key("g-tu 1", "g-ru/1", "t-1", 0, "set" if value else "clear")
        ev = marker_event("g-tu 1", "g-ru/1", "followUpChat", value, key)
        assert ev == marker_write("g-tu 1", "g-ru/1", "followUpChat", value, key).event(
            "followUpChat", "set" if value else "clear",
            {"tu": "g-tu 1", "ru": "g-ru/1", "name": "followUpChat", "value": value})
        assert (ev.source, ev.priority) == ("markers", "high")
    with pytest.raises(ValueError):
        marker_event("tu", "ru", "somethingElse", {}, "k")


from hypothesis import given, settings, strategies as st  # noqa: E402

_scalars = st.none() | st.booleans() | st.integers(-2**40, 2**40) | st.floats(allow_nan=False) | st.text(max_size=8)


@settings(max_examples=200, deadline=None)
@given(created=st.floats(0, 4e9), deadline=st.floats(0, 4e9), closed=st.none() | st.floats(0, 4e9),
       vip=st.none() | st.sampled_from(("red", "green")), meta=st.dictionaries(st.text(max_size=6), _scalars, max_size=3),
       detail=st.none() | st.dictionaries(st.text(max_size=6), _scalars, max_size=3),
       task_id=st.none() | st.text(max_size=10), ru=st.text(min_size=1, max_size=10))
def test_hot_builders_write_the_reference_bytes(created, deadline, closed, vip, meta, detail, task_id, ru):
    """The task and candidate bodies are encoded from Structs on the hot path (issue 11 item 5):
    the same bytes as the reference builders' dicts, for any instants, meta and detail."""
    from sidecar.stack.writes import candidate_event, task_routed
    task = _task(created_at=created, deadline=deadline, vip=vip, meta=meta, ru=ru,
                 **({} if closed is None else {"closed_at": closed, "reason": CloseReason.EXPIRED}))
    for event in ("created",) if closed is None else ("created", "closed"):
        assert task_routed(task, event).write.body == task_event(task, event).body
    assert candidate_event("c-tu", ru, "like", "chain", created, outcome="miss", task_id=task_id,
                           detail=detail).write.body == candidate(
        "c-tu", ru, "like", "chain", created, outcome="miss", task_id=task_id, detail=detail).body
