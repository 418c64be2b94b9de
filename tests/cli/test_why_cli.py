"""``sidecar why`` as a newcomer runs it after a replay (issue 7 item 5): a replay's data dir holds
one folder per machine (named in the error), "no rows at all" and "none since --since" are two
different sentences, and ids never wrap in the table, also when piped."""
from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from sidecar.cli.main import main
T0 = 1796025600.0  # 2026-11-30T08:00:00Z
TU, RU = "g-tu-01", "g-ru-01-0001-with-a-rather-long-suffix"


def make_db(folder: Path, rows: list[tuple[str, str, float, str]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(folder / "sidecar.db")
    conn.execute("CREATE TABLE decisions (id INTEGER PRIMARY KEY AUTOINCREMENT, tu TEXT NOT NULL, ru TEXT NOT "
                 "NULL, at REAL NOT NULL, type TEXT NOT NULL, source TEXT NOT NULL, outcome TEXT NOT NULL, "
                 "task_id TEXT, detail TEXT NOT NULL DEFAULT '{}')")
    conn.executemany("INSERT INTO decisions (tu, ru, at, type, source, outcome, task_id) VALUES "
                     "(?, ?, ?, 'unanswered_message', 'socket', ?, NULL)", rows)
    conn.commit()
    conn.close()
    return folder


def run(capsys, data_dir: Path, ru: str = RU, since: str | None = None) -> tuple[int, str, str]:
    argv = ["why", TU, ru, "--data-dir", str(data_dir)] + (["--since", since] if since else [])
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture(autouse=True)
def narrow(monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")  # a narrow pipe: ids must still not wrap


def test_a_replays_data_dir_names_its_machine_folders(tmp_path, capsys):
    make_db(tmp_path / "m1", [(TU, RU, T0 + 5, "created")])
    make_db(tmp_path / "m2", [])
    code, _, err = run(capsys, tmp_path)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "no sidecar database" in err and str(tmp_path / "m1") in err and "m1, m2" in err


def test_no_rows_at_all_and_none_since_are_told_apart(tmp_path, capsys):
    d = make_db(tmp_path / "m1", [(TU, RU, T0 + 5, "created"), (TU, RU, T0 + 65, "created")])
    code, out, _ = run(capsys, d, ru="g-ru-nobody")
    assert code == 0 and "No decisions at all" in out and "since" not in out
    code, out, _ = run(capsys, d, since="2026-11-30T09:00:00Z")
    assert code == 0 and "No decisions at all" not in out
    assert "since 2026-11-30 09:00:00 UTC" in out and "has 2" in out and "2026-11-30 08:01:05" in out


def test_the_table_keeps_ids_and_times_whole_when_piped(tmp_path, capsys):
    d = make_db(tmp_path / "m1", [(TU, RU, T0 + 5, "created"), (TU, RU, T0 + 6, "refused:stronger_task_open")])
    code, out, _ = run(capsys, d, since="2026-11-30T08:00:00Z")
    assert code == 0
    assert RU in out  # the title or a cell, unbroken
    assert out.count("2026-11-30 08:00:05") == 1 and "refused:stronger_task_open" in out
