"""``sidecar rules`` / ``sidecar deliveries`` read the router's tables from the data dir,
read-only, as tables or JSON lines (issue 9; DESIGN §10 "Management")."""
from __future__ import annotations

import asyncio
import json
import shlex

import pytest

from sidecar.cli.main import main
from sidecar.router.model import RoutingEvent, parse_rule
from sidecar.router.state import RouterState
from sidecar.router.route import route
from sidecar.router.ops import PutRule
from sidecar.router.io.storage import RouterStore
from sidecar.store.db import Store

T0 = 1796025600.0


def _fill(tmp_path) -> None:
    async def go():
        async with await Store.open(tmp_path / "sidecar.db") as s:
            rule = parse_rule({"name": "alerts", "conditions": {"source": "electron"},
                               "actions": [{"target": "audit"}], "throttle_seconds": 300})
            st = RouterState(prefix="ev-", rules={rule.name: rule})
            ev = RoutingEvent(source="electron", subject="disk", action="full", priority="high")
            # a webhook: the journal is never throttled (seed 002's target-less log)
            r1 = route(st, [ev], T0, {"stack": "stack", "audit": "webhook"})
            st.apply(r1)
            r2 = route(st, [ev], T0 + 10, {"stack": "stack", "audit": "webhook"})
            await RouterStore(s).commit([PutRule(rule, T0), *r1.ops(), *r2.ops()])
    asyncio.run(go())


def _fill_audit(tmp_path, n: int) -> None:
    """``n`` events, one a second from T0, each routed to the journal target ``audit``."""
    async def go():
        async with await Store.open(tmp_path / "sidecar.db") as s:
            rule = parse_rule({"name": "all", "actions": [{"target": "audit"}]})
            st = RouterState(prefix="ev-", rules={rule.name: rule})
            ops = []
            for i in range(n):
                r = route(st, [RoutingEvent(source="electron", subject="s", action=f"a{i}")], T0 + i,
                          {"stack": "stack", "audit": "journal"})
                st.apply(r)
                ops += r.ops()
            await RouterStore(s).commit(ops)
    asyncio.run(go())


def test_rules_and_deliveries_print_tables_and_json(tmp_path, capsys):
    _fill(tmp_path)
    assert main(["rules", "--data-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "alerts" in out and "300 s" in out and "audit" in out
    assert main(["deliveries", "--data-dir", str(tmp_path), "--rows"]) == 0
    out = capsys.readouterr().out
    assert "electron/disk/full" in out and "pending" in out and "skipped" in out and "throttled" in out
    assert main(["deliveries", "--data-dir", str(tmp_path), "--status", "skipped", "--json", "--rows"]) == 0
    rows = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [(r["status"], r["event_at"]) for r in rows] == [("skipped", T0 + 10)]
    assert main(["deliveries", "--data-dir", str(tmp_path), "--since", "2026-11-30T08:00:05Z", "--json", "--rows"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 1


def test_a_data_dir_without_a_database_is_one_line_and_exit_2(tmp_path, capsys):
    assert main(["deliveries", "--data-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("sidecar deliveries: no sidecar database") and err.count("\n") == 1


def test_deliveries_page_with_after_and_newest_by_default(tmp_path, capsys):
    _fill_audit(tmp_path, 7)
    d = str(tmp_path)
    assert main(["deliveries", "--data-dir", d, "--limit", "3", "--json"]) == 0
    out = capsys.readouterr()
    assert [json.loads(x)["seq"] for x in out.out.splitlines()] == [5, 6, 7]  # the newest
    assert "more rows" not in out.err
    seen, after = [], 0
    while True:
        assert main(["deliveries", "--data-dir", d, "--limit", "3", "--after", str(after), "--json"]) == 0
        out = capsys.readouterr()
        seen += [json.loads(x)["seq"] for x in out.out.splitlines()]
        if "more rows" not in out.err:
            break
        after = int(out.err.rsplit("--after ", 1)[1])
    assert seen == [1, 2, 3, 4, 5, 6, 7]
    assert main(["deliveries", "--data-dir", d, "--limit", "2", "--after", "0", "--target", "audit"]) == 0
    hint = capsys.readouterr().out.split("More rows: ", 1)[1].split("\n", 1)[0]
    # the hint is the whole next command: same data dir, filters and limit (pasting it must work)
    assert shlex.split(hint) == ["sidecar", "deliveries", "--data-dir", str(d), "--target", "audit",
                                 "--limit", "2", "--after", "2"]


def test_out_of_range_after_and_limit_are_one_line_and_exit_2(tmp_path, capsys):
    """A breaker's F5/F8: ``--after 99999999999999999999`` was an OverflowError traceback (exit
    1); ``--limit 0`` / ``-1`` printed a row; ``--after -1`` was accepted."""
    _fill(tmp_path)
    for bad in (["--after", "99999999999999999999"], ["--limit", "99999999999999999999"],
                ["--limit", "0"], ["--limit", "-1"], ["--after", "-1"], ["--limit", "x"]):
        with pytest.raises(SystemExit) as ei:  # argparse's usage error: exit 2
            main(["deliveries", "--data-dir", str(tmp_path), *bad])
        assert ei.value.code == 2, bad
        out = capsys.readouterr()
        assert out.out == "" and out.err.count("\n") == 1 and bad[0] in out.err, bad
    assert main(["deliveries", "--data-dir", str(tmp_path), "--after", str(2 ** 63 - 1), "--json"]) == 0
    assert capsys.readouterr().out == ""


def test_newest_rows_say_that_older_rows_exist(tmp_path, capsys):
    """Without --after the newest --limit rows came under "Deliveries (oldest first)" with no
    hint that older rows exist (newcomer's report, item 6); the hint pages from the oldest."""
    _fill_audit(tmp_path, 5)
    d = str(tmp_path)
    assert main(["deliveries", "--data-dir", d, "--target", "audit", "--limit", "3"]) == 0
    out = capsys.readouterr().out
    assert "Deliveries: the newest 3 (oldest first)" in out
    hint = out.split("from the oldest: ", 1)[1].split(" (or", 1)[0]
    assert shlex.split(hint) == ["sidecar", "deliveries", "--data-dir", d, "--target", "audit",
                                 "--limit", "3", "--after", "0"]
    assert main(["deliveries", "--data-dir", d, "--target", "audit", "--limit", "3", "--json"]) == 0
    out = capsys.readouterr()
    assert [json.loads(x)["action"] for x in out.out.splitlines()] == ["a2", "a3", "a4"]
    assert "older rows exist: --after 0" in out.err
    assert main(["deliveries", "--data-dir", d, "--target", "audit", "--limit", "5"]) == 0
    out = capsys.readouterr().out
    assert "Deliveries (oldest first)" in out and "Older" not in out  # all shown: no hint
