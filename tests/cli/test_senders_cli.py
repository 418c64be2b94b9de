"""``sidecar groups …`` / ``sidecar senders …`` on a data dir: readable tables, JSON, bad input is
one line naming the field with exit 2 and nothing written, a running sidecar's dir refused (3)."""
from __future__ import annotations

import asyncio
import json

from sidecar.cli.main import main
from sidecar.store import Store


def _json(capsys) -> list[dict]:
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def test_create_assign_list_history_recover(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SIDECAR_ROUTER_TARGETS", '{"audit": {"channel": "journal"}}')
    d = ["--data-dir", str(tmp_path)]
    assert main(["groups", "create", "--name", "night", "--priority", "5", "--failed-in-row", "1",
                 "--cooldown-delay-from", "10", "--cooldown-delay-to", "20",
                 "--from-time", "22:00", "--to-time", "06:00", "--json", *d]) == 0
    (g,) = _json(capsys)
    assert (g["name"], g["priority"], g["failed_in_row"], g["from_time"], g["to_time"]) == ("night", 5, 1, "22:00", "06:00")
    assert main(["groups", "assign", "audit", g["id"], *d]) == 0
    assert g["id"] in capsys.readouterr().out
    assert main(["groups", "list", *d]) == 0
    out = capsys.readouterr().out
    assert "22:00 → 06:00" in out and "10–20" in out and "audit" in out
    # the stack sender keeps its built-in group; an active sender has nothing to recover
    assert main(["groups", "assign", "stack", g["id"], *d]) == 2
    assert "built-in Stack group" in capsys.readouterr().err
    assert main(["senders", "recover", "stack", "--by", "lead", *d]) == 0
    assert "stack is active: nothing to recover" in capsys.readouterr().out
    assert main(["senders", "history", "stack", "--json", *d]) == 0
    assert _json(capsys) == []  # no 106 was written
    assert main(["groups", "delete", g["id"], *d]) == 0
    capsys.readouterr()
    assert main(["groups", "list", "--json", *d]) == 0 and _json(capsys) == []


def test_bad_input_is_one_line_naming_the_field_and_writes_nothing(tmp_path, capsys):
    d = ["--data-dir", str(tmp_path)]
    assert main(["groups", "create", "--name", "a", "--priority", "1", *d]) == 0
    capsys.readouterr()
    for argv, field in ((["groups", "create", "--name", "b", "--priority", "1"], "priority"),
                        (["groups", "create", "--name", "b", "--priority", "2", "--from-time", "25:00",
                          "--to-time", "01:00"], "from_time"),
                        (["groups", "assign", "ghost", "whatever"], "items[0].sender"),
                        (["senders", "recover", "ghost"], "sender")):
        assert main([*argv, *d]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"bad input: {field}:" in err, err
    assert main(["groups", "list", "--json", *d]) == 0
    assert [g["name"] for g in _json(capsys)] == ["a"]


async def test_changes_refused_while_a_sidecar_runs(tmp_path, capsys):
    async with await Store.open(tmp_path / "sidecar.db"):
        argv = ["groups", "create", "--name", "a", "--priority", "1", "--data-dir", str(tmp_path)]
        assert await asyncio.to_thread(main, argv) == 3
        assert "use its bridge methods" in capsys.readouterr().err
        assert main(["senders", "list", "--data-dir", str(tmp_path)]) == 0  # reads work beside it


def test_group_send_intervals_read_as_minutes_everywhere(tmp_path, capsys):
    """Breaker (issue 21 item 4): the intervals became minutes (DESIGN §10) but the CLI's help
    and the groups table still said seconds — a lead reading "0.5" would pace 60× wrong."""
    import pytest

    d = ["--data-dir", str(tmp_path)]
    with pytest.raises(SystemExit):
        main(["groups", "--help"])
    helptext = " ".join(capsys.readouterr().out.split())
    assert "send intervals in minutes" in helptext and "in seconds" not in helptext
    assert main(["groups", "create", "--name", "slow", "--priority", "3", "--send-from-message-interval", "0.5",
                 "--send-to-message-interval", "1.5", *d]) == 0
    capsys.readouterr()
    assert main(["groups", "list", *d]) == 0
    out = capsys.readouterr().out
    assert "send interval (min)" in out and "0.5–1.5" in out and "(s)" not in out
