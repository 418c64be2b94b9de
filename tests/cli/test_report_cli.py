"""``sidecar report --data-dir DIR --html OUT``: the HTML view of a data dir's durable state, tested
on the data dir a replay kept (``sidecar-stub replay --data-dir``); read-only; a damaged database is
refused with exit 7 (tests/integration/test_damaged_database.py)."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from electron_stub.cli import main as stub
from sidecar.cli.main import main as sidecar


@pytest.fixture(scope="module")
def kept(tmp_path_factory) -> Path:
    """A replay's kept data dir, of a generated smoke shift (a user's clone has no ../shared)."""
    root = tmp_path_factory.mktemp("kept")
    scenario, folder = root / "smoke.jsonl", root / "data"
    assert stub(["generate", "--preset", "smoke", "--hours", "0.5", "-o", str(scenario)]) == 0
    assert stub(["replay", str(scenario), "--quiet", "--data-dir", str(folder)]) == 0
    return folder / "m1"


def test_a_kept_data_dir_gives_every_plot_and_leaves_the_files_alone(kept, tmp_path, capsys):
    digest = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in kept.iterdir() if p.is_file()}
    out, js = tmp_path / "live.html", tmp_path / "live.json"
    assert sidecar(["report", "--data-dir", str(kept), "--html", str(out), "--json", str(js)]) == 0
    html = out.read_text(encoding="utf-8")
    for name in ("queue", "distributions", "deliveries", "senders"):
        assert f'data-plot="{name}"' in html
    summary = json.loads(js.read_text(encoding="utf-8"))
    assert summary["series"]["tasks"] and summary["series"]["deliveries"]
    assert any(k.startswith("decisions created") for k in summary["expectations"]["by_kind"])
    # the saved JSON draws the same view through the harness (no replay)
    again = tmp_path / "again.html"
    assert stub(["report", str(js), "--html", str(again)]) == 0
    assert {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in kept.iterdir() if p.is_file()} == digest


def test_no_database_is_a_sentence_and_exit_2(tmp_path, capsys):
    assert sidecar(["report", "--data-dir", str(tmp_path), "--html", str(tmp_path / "x.html")]) == 2
    assert "no sidecar database" in capsys.readouterr().err
    assert sidecar(["report", "--data-dir", str(tmp_path)]) == 2
