"""``sidecar why`` tells the pair's whole story (issue 23 item 3) through the real entry point:
closes with their reasons, overdue, markers, ``--json`` for tools, ``--until``, one-line errors."""
from __future__ import annotations

import json

import pytest

from sidecar.cli.main import main
from tests.store.test_story import RU, T0, TU, fill


async def test_the_table_shows_closes_overdue_and_markers(tmp_path, capsys):
    await fill(tmp_path)
    assert main(["why", TU, RU, "--data-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    for word in ("refused:freeloader", "overdue", "closed: answered", "followUpChat", "chain"):
        assert word in out, word


async def test_json_lines_in_time_order_and_the_window(tmp_path, capsys):
    await fill(tmp_path)
    assert main(["why", TU, RU, "--data-dir", str(tmp_path), "--json",
                 "--since", "2026-11-30T08:02:00Z", "--until", "2026-11-30 08:06:41"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["at"] - T0, r["kind"]) for r in rows] == [(120, "overdue"), (300, "marker"), (300, "closed"),
                                                         (400, "chain"), (400, "created")]
    assert rows[2]["details"]["reason"] == "answered" and rows[0]["tu"] == TU and rows[0]["ru"] == RU


async def test_an_empty_window_names_the_newest_entry(tmp_path, capsys):
    await fill(tmp_path)
    assert main(["why", TU, RU, "--data-dir", str(tmp_path), "--since", "2026-12-01"]) == 0
    out = capsys.readouterr().out
    assert "since 2026-12-01 00:00:00 UTC" in out and "11 entries" in out and "2026-11-30 08:16:40" in out


def test_a_bad_time_is_one_line_and_exit_2(tmp_path, capsys):
    with pytest.raises(SystemExit) as ei:  # argparse's usage error, one line (sidecar.cli.main._Parser)
        main(["why", TU, RU, "--data-dir", str(tmp_path), "--since", "yesterday"])
    assert ei.value.code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "'yesterday'" in err and "1h30m" in err
