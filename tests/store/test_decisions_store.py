"""The decision log's table (schema v2): rows in order per pair, pruning after the retention,
and the read-only reader the CLI uses beside a running sidecar (DESIGN §13)."""
from __future__ import annotations

import pytest

from sidecar.runtime.decisions import RETENTION_S, housekeeping_ops
from sidecar.domain.tasks import CloseReason, Task, TaskType
from sidecar.store import PruneDecisions, PutDecision, PutTask, Store
from sidecar.store.decisions import DecisionLogUnavailable, read_data_dir
from sidecar.store.migrations import V1

T0 = 1_796_025_600.0


def dec(at: float, outcome: str, *, tu="tu1", ru="ru1", **kw) -> PutDecision:
    return PutDecision(tu=tu, ru=ru, at=at, task_type="follow_up_message", source="chain",
                       outcome=outcome, **kw)


def task(n: int, created: float, closed: float | None) -> Task:
    return Task(task_id=f"t-{n}", type=TaskType.UNANSWERED_MESSAGE, project="golden", tu="tu1",
                ru="ru1", source="socket", created_at=created, deadline=created + 120,
                closed_at=closed, reason=None if closed is None else CloseReason.ANSWERED)


@pytest.fixture
async def store(tmp_path):
    s = await Store.open(tmp_path / "sidecar.db")
    yield s
    await s.close()


async def test_rows_come_back_per_pair_in_decision_order(store):
    await store.commit([dec(T0 + 5, "refused:offline"), dec(T0 + 5, "miss", detail={"step": 1}),
                        dec(T0 + 1, "created", task_id="t-1"), dec(T0 + 2, "created", ru="ru2")])
    got = await store.decisions("tu1", "ru1")
    assert [(r["at"] - T0, r["outcome"]) for r in got] == [(1, "created"), (5, "refused:offline"),
                                                           (5, "miss")]
    assert got[0]["task_id"] == "t-1" and got[2]["detail"] == {"step": 1}
    assert [r["outcome"] for r in await store.decisions("tu1", "ru1", since=T0 + 5)] == [
        "refused:offline", "miss"]


async def test_housekeeping_prunes_old_decisions_and_old_closed_tasks_only(store):
    now = T0 + 10 * 86400
    cut = now - RETENTION_S
    await store.commit([dec(cut - 1, "created"), dec(cut, "miss"), dec(now, "refused:offline"),
                        PutTask(task(1, cut - 100, cut - 1)), PutTask(task(2, cut - 100, None)),
                        PutTask(task(3, cut - 100, cut + 1))])
    await store.commit(housekeeping_ops(now))
    assert [r["outcome"] for r in await store.decisions("tu1", "ru1")] == ["miss", "refused:offline"]
    assert await store.task("t-1") is None  # closed before the cut: Stack keeps the history
    assert await store.task("t-2") is not None  # still open: never pruned
    assert await store.task("t-3") is not None


async def test_a_failed_step_writes_no_decision(store):
    from sidecar.store import StoreError
    with pytest.raises(StoreError):
        await store.commit([dec(T0, "created"), PutDecision(tu="tu1", ru="ru1", at=T0, task_type="x",
                                                            source="s", outcome="o",
                                                            detail={"bad": object()})])
    assert await store.decisions("tu1", "ru1") == []


async def test_cli_reader_works_beside_the_running_store_and_changes_nothing(tmp_path, store):
    await store.commit([dec(T0, "created", task_id="t-9")])
    rows = read_data_dir(tmp_path, "tu1", "ru1")  # the store holds the data-dir lock meanwhile
    assert [(r["outcome"], r["task_id"]) for r in rows] == [("created", "t-9")]
    assert read_data_dir(tmp_path, "tu1", "ru1", since=T0 + 1) == []
    await store.commit([PruneDecisions(before=T0 + 1)])  # the writer is not blocked by the reader
    assert read_data_dir(tmp_path, "tu1", "ru1") == []


async def test_cli_reader_explains_a_missing_or_old_data_dir(tmp_path):
    with pytest.raises(DecisionLogUnavailable, match="no sidecar database"):
        read_data_dir(tmp_path / "nowhere", "tu1", "ru1")
    async with await Store.open(tmp_path / "sidecar.db", migrations=(V1,)):
        pass
    with pytest.raises(DecisionLogUnavailable, match="no decision log yet"):
        read_data_dir(tmp_path, "tu1", "ru1")
    assert not (tmp_path / "nowhere").exists()
