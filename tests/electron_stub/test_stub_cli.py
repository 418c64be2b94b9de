"""CLI: a bad scenario is one clear line and exit 2; generate writes a valid file."""
from __future__ import annotations

from electron_stub import cli
from electron_stub import scenario as sc


def test_bad_scenario_exit_2_names_the_line(tmp_path, capsys):
    p = tmp_path / "bad.jsonl"
    p.write_text('{"kind":"header","format":1,"start":"2026-11-30T08:00:00Z","seed":1,"duration_s":5}\n'
                 '{"t":1,"kind":"warp"}\n')
    assert cli.main(["replay", str(p)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{p}:2:" in err[0] and "unknown kind" in err[0]


def test_generate_to_file(tmp_path):
    out = tmp_path / "s.jsonl"
    assert cli.main(["generate", "--preset", "smoke", "--seed", "4", "--hours", "0.2", "--favorites", "5",
                     "-o", str(out)]) == 0
    s = sc.load(out)
    assert s.header.seed == 4 and s.header.duration_s == 720


def test_used_data_dir_is_refused(tmp_path, capsys):
    from stubhelp import HEADER

    p = tmp_path / "s.jsonl"
    p.write_text(HEADER + "\n")
    (tmp_path / "data" / "m1").mkdir(parents=True)
    (tmp_path / "data" / "m1" / "state.sqlite").write_text("x")
    assert cli.main(["replay", str(p), "--data-dir", str(tmp_path / "data")]) == 2
    assert "already holds machine data" in capsys.readouterr().err
