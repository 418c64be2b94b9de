"""A damaged database is found at open, not at the first login, and ``sidecar repair`` salvages
it (issue 18 item 3; DESIGN §3 "A damaged database …", §9).  The database is a real one: a real
sidecar process wrote it during a replay against the reference Stack; a page in the middle of a
table's b-tree is then overwritten (tests/integration/damaged_db.py).  Self-contained: the
scenario is written here (no ../shared)."""
from __future__ import annotations

import json
import re
import shutil
import sqlite3
from pathlib import Path

import pytest

from sidecar.store.lock import DirLock
from tests.integration.damaged_db import counts, damage, digest, leaf_pages, sidecar
from tests.integration.replay_util import replay

START = "2026-11-30T08:00:00Z"
TU = "g-tu-1"
RUS = 40
FAV = {"active": True, "is_white": False, "spend_30d_usd": 50.0, "spend_total_usd": 400.0,
       "paid_actions": 40, "paid_with_bonuses_only": False, "chat_limit": None, "mail_limit": None,
       "markers": {}}


def write(path: Path, lines: list[dict]) -> None:
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> Path:
    """A data dir a real sidecar wrote: 40 RUs each writing once (tasks, chains, ~900 deliveries,
    the decision log), every message answered."""
    d = tmp_path_factory.mktemp("made")
    timeline = []
    for i in range(RUS):
        timeline.append({"t": 5 + i, "kind": "online", "project": "golden", "ru": f"g-ru-{i}", "online": True})
        timeline.append({"t": 60 + 30 * i, "kind": "message", "project": "golden", "tu": TU,
                         "ru": f"g-ru-{i}", "from": "ru", "id": f"m-{i}", "body": "hi"})
    write(d / "s.jsonl", [
        {"kind": "header", "format": 1, "name": "damaged_db", "start": START, "seed": 5, "duration_s": 3000,
         "operator": {"chat_answer_p": 1.0, "chat_delay_s": [10, 10], "mail_answer_p": 0.0,
                      "mail_delay_s": [60, 60]}},
        {"kind": "tu", "project": "golden", "tu": TU, "operator": "op-1"},
        *({"kind": "favorite", "project": "golden", "tu": TU, "ru": f"g-ru-{i}", **FAV} for i in range(RUS)),
        {"t": 0, "kind": "login", "project": "golden", "tu": TU, "operator": "op-1"},
        *sorted(timeline, key=lambda x: x["t"]),
    ])
    rp, code = replay(d / "s.jsonl", d / "data")
    assert code == 0, [r for r in rp.results if not r.ok]
    return d / "data" / "m1"


@pytest.fixture
def data_dir(made, tmp_path) -> Path:
    out = tmp_path / "m1"
    shutil.copytree(made, out)
    return out


def _middle_leaves(db: Path, table: str, *at: int) -> list[int]:
    leaves = leaf_pages(db, table)
    assert len(leaves) > max(at) + 1, (table, len(leaves))  # pages on both sides stay intact
    return [leaves[i] for i in at]


def test_a_damaged_database_is_refused_at_start_in_one_line_and_left_byte_for_byte(data_dir):
    db = data_dir / "sidecar.db"
    damage(db, _middle_leaves(db, "deliveries", 100))
    before = {s: digest(db.with_name(db.name + s)) for s in ("", "-wal")}
    r = sidecar("serve", "--port", "0", "--data-dir", str(data_dir), "--clock", "virtual")
    assert r.returncode == 7, r.stderr[-2000:]
    assert r.stdout == ""  # no ready line
    lines = r.stderr.splitlines()
    assert len(lines) == 1, lines
    assert str(db) in lines[0] and "is damaged" in lines[0]
    assert f"sidecar repair --data-dir {data_dir}" in lines[0]
    assert {s: digest(db.with_name(db.name + s)) for s in ("", "-wal")} == before
    # the readers say the same, with the same code
    for cmd in (["why", TU, "g-ru-1"], ["deliveries"], ["rules"], ["senders", "list"], ["groups", "list"],
                ["report", "--json", str(data_dir.parent / "report.json")]):
        r = sidecar(*cmd, "--data-dir", str(data_dir))
        assert r.returncode == 7, (cmd, r.stdout[-500:], r.stderr[-1000:])
        assert r.stderr.splitlines() == lines, cmd
    assert {s: digest(db.with_name(db.name + s)) for s in ("", "-wal")} == before


