"""The pump's drain bench runs on a small N (issue 21 item 2): every row is drained beside a
Stack backlog and the figures are printed beside the raw sqlite3 / httpx limits — never asserted
against a speed."""
from __future__ import annotations

import asyncio

from bench import pump_drain


def test_drain_sends_every_row_beside_a_stack_backlog():
    for kind in ("journal", "webhook"):
        r = asyncio.run(pump_drain.drain(kind, 40, 200))
        assert r["left"] == 0 and r["rows_per_s"] > 0 and r["cpu_s_per_row"] > 0, r


def test_lines_print_each_run_beside_the_limits():
    fig = {"raw_sqlite": pump_drain.raw_sqlite(200), "raw_httpx": {"posts_per_s": 1.0},
           "runs": [asyncio.run(pump_drain.drain("journal", 20, b)) for b in (0, 100)]}
    out = "\n".join(pump_drain.lines(fig))
    assert "raw sqlite3" in out and "raw httpx" in out and "backlog=    100" in out and "ms CPU/row" in out
