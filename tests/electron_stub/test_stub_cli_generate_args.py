"""``sidecar-stub generate`` refuses what ``replay`` would refuse (issue 23 item 6): one line and
exit 2, nothing written — ``--hours -1``/``0`` used to write a scenario whose ``duration_s``
replay then refused, and ``--hours inf`` never finished."""
from __future__ import annotations

import pytest

from electron_stub.cli import main
from electron_stub.scenario import load


@pytest.mark.parametrize("argv", [["--hours", "-1"], ["--hours", "0"], ["--hours", "nan"], ["--hours", "inf"],
                                  ["--hours", "x"], ["--tus-per-project", "0"], ["--tus-per-project", "1.5"],
                                  ["--favorites", "-3"]])
def test_bad_generator_arguments_are_one_line_and_exit_2(tmp_path, capsys, argv):
    out = tmp_path / "s.jsonl"
    with pytest.raises(SystemExit) as ei:
        main(["generate", "--preset", "smoke", *argv, "-o", str(out)])
    err = capsys.readouterr().err
    assert ei.value.code == 2 and len(err.strip().splitlines()) == 1 and argv[0] in err
    assert not out.exists()


def test_a_short_positive_timeline_is_written_and_loads(tmp_path, capsys):
    out = tmp_path / "s.jsonl"
    assert main(["generate", "--preset", "smoke", "--hours", "0.25", "--favorites", "0", "-o", str(out)]) == 0
    assert load(out).header.duration_s == 900.0