def test_a_crash_left_wal_is_read_for_the_check_and_left_byte_for_byte_as_well(data_dir, tmp_path):
    """After a crash the committed transactions are in ``sidecar.db-wal``: the check must read
    them (mode=ro, not immutable) and must neither checkpoint them into the damaged file nor
    change the WAL.  The crash is a copy of the files taken while a writer still has them open."""
    db = data_dir / "sidecar.db"
    pages = _middle_leaves(db, "deliveries", 100)
    writer = sqlite3.connect(db, isolation_level=None)
    writer.execute("PRAGMA wal_autocheckpoint = 0")
    size = writer.execute("PRAGMA page_size").fetchone()[0]
    writer.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('crash-test', 'in the WAL only')")
    crashed = tmp_path / "crashed"
    crashed.mkdir()
    for f in data_dir.iterdir():
        shutil.copy(f, crashed / f.name)
    writer.close()
    db = crashed / "sidecar.db"
    assert (crashed / "sidecar.db-wal").stat().st_size > 0
    with open(db, "r+b") as f:  # damage the main file only (the page is not in the WAL)
        f.seek((pages[0] - 1) * size)
        f.write(b"\xa5\x5a" * (size // 2))
    before = {s: digest(db.with_name(db.name + s)) for s in ("", "-wal")}
    r = sidecar("serve", "--port", "0", "--data-dir", str(crashed), "--clock", "virtual")
    assert r.returncode == 7 and len(r.stderr.splitlines()) == 1, r.stderr[-2000:]
    assert {s: digest(db.with_name(db.name + s)) for s in ("", "-wal")} == before
    r = sidecar("repair", "--data-dir", str(crashed))
    assert r.returncode == 0, r.stderr
    c = sqlite3.connect(db)
    assert c.execute("SELECT value FROM meta WHERE key = 'crash-test'").fetchone() == ("in the WAL only",)
    c.close()


def _lost_rowids(text: str, table: str) -> set[int]:
    line = next(x for x in text.splitlines() if x.strip().startswith(table + " "))
    out: set[int] = set()
    for a, b in re.findall(r"rowids? (\d+)(?:–(\d+))?", line):
        out.update(range(int(a), int(b or a) + 1))
    return out


def test_repair_moves_the_file_aside_and_salvages_every_table_but_the_damaged_pages(data_dir):
    db = data_dir / "sidecar.db"
    original = counts(db)
    c = sqlite3.connect(db)
    seqs = {s for (s,) in c.execute("SELECT seq FROM deliveries")}
    c.close()
    damage(db, _middle_leaves(db, "deliveries", 60, 150, 151) + _middle_leaves(db, "favorites", 2))
    damaged = digest(db)
    r = sidecar("repair", "--data-dir", str(data_dir))
    assert r.returncode == 0, r.stderr
    aside = sorted(data_dir.glob("sidecar.damaged-*.db"))
    assert len(aside) == 1 and re.fullmatch(r"sidecar\.damaged-\d{8}T\d{6}Z\.db", aside[0].name)
    assert digest(aside[0]) == damaged  # moved, not rewritten
    after = counts(db)
    lost = _lost_rowids(r.stdout, "deliveries")
    assert lost and after["deliveries"] == original["deliveries"] - len(lost & seqs)
    c = sqlite3.connect(db)
    assert {s for (s,) in c.execute("SELECT seq FROM deliveries")} == seqs - lost  # exactly what it says
    assert c.execute("PRAGMA quick_check").fetchone()[0] == "ok"
    c.close()
    assert 0 < after["favorites"] < original["favorites"]
    assert "favorites" in r.stdout.splitlines()[-1] and "could not save" in r.stdout
    for table in set(original) - {"deliveries", "favorites"}:  # undamaged tables: every row
        assert after[table] == original[table], (table, r.stdout)
    for table in ("tasks", "decisions", "service_state", "sessions", "sender_state"):
        assert f"{table} " in r.stdout and original[table] > 0
    # the repaired file is intact: a second repair finds nothing to do
    again = sidecar("repair", "--data-dir", str(data_dir))
    assert again.returncode == 0 and "not damaged" in again.stdout


def test_repair_refuses_while_a_sidecar_holds_the_data_dir(data_dir):
    db = data_dir / "sidecar.db"
    damage(db, _middle_leaves(db, "deliveries", 100))
    before = digest(db)
    lock = DirLock.acquire(db.with_suffix(".lock"))
    try:
        r = sidecar("repair", "--data-dir", str(data_dir))
    finally:
        lock.release()
    assert r.returncode == 3 and "locked" in r.stderr
    assert digest(db) == before and not list(data_dir.glob("sidecar.damaged-*"))


def test_repair_of_a_file_nothing_can_be_read_of_moves_it_aside_with_its_own_code(data_dir):
    db = data_dir / "sidecar.db"
    damage(db, [1])  # the header and schema page
    r = sidecar("repair", "--data-dir", str(data_dir))
    assert r.returncode == 8, (r.stdout, r.stderr)
    assert len(list(data_dir.glob("sidecar.damaged-*.db"))) == 1
    assert counts(db)["deliveries"] == 0  # a fresh, migrated file: the next start restores from Stack


def test_after_a_repair_the_next_start_restores_the_chain_from_stacks_markers(tmp_path, monkeypatch):
    """The end-to-end way out (DESIGN §9): a chain is running when the sidecar crashes; before
    its restart every page of ``favorites``, ``service_state`` and ``tasks`` (the local marker
    cache, the chains pool and the task history the chain is rebuilt from) is damaged.  The
    start refuses (exit 7); ``sidecar repair`` saves the rest; the restarted sidecar logs in and
    continues the chain from what Stack holds (startup data: the favorite's marker, the task
    history) — its follow-up comes exactly at the instant the marker says, as without the damage
    (tests/integration/test_shift_change.py's arithmetic).  Without Stack's startup data the
    chain would not come back (checked by hand: dropping its markers and history fails this)."""
    import asyncio

    from electron_stub.machine import Machine
    from sidecar.core.clock import from_iso
    from sidecar.core.rng import KeyedRandom
    from sidecar.domain.tasks import TaskType, task_id_for
    from sidecar.services import chain as ch

    t0, ru, seed = from_iso(START), "g-ru-1", 5
    src = task_id_for(TU, ru, TaskType.UNANSWERED_MESSAGE, t0 + 10, "socket")
    due = ch.ms(t0 + 20 + ch.delay(KeyedRandom(seed), TU, ru, src, 0)) - t0  # closed at t=20
    assert 80 <= due <= 200
    base = {"project": "golden", "tu": TU, "ru": ru}
    write(tmp_path / "s.jsonl", [
        {"kind": "header", "format": 1, "name": "damaged_mid_chain", "start": START, "seed": seed,
         "duration_s": 400, "operator": {"chat_answer_p": 1.0, "chat_delay_s": [10, 10],
                                          "mail_answer_p": 0.0, "mail_delay_s": [60, 60]}},
        {"kind": "tu", "project": "golden", "tu": TU, "operator": "op-1"},
        {"kind": "favorite", **base, **FAV},
        {"t": 0, "kind": "login", "project": "golden", "tu": TU, "operator": "op-1"},
        {"t": 5, "kind": "online", "project": "golden", "ru": ru, "online": True},
        {"t": 10, "kind": "message", **base, "from": "ru", "id": "m-1", "body": "hi"},
        {"t": 45, "kind": "expect", "what": "marker", "tu": TU, "ru": ru, "name": "followUpChat",
         "value": {"sourceUnansweredTaskId": src, "step": 0}},
        {"t": 50, "kind": "crash"},
        {"t": due - 1, "kind": "expect", "what": "no_task", "tu": TU, "type": "follow_up_message",
         "ru": ru, "between": [0, due - 1.5]},
        {"t": due + 2, "kind": "expect", "what": "task_created", "tu": TU, "type": "follow_up_message",
         "ru": ru, "between": [due, due + 1], "source": "chain"},
    ])
    seen: dict = {}
    start = Machine.start

    async def damaged_restart(self: Machine) -> None:
        if self.launches:  # the restart after the crash: damage, refused start, repair
            db = self.data_dir / "sidecar.db"
            pages = [p for t in ("favorites", "service_state", "tasks") for p in leaf_pages(db, t)]
            seen["before"] = counts(db)
            damage(db, pages)
            seen["serve"] = await asyncio.to_thread(
                sidecar, "serve", "--port", "0", "--data-dir", str(self.data_dir), "--clock", "virtual")
            seen["repair"] = await asyncio.to_thread(sidecar, "repair", "--data-dir", str(self.data_dir))
            seen["after"] = counts(db)
        await start(self)

    monkeypatch.setattr(Machine, "start", damaged_restart)
    rp, code = replay(tmp_path / "s.jsonl", tmp_path / "data")
    assert seen["serve"].returncode == 7 and "sidecar repair" in seen["serve"].stderr
    assert seen["repair"].returncode == 0, seen["repair"].stderr
    assert seen["before"]["favorites"] == 1 and seen["before"]["service_state"] > 0
    for lost in ("favorites", "service_state", "tasks"):  # lost locally
        assert seen["before"][lost] > 0 and seen["after"][lost] == 0, (lost, seen["repair"].stdout)
    assert seen["after"]["deliveries"] == seen["before"]["deliveries"] > 0
    assert code == 0, [r for r in rp.results if not r.ok]
    assert rp.stats.crashes == 1
    first = min((t for t in rp.rec.tasks.values() if t.type == "follow_up_message"),
                key=lambda t: t.created_at)
    assert round(first.created_at - t0, 3) == round(due, 3)


def test_repair_of_a_readable_but_empty_database_is_not_nothing_could_be_read(data_dir):
    """Exit 8 says nothing could be READ; tables read whole but empty are saved (breaker brk18:
    one damaged page of a fresh data dir answered 8 while 14 of 16 tables were read fine)."""
    db = data_dir / "sidecar.db"
    damage(db, [1])
    assert sidecar("repair", "--data-dir", str(data_dir)).returncode == 8  # now a fresh, empty file
    c = sqlite3.connect(db)
    try:
        root = c.execute("SELECT rootpage FROM sqlite_master WHERE name = 'sessions'").fetchone()[0]
    finally:
        c.close()
    damage(db, [root])
    r = sidecar("repair", "--data-dir", str(data_dir))
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert "sessions" in r.stdout and len(list(data_dir.glob("sidecar.damaged-*.db"))) == 2
