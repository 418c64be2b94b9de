"""The operator's sort (DESIGN §6) is a total order: tasks that tie on deadline, VIP tier and
strength keep one order whatever order memory holds them in — a restored sidecar (crash, shift
change) lists them as the one that never stopped did, so an operator working the list top down
answers the same task first (a crash moved two answered mails on smoke seed 1)."""
from __future__ import annotations

import itertools

from sidecar.domain.tasks import Task, TaskType


def _task(task_id: str, created_at: float, deadline: float = 616.45) -> Task:
    return Task(task_id=task_id, type=TaskType.UNANSWERED_MAIL, project="chathouse", tu="c-tu",
                ru=f"ru-{task_id}", source="check_chat", created_at=created_at, deadline=deadline)


def test_ties_are_broken_by_creation_then_task_id_in_any_memory_order():
    tasks = [_task("t-b", 16.45), _task("t-a", 16.45), _task("t-c", 10.0, deadline=616.45),
             _task("t-d", 1.0, deadline=500.0)]
    want = ["t-d", "t-c", "t-a", "t-b"]
    for perm in itertools.permutations(tasks):
        assert [t.task_id for t in sorted(perm, key=Task.sort_key)] == want
