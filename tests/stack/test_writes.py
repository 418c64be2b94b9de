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
