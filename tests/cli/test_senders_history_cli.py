"""``sidecar senders history`` (issue 23 items 4 and 6): each code with its meaning beside it
(:data:`sidecar.senders.codes.CODE_MEANING`, seed 000) and ``--since``/``--until`` in the one time
syntax (an ISO-8601 instant or a span) — it took unix seconds before."""
from __future__ import annotations

import json

import pytest

from sidecar.cli.main import main
from sidecar.senders.codes import CODE_MEANING, meaning
from sidecar.senders.table import FAILED, FINISHED, STARTED
from sidecar.store import Store
from sidecar.store.ops import AddSenderHistory

T0 = 1796025600.0  # 2026-11-30T08:00:00Z


async def fill(tmp_path) -> list[str]:
    async with await Store.open(tmp_path / "sidecar.db") as store:
        await store.commit([AddSenderHistory("stack", T0 + i * 600, code, note)
                            for i, (code, note) in enumerate(((FAILED, "timeout"), (FAILED, "timeout"),
                                                              (STARTED, "#1 for 40 min"), (FINISHED, "warm-up ok")))])
    return ["--data-dir", str(tmp_path)]


async def test_the_table_puts_the_meaning_beside_the_code(tmp_path, capsys):
    d = await fill(tmp_path)
    assert main(["senders", "history", "stack", *d]) == 0
    out = capsys.readouterr().out
    assert "109" in out and "failed send" in out and CODE_MEANING[STARTED][1] in out
    assert "cooldown finished" in out and "warm-up ok" in out


async def test_since_and_until_take_an_instant_or_a_span(tmp_path, capsys):
    d = await fill(tmp_path)
    assert main(["senders", "history", "stack", "--json", "--since", "2026-11-30T08:10:00",
                 "--until", "2026-11-30T08:30:00+00:00", *d]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["code"], r["what"]) for r in rows] == [(FAILED, "failed send"), (STARTED, "cooldown started")]
    assert main(["senders", "history", "stack", "--json", "--since", "1h30m", *d]) == 0  # wall clock: long after
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize("bad", ["1796025600", "-5m", "0h", "1m1h", "2026-13-01"])
def test_a_bad_since_is_one_line_and_exit_2(tmp_path, capsys, bad):
    with pytest.raises(SystemExit) as ei:
        main(["senders", "history", "stack", "--data-dir", str(tmp_path), f"--since={bad}"])
    err = capsys.readouterr().err
    assert ei.value.code == 2 and len(err.strip().splitlines()) == 1 and "--since" in err


def test_an_unknown_code_reads_as_such():
    assert meaning(999)[0] == "unknown code" and all(len(v) == 2 for v in CODE_MEANING.values())
