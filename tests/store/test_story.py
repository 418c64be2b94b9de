"""The pair's story (:mod:`sidecar.store.story`, issue 23 item 3): a store filled through the real
ops (tasks created, closed answered after their deadline, left open past it; decisions; a marker
write to Stack) reads back in time order with every close — ``why`` used to show decisions only."""
from __future__ import annotations

from pathlib import Path

import pytest

from sidecar.domain.tasks import CloseReason, Task, TaskType
from sidecar.router.model import Delivery
from sidecar.router.ops import PutDelivery
from sidecar.store import Store
from sidecar.store.decisions import DecisionLogUnavailable
from sidecar.store.ops import PutDecision, PutTask
from sidecar.store.story import read_data_dir

T0 = 1796025600.0  # 2026-11-30T08:00:00Z
TU, RU = "g-tu-01", "g-ru-01-0007"


def task(tid: str, type_: TaskType, at: float, ttl: float, ru: str = RU, **close) -> Task:
    return Task(tid, type_, "g", TU, ru, "socket", at, at + ttl, **close)


def marker(n: int, at: float, name: str, status: str = "delivered") -> PutDelivery:
    return PutDelivery(Delivery(
        id=f"d-{n}", event_id=f"e-{n}", event_at=at, source="tasks", subject="marker", action="put",
        priority="normal", rule=None, channel="stack", target="stack", status=status, message=b"{}",
        pair=f"{TU}/{RU}", idem_key=f"k-{n}", method="PUT",
        path=f"/v1/tus/{TU}/favorites/{RU}/markers/{name}", tu=TU, ru=RU))


async def fill(data_dir: Path) -> None:
    um = TaskType.UNANSWERED_MESSAGE
    async with await Store.open(data_dir / "sidecar.db") as store:
        await store.commit([
            PutDecision(TU, RU, T0, um.value, "socket", "created", "t-1"),
            PutTask(task("t-1", um, T0, 120)),
            PutDecision(TU, RU, T0 + 10, TaskType.FOLLOW_UP_MAIL.value, "last_mail_6h", "refused:freeloader"),
            PutDecision(TU, "someone-else", T0 + 11, um.value, "socket", "created", "t-x"),
            PutTask(task("t-x", um, T0 + 11, 120, ru="someone-else")),
        ])
        # the same task answered after its deadline: overdue at T0+120, closed at T0+300
        await store.commit([PutTask(task("t-1", um, T0, 120, closed_at=T0 + 300, reason=CloseReason.ANSWERED)),
                            marker(1, T0 + 300, "followUpChat")])
        await store.commit([
            PutDecision(TU, RU, T0 + 400, TaskType.FOLLOW_UP_MESSAGE.value, "chain", "created", "t-2", {"step": 0}),
            PutTask(task("t-2", TaskType.FOLLOW_UP_MESSAGE, T0 + 400, 300)),  # expires, never overdue
            PutTask(task("t-3", um, T0 + 500, 120)),  # still open at the newest instant below: overdue
            PutDecision(TU, RU, T0 + 1000, um.value, "socket", "miss"),
        ])


async def test_the_whole_story_in_time_order(tmp_path):
    await fill(tmp_path)
    story = read_data_dir(tmp_path, TU, RU)
    got = [(e.at - T0, e.kind) for e in story]
    assert got == [(0, "candidate"), (0, "created"), (10, "refused"), (120, "overdue"), (300, "marker"),
                   (300, "closed"), (400, "chain"), (400, "created"), (500, "created"), (620, "overdue"),
                   (1000, "candidate")]
    closed = next(e for e in story if e.kind == "closed")
    assert closed.details["reason"] == "answered" and "answered" in closed.text and "t-1" in closed.text
    assert story[4].details == {"marker": "followUpChat", "status": "delivered", "attempts": 0}
    assert all("someone-else" not in e.text and e.details.get("task_id") != "t-x" for e in story)


async def test_a_follow_up_closed_before_its_deadline_is_never_overdue(tmp_path):
    await fill(tmp_path)
    kinds = [(e.kind, e.details.get("task_id")) for e in read_data_dir(tmp_path, TU, RU)]
    assert ("overdue", "t-2") not in kinds and ("overdue", "t-1") in kinds


def test_no_database_is_one_sentence(tmp_path):
    with pytest.raises(DecisionLogUnavailable, match="no sidecar database"):
        read_data_dir(tmp_path, TU, RU)
