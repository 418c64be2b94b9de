"""The example scenarios shipped with the harness (``electron-stub/scenarios/``) replay to PASS
without ``../shared``: the README's Router and Sender-health walkthroughs use them, so a user's
clone can follow those walkthroughs (found by a newcomer: they named ``../shared`` seed files)."""
from __future__ import annotations

from pathlib import Path

import pytest

from electron_stub import report
from electron_stub import scenario as sc
from tests.electron_stub.test_stub_replay_e2e import run

EXAMPLES = Path(__file__).resolve().parents[2] / "electron-stub" / "scenarios"


def test_the_examples_folder_lists_every_example():
    listed = (EXAMPLES / "README.md").read_text()
    names = sorted(p.name for p in EXAMPLES.glob("*.jsonl"))
    assert names == ["router_webhook_and_telegram.jsonl", "sender_cooldown.jsonl"]
    assert all(f"`{n}`" in listed for n in names)


@pytest.mark.parametrize("name", sorted(p.name for p in EXAMPLES.glob("*.jsonl")))
def test_an_example_scenario_replays_to_pass(tmp_path, name):
    rp, violations = run(sc.load(EXAMPLES / name), tmp_path)
    text = report.render(rp.rec, rp.results, violations, rp.stats)
    assert rp.results and report.exit_code(rp.results, violations, rp.stats) == 0, text
    assert (tmp_path / "data" / "m1").is_dir()  # the data dir the walkthrough's commands read
