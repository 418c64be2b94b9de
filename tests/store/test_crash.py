"""Crash safety: a sidecar SIGKILLed mid-run leaves only whole steps (DESIGN §3, §9).

A child process commits steps as fast as it can — each step a task, ten state entries, a pending
Stack delivery and a ``last`` meta, like a runtime step — and prints each step number once ``commit``
returned.  The parent kills it with SIGKILL at an arbitrary moment (it keeps committing between
the print and the kill), reopens the store and checks: every step up to ``last`` is entirely
there, nothing of a later step is, and every step the child reported as committed survived.
Three rounds, each resuming where the killed one stopped, with the default ``"normal"`` durability.
"""
from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from sidecar.store import Store

ROOT = Path(__file__).resolve().parents[2]

CHILD = """
import asyncio, sys
from sidecar.domain.tasks import Task, TaskType
from sidecar.router.model import Delivery
from sidecar.router.ops import PutDelivery
from sidecar.store import PutMeta, PutState, PutTask, Store

async def main(path):
    s = await Store.open(path)
    i = int(await s.meta("last") or -1) + 1
    print("start", i, flush=True)
    while True:
        t = Task(task_id=f"t-{i}", type=TaskType.UNANSWERED_MESSAGE, project="golden", tu="tu",
                 ru=f"ru{i % 7}", source="socket", created_at=float(i), deadline=i + 120.0)
        ops = [PutTask(t)]
        ops += [PutState("tu", "steps", f"{i}:{j}", {"i": i, "pad": "x" * 100}) for j in range(10)]
        ops += [PutDelivery(Delivery(
                    id=f"ev-{i}.0", event_id=f"ev-{i}", event_at=float(i), source="tasks",
                    subject="task", action="created", priority="normal", rule=None, channel="stack",
                    target="stack", status="pending", message=b'{"event":"created"}',
                    next_attempt_at=float(i), pair=f"tu/ru{i % 7}", idem_key=f"task:t-{i}:created",
                    method="POST", path="/v1/tus/tu/tasks")),
                PutMeta("last", str(i))]
        await s.commit(ops)
        print(i, flush=True)
        i += 1

asyncio.run(main(sys.argv[1]))
"""


def check_whole_steps(path: Path) -> int:
    """Return ``last``; assert steps 0..last are whole and nothing beyond exists."""
    with sqlite3.connect(path) as c:
        assert c.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        last = int(c.execute("SELECT value FROM meta WHERE key='last'").fetchone()[0])
        steps = range(last + 1)
        assert {r[0] for r in c.execute("SELECT task_id FROM tasks")} == {f"t-{i}" for i in steps}
        assert {r[0] for r in c.execute("SELECT key FROM service_state")} == \
            {f"{i}:{j}" for i in steps for j in range(10)}
        assert [r[0] for r in c.execute("SELECT idem_key FROM deliveries ORDER BY seq")] == \
            [f"task:t-{i}:created" for i in steps]
    return last


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX")
async def test_sigkill_mid_run_leaves_only_whole_steps(tmp_path):
    path = tmp_path / "data" / "sidecar.db"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    reported = -1
    for round_ in range(3):
        p = subprocess.Popen([sys.executable, "-c", CHILD, str(path)], env=env, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            assert p.stdout.readline() == f"start {reported + 1}\n"
            target = reported + 40
            while reported < target:
                line = p.stdout.readline()
                assert line, p.stderr.read()
                reported = int(line)
        finally:
            p.send_signal(signal.SIGKILL)
            p.communicate(timeout=20)
        assert p.returncode == -signal.SIGKILL
        last = check_whole_steps(path)
        assert last >= reported  # every reported commit survived the kill
        reported = last
        async with await Store.open(path) as s:  # the killed child's lock is gone
            assert await s.read(lambda c: c.execute("SELECT COUNT(*) FROM deliveries").fetchone()[0]) == last + 1
