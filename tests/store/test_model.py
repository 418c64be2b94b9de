"""Property: any sequence of steps, some of which fail mid-batch, leaves the store equal to a
model that applied exactly the successful steps, each as a whole (DESIGN §9)."""
from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sidecar.domain.tasks import Task, TaskType
from sidecar.router.io.storage import RouterStore
from sidecar.store import DeleteState, DeleteStateScope, PutState, PutTask, Store, StoreError

from storehelp import stack_row

KEYS = st.sampled_from(["a", "b", "c"])
SCOPES = st.sampled_from(["chains", "timers"])
VALUES = st.one_of(st.none(), st.integers(-5, 5), st.lists(st.integers(0, 3), max_size=3),
                   st.dictionaries(st.sampled_from(["x", "y"]), st.integers(0, 9), max_size=2))
OPS = st.one_of(
    st.builds(PutState, st.just("tu"), SCOPES, KEYS, VALUES),
    st.builds(DeleteState, st.just("tu"), SCOPES, KEYS),
    st.builds(DeleteStateScope, st.just("tu"), SCOPES),
    st.builds(lambda k: stack_row(f"k{k}", "tu/ru"), st.integers(0, 4)),
)
# a batch: its ops, and whether a poisoned op (NOT NULL violation) sits in its middle
STEPS = st.lists(st.tuples(st.lists(OPS, min_size=1, max_size=6), st.booleans()), max_size=8)
POISON = PutTask(Task(task_id="bad", type=TaskType.LIKE, project=None, tu="tu",  # type: ignore
                      ru="ru", source="s", created_at=0.0, deadline=1.0))


def apply(model: dict, ops: list) -> None:
    for op in ops:
        if isinstance(op, PutState):
            model["state"][(op.scope, op.key)] = msgspec.to_builtins(op.value)
        elif isinstance(op, DeleteState):
            model["state"].pop((op.scope, op.key), None)
        elif isinstance(op, DeleteStateScope):
            for k in [k for k in model["state"] if k[0] == op.scope]:
                del model["state"][k]
        elif op.delivery.idem_key not in model["out"]:  # one pending Stack write per key
            model["out"].append(op.delivery.idem_key)


async def run(steps) -> None:
    with tempfile.TemporaryDirectory() as d:
        async with await Store.open(Path(d) / "s.db") as s:
            model: dict = {"state": {}, "out": []}
            for ops, poisoned in steps:
                if poisoned:
                    mid = len(ops) // 2
                    try:
                        await s.commit(ops[:mid] + [POISON] + ops[mid:])
                    except StoreError:
                        pass
                    else:
                        raise AssertionError("poisoned batch committed")
                else:
                    await s.commit(ops)
                    apply(model, ops)
            got = {(sc, k): v for sc in ("chains", "timers")
                   for k, v in (await s.states("tu", sc)).items()}
            assert got == model["state"]
            assert [r.idem_key for r in await RouterStore(s).deliveries()] == model["out"]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(STEPS)
def test_store_matches_model_of_whole_steps(steps):
    asyncio.run(run(steps))
