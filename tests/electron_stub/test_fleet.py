"""``sidecar-stub senders simulate`` (issue 23 item 5): groups on a share of senders or from a data
dir, several groups at once, the recipe beside the baseline, ``--json``/``--html``, exit 2 on bad
arguments with one line."""
from __future__ import annotations

import json
import sqlite3

import msgspec
import pytest

from electron_stub.cli import main
from electron_stub.fleet import InputError, parse_group
from sidecar.cli.main import main as sidecar
from sidecar.senders.health import SenderState

FAST = "cooldown_delay_from=15,cooldown_delay_to=45"
DAY = "name=day,from_time=08:00,to_time=20:00,cooldown_delay_from=15,cooldown_delay_to=45"
NIGHT = "name=night,from_time=20:00,to_time=08:00,cooldown_delay_from=120,cooldown_delay_to=240"


def _json(capsys, *argv: str) -> dict:
    assert main(["senders", "simulate", "--json", *argv]) == 0
    return json.loads(capsys.readouterr().out)


def test_several_groups_get_distinct_priorities_first_wins():
    day = parse_group(DAY, 1, 2)
    night = parse_group(NIGHT, 2, 2, others=[day])
    assert (day.name, day.priority, night.name, night.priority) == ("day", 2, "night", 1)
    with pytest.raises(InputError, match="priority"):
        parse_group("priority=2", 2, 2, others=[day])


def test_share_puts_a_subset_in_groups_and_the_baseline_runs_the_same_fleet(capsys):
    d = _json(capsys, "--senders", "50", "--days", "1", "--group", FAST, "--group-share", "0.2", "--seed", "4")
    r, b = d["recipe"], d["baseline"]
    assert r["cohort"]["senders"] == b["cohort"]["senders"] == 10 and r["senders"] == b["senders"] == 50
    assert b["cohort"]["verdicts"] == {} or b["planned"]["15–60 min"] == 0  # the baseline has no groups
    held = r["held"]
    assert held["total_s"] > 0 and held["median_s"] <= held["p95_s"]
    assert d == _json(capsys, "--senders", "50", "--days", "1", "--group", FAST, "--group-share", "0.2", "--seed", "4")


def test_day_and_night_at_once(capsys):
    d = _json(capsys, "--senders", "40", "--days", "3", "--group", DAY, "--group", NIGHT)
    assert [g["name"] for g in d["groups"]] == ["day", "night"]
    claims = [c["claim"] for c in d["claims"]]
    assert any("window edge" in c for c in claims)
    assert not any("five cooldowns" in c for c in claims)  # the 15–45 figure is the always-on recipe's
    assert d["recipe"]["window"]["kept"] == d["recipe"]["window"]["crossing"] > 0


def test_senders_from_a_data_dir(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SIDECAR_ROUTER_TARGETS", json.dumps({n: {"channel": "journal"} for n in ("a", "b", "c", "d")}))
    dd = ["--data-dir", str(tmp_path)]
    assert sidecar(["groups", "create", "--name", "fast", "--priority", "3", "--cooldown-delay-from", "15",
                    "--cooldown-delay-to", "45", "--json", *dd]) == 0
    gid = json.loads(capsys.readouterr().out)["id"]
    assert sidecar(["groups", "assign", "a", gid, *dd]) == 0 and sidecar(["groups", "assign", "b", gid, *dd]) == 0
    capsys.readouterr()
    # a sidecar that ran stores every sender's state (PutSender); c and d have no groups
    with sqlite3.connect(tmp_path / "sidecar.db") as conn:
        conn.executemany("INSERT OR REPLACE INTO sender_state (sender, state, cooldown_end, data) VALUES (?,?,?,?)",
                         [(n, "active", None, msgspec.json.encode(SenderState(sender=n)).decode()) for n in "cd"])
    conn.close()
    d = _json(capsys, "--senders-from", str(tmp_path), "--days", "1")
    assert d["recipe"]["senders"] == 4 and d["recipe"]["cohort"]["senders"] == 2  # stack left out
    assert [g["name"] for g in d["groups"]] == ["fast"]
    assert any("five cooldowns" in c["claim"] for c in d["claims"])


def test_html_is_one_self_contained_page(tmp_path, capsys):
    out = tmp_path / "fleet.html"
    assert main(["senders", "simulate", "--senders", "10", "--days", "1", "--group", FAST, "--html", str(out)]) == 0
    page = out.read_text()
    assert "Recipe beside the baseline" in page and "<script src" not in page and "held back" in page
    assert "Recipe beside the baseline" in capsys.readouterr().out


@pytest.mark.parametrize("argv, words", [
    (["--group-share", "1.5", "--group", FAST], "--group-share"),
    (["--group-share", "0.2"], "--group-share needs"),
    (["--senders-from", "/nonexistent-dir", "--group", FAST], "--senders-from"),
    (["--senders-from", "/nonexistent-dir"], "does not exist"),
    (["--days", "0"], "--days"),
    (["--senders", "0"], "--senders"),
    (["--group", "priority=1", "--group", "priority=1"], "priority"),
    (["--group", "cooldown_delay_from=x"], "not a number"),
    (["--html", "/nonexistent-dir/x.html"], "--html"),
])
def test_bad_arguments_are_one_line_exit_2(argv, words, capsys):
    assert main(["senders", "simulate", "--senders", "5", "--days", "1", *argv]
                if "--senders" not in argv and "--senders-from" not in argv else ["senders", "simulate", *argv]) == 2
    err = capsys.readouterr().err
    assert words in err and len(err.strip().splitlines()) == 1
