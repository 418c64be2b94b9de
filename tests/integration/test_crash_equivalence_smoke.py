"""A crash moves no task (issue 18 item 6; DESIGN §5): the generated smoke scenario (1 h, one TU
per project, no ../shared needed) replayed as generated and with 4 ``crash`` lines inserted,
against real sidecar processes, compared with ``sidecar-stub diff``'s own comparison
(:func:`electron_stub.trace.task_diff`: task id, type, pair, source, instants, close).

Before the fix the 6 h Follow-up mail source made 1–3 mails per seed at a crash instant instead
of at the clean run's next RU Online grid slot (and Follow-up message's pass checks and the
offline expiry likewise).  Now these seeds give no difference at all; the classes that still
could are named in ``docs/decisions.md`` ("Crash equivalence")."""
from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pytest

from electron_stub import generate
from electron_stub import trace as tr
from tests.integration.replay_util import replay

CRASHES = (611.3, 1423.7, 2290.1, 3012.9)  # between grid slots of every project's RU Online pass


def with_crashes(lines: list[dict], crashes: tuple[float, ...]) -> list[dict]:
    head = [x for x in lines if "t" not in x]
    timeline = sorted([x for x in lines if "t" in x] + [{"t": c, "kind": "crash"} for c in crashes],
                      key=lambda x: x["t"])  # stable: a crash follows the lines of its instant
    return head + timeline


@pytest.mark.parametrize("seed", [1, pytest.param(2, marks=pytest.mark.slow), pytest.param(5, marks=pytest.mark.slow)])
def test_smoke_with_four_crashes_makes_the_same_follow_up_mails(tmp_path, seed):
    lines = generate.generate("smoke", seed=seed)
    runs = {"clean": lines, "crash": with_crashes(lines, CRASHES)}

    def one(name: str) -> tuple[str, int, list[dict]]:
        path = tmp_path / f"{name}.jsonl"
        path.write_text("".join(json.dumps(x) + "\n" for x in runs[name]))
        rp, code = replay(path, tmp_path / f"data-{name}")
        rp.rec.write(tmp_path / f"{name}.trace.jsonl")
        return name, code, tr.read(tmp_path / f"{name}.trace.jsonl")
    with ThreadPoolExecutor(2) as pool:
        out = {name: (code, trace) for name, code, trace in pool.map(one, runs)}
    assert out["clean"][0] == 0 and out["crash"][0] == 0
    clean, crashed = out["clean"][1], out["crash"][1]
    d = tr.task_diff(clean, crashed)
    differ = [(x["at"], x["type"], x["ru"], x["source"]) for x in d["only_a"] + d["only_b"]]
    assert differ == [], differ
