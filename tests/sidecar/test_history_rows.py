"""Task history rows are values of one type (issue 12): :class:`HistoryRow`, frozen, whether they
come from Stack's startup data, from the local task table at login, or from a task the runtime
created or closed since (DESIGN §9 "Restore on login")."""
from __future__ import annotations

import msgspec
import pytest

from sidecar.domain.tasks import HistoryRow
from sidecar.stack.startup import parse_startup
from tests.sidecar.world import T0, World, fav

TU, RU = "tu-1", "ru-1"
STACK_ROW = {"task_id": "h-1", "type": "like", "ru": RU, "source": "socket", "created_at": T0 - 500,
             "closed_at": T0 - 400, "reason": "answered", "deadline": T0 - 100, "vip": None}


def test_rows_from_stack_from_local_tasks_and_from_live_tasks_are_one_frozen_type():
    w = World()
    w.login([fav(RU)], [STACK_ROW])
    w.at(10).ru_writes(RU)
    rt = w.d.engine.tus[TU]
    [task] = w.d.created("unanswered_message")
    held = rt.last_task(RU, "unanswered_message")
    assert held == HistoryRow(task_id=task.task_id, type="unanswered_message", ru=RU,
                              source=task.source, created_at=task.created_at)
    w.at(20).tu_writes(RU)
    [closed] = w.d.closed("unanswered_message")
    after = rt.last_task(RU, "unanswered_message")
    # a close is a new row; the row a service may still hold is not edited under it
    assert after.closed_at == closed.closed_at and after.reason == closed.reason
    assert held.closed_at is None and held.task_id == after.task_id
    assert [type(r) for r in rt.history[RU]] == [HistoryRow, HistoryRow]
    assert rt.history[RU][0] == HistoryRow(task_id="h-1", type="like", ru=RU, source="socket",
                                           created_at=T0 - 500, closed_at=T0 - 400, reason="answered")
    # the next login restores the same rows from the local task table
    w.d.logout(TU)
    local = w.local()
    w.d.login(TU, "golden", startup=None, **local)
    again = w.d.engine.tus[TU].history[RU]
    assert all(type(r) is HistoryRow for r in again)
    assert [r.task_id for r in again] == [task.task_id]


def test_a_history_row_cannot_be_edited():
    row = msgspec.convert(STACK_ROW, HistoryRow)
    with pytest.raises(AttributeError):
        row.closed_at = None  # type: ignore[misc]


def test_stack_startup_rows_become_history_rows_and_bad_rows_are_skipped():
    s = parse_startup(TU, {"favorites": [], "history": [STACK_ROW, {"task_id": "x", "type": "like"}]})
    assert s is not None and s.skipped == 1
    assert s.history == [msgspec.convert(STACK_ROW, HistoryRow)]
