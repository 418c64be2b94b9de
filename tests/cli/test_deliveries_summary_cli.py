"""``sidecar deliveries`` summarises first (issue 23 item 4): counts per target and status, the
oldest pending with its age, failure reasons grouped and counted; rows only on request.  The store
is filled through the router's real ops (a delivery put pending, retried, settled failed)."""
from __future__ import annotations

import asyncio
import json

from sidecar.cli.main import main
from sidecar.router.model import Delivery
from sidecar.router.ops import PutDelivery, SettleDelivery
from sidecar.router.io.audit_summary import summarise
from sidecar.store import Store

T0 = 1796025600.0  # 2026-11-30T08:00:00Z


def _row(n: int, target: str, at: float) -> PutDelivery:
    return PutDelivery(Delivery(id=f"ev-{n}.0", event_id=f"ev-{n}", event_at=at, source="electron",
                                subject="s", action="a", priority="normal", rule="r", channel="webhook",
                                target=target, status="pending", message=b"{}", next_attempt_at=at))


def fill(tmp_path) -> list[str]:
    """hook: 3 failed (2 × HTTP 500, 1 × timeout), 1 pending retrying since T0+5; audit: 2 delivered."""
    async def go():
        async with await Store.open(tmp_path / "sidecar.db") as s:
            ops = [_row(i, "hook", T0 + i) for i in range(5)] + [_row(10 + i, "audit", T0 + i) for i in range(2)]
            for i, err in ((0, "HTTP 500"), (1, "HTTP 500"), (2, "timeout after 10 s")):
                ops.append(SettleDelivery(f"ev-{i}.0", "failed", 5, None, err, None, T0 + 600))
            ops.append(SettleDelivery("ev-3.0", "delivered", 1, None, None, T0 + 4, T0 + 4))
            ops.append(SettleDelivery("ev-4.0", "pending", 2, T0 + 900, "HTTP 503", None, T0 + 700))
            ops += [SettleDelivery(f"ev-{10 + i}.0", "delivered", 1, None, None, T0 + i, T0 + 900) for i in range(2)]
            await s.commit(ops)
    asyncio.run(go())
    return ["--data-dir", str(tmp_path)]


def test_the_summary_counts_ages_and_groups(tmp_path):
    import sqlite3

    fill(tmp_path)
    conn = sqlite3.connect(tmp_path / "sidecar.db")
    got = summarise(conn)
    assert got["counts"] == {"audit": {"delivered": 2}, "hook": {"delivered": 1, "failed": 3, "pending": 1}}
    assert got["total"] == 7 and got["as_of"] == T0 + 900
    assert got["oldest_pending"]["id"] == "ev-4.0" and got["oldest_pending"]["age_s"] == 896.0
    assert [(r["reason"], r["count"]) for r in got["reasons"]] == [("HTTP 500", 2), ("HTTP 503", 1),
                                                                   ("timeout after 10 s", 1)]
    assert summarise(conn, target="audit")["oldest_pending"] is None
    conn.close()


def test_the_cli_prints_the_summary_and_no_rows(tmp_path, capsys):
    d = fill(tmp_path)
    assert main(["deliveries", *d]) == 0
    out = capsys.readouterr().out
    assert "Deliveries: 7 rows" in out and "Oldest pending: hook ev-4.0" in out and "14 min 56 s" in out
    assert "HTTP 500" in out and "timeout after 10 s" in out
    assert "electron/s/a" not in out  # the rows come on request
    assert main(["deliveries", "--rows", "--target", "hook", *d]) == 0
    out = capsys.readouterr().out
    assert out.index("Oldest pending") < out.index("electron/s/a") and out.count("electron/s/a") == 5


def test_json_without_rows_is_one_summary_object(tmp_path, capsys):
    d = fill(tmp_path)
    assert main(["deliveries", "--json", "--until", "2026-11-30T08:00:02Z", *d]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    got = json.loads(line)
    assert got["total"] == 4 and got["counts"]["hook"] == {"failed": 2}


def test_an_empty_audit_says_so_once(tmp_path, capsys):
    d = fill(tmp_path)
    assert main(["deliveries", "--since", "2026-12-01", *d]) == 0
    assert capsys.readouterr().out.strip() == "No deliveries match."


def test_the_next_page_command_pins_the_window_as_instants(tmp_path, capsys):
    import shlex

    d = fill(tmp_path)
    assert main(["deliveries", "--since", "2026-11-30 08:00:01", "--until", "1m", "--limit", "2", "--after", "0", *d]) == 0
    hint = shlex.split(capsys.readouterr().out.split("More rows: ", 1)[1].split("\n", 1)[0])
    assert hint[hint.index("--since") + 1] == "2026-11-30T08:00:01Z"  # a span would move between pages
    assert hint[hint.index("--until") + 1].endswith("Z") and hint[-2:] == ["--after", "3"]  # rows seq 2, 3 shown
