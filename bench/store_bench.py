"""Store commit throughput for a typical runtime step (3 ops: a task, a state entry, a pending
Stack delivery), for both durabilities, against a naive baseline (one awaited aiosqlite call per statement).

    python bench/store_bench.py [steps]
"""
from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sidecar.domain.tasks import Task, TaskType  # noqa: E402
from sidecar.router.model import Delivery  # noqa: E402
from sidecar.router.ops import PutDelivery  # noqa: E402
from sidecar.store import PutState, PutTask, Store  # noqa: E402
from sidecar.store.ops import compile_ops  # noqa: E402


def step(i: int) -> list:
    t = Task(task_id=f"t-{i}", type=TaskType.UNANSWERED_MESSAGE, project="golden", tu="tu",
             ru=f"ru{i % 50}", source="socket", created_at=1e9 + i, deadline=1e9 + i + 120)
    return [PutTask(t),
            PutState("tu", "chains", f"ru{i % 50}", {"step": i % 4, "nextCheckAt": 1e9 + i}),
            PutDelivery(Delivery(
                id=f"ev-{i}.0", event_id=f"ev-{i}", event_at=1e9 + i, source="tasks", subject="task",
                action="created", priority="normal", rule=None, channel="stack", target="stack",
                status="pending", message=b'{"event":"created","task":{}}', next_attempt_at=1e9 + i,
                pair=f"tu/ru{i % 50}", idem_key=f"task:t-{i}:created", method="POST",
                path="/v1/tus/tu/tasks"))]


async def bench(durability: str, n: int, naive: bool = False) -> float:
    with tempfile.TemporaryDirectory() as d:
        async with await Store.open(Path(d) / "s.db", durability=durability) as s:
            steps = [step(i) for i in range(n)]
            t0 = time.perf_counter()
            for ops in steps:
                if naive:  # what commit avoids: one thread hop per statement
                    db = s._db
                    await db.execute("BEGIN IMMEDIATE")
                    for sql, rows in compile_ops(ops):
                        for row in rows:
                            await db.execute(sql, row)
                    await db.execute("COMMIT")
                else:
                    await s.commit(ops)
            return n / (time.perf_counter() - t0)


async def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
    for durability in ("normal", "full"):
        rate = await bench(durability, n)
        naive = await bench(durability, n, naive=True)
        print(f"durability={durability:6s} commit(3 ops): {rate:8.0f} steps/s   "
              f"naive per-statement awaits: {naive:8.0f} steps/s")


if __name__ == "__main__":
    asyncio.run(main())
