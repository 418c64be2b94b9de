"""A crash between a Follow-up mail trigger and its check, through the harness and real sidecar
processes (seed 001 "Ініціалізація", "Збереження": a restart restores from Stack, task history
and the unsent local changes).  The RU reads the TU's letter and the sidecar is SIGKILLed at that
instant, before the read's check: the restarted process checks the read once and makes the mail;
a burst close likewise.  Self-contained: the scenarios are written here (no ../shared)."""
from __future__ import annotations

import json

from sidecar.core.clock import from_iso
from tests.integration.replay_util import replay

START = "2026-11-30T08:00:00Z"
T0 = from_iso(START)
TU, RU = "g-tu-1", "g-ru-1"
BASE = {"project": "golden", "tu": TU, "ru": RU}


def write(path, lines):
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))


def world(name: str, duration: float, seed: int = 3, letter_at: float = -7200) -> list[dict]:
    return [
        {"kind": "header", "format": 1, "name": name, "start": START, "seed": seed, "duration_s": duration,
         "operator": {"chat_answer_p": 1.0, "chat_delay_s": [10, 10], "mail_answer_p": 0.0,
                      "mail_delay_s": [60, 60]}},
        {"kind": "tu", "project": "golden", "tu": TU, "operator": "op-1"},
        {"kind": "favorite", **BASE, "active": True, "is_white": False, "spend_30d_usd": 50.0,
         "spend_total_usd": 400.0, "paid_actions": 40, "paid_with_bonuses_only": False,
         "chat_limit": None, "mail_limit": None, "markers": {}},
        {"kind": "mail_log", **BASE, "from": "tu", "at": letter_at, "id": "ml-0"},  # 2 h old: no 6 h mail
        {"t": 0, "kind": "login", "project": "golden", "tu": TU, "operator": "op-1"},
        {"t": 5, "kind": "online", "project": "golden", "ru": RU, "online": True},
    ]


def test_a_read_whose_check_a_crash_interrupted_makes_its_mail_after_the_restart(tmp_path):
    write(tmp_path / "s.jsonl", world("crash_at_mail_read", 400) + [
        {"t": 100, "kind": "mail_read", **BASE, "mail_id": "ml-0", "event_key": "rd-1"},
        {"t": 100, "kind": "crash"},
        {"t": 390, "kind": "expect", "what": "task_created", "tu": TU, "type": "follow_up_mail", "ru": RU,
         "between": [100, 161], "source": "mail_read"},
        {"t": 390, "kind": "expect", "what": "count", "tu": TU, "type": "follow_up_mail", "ru": RU,
         "between": [0, 390], "min": 1, "max": 1},
        {"t": 390, "kind": "expect", "what": "marker", "tu": TU, "ru": RU, "name": "followUpMail",
         "value": {"lastReadEventKey": "rd-1"}},
    ])
    rp, code = replay(tmp_path / "s.jsonl", tmp_path / "data")
    assert code == 0, [r for r in rp.results if not r.ok]
    assert rp.stats.crashes == 1


def test_a_burst_close_whose_check_a_crash_interrupted_is_rolled_once_after_the_restart(tmp_path):
    """Ten RU messages 40 s apart, each answered 10 s later: the sixth close (t=220) is the first
    burst.  The crash at that close's instant must not lose its roll — the run with the crash
    makes the same burst mails as the run without it (the roll is keyed by the close)."""
    def scenario(crash: bool) -> list[dict]:
        lines = world("crash_at_burst", 700, seed=1, letter_at=-3600)
        timeline = [{"t": 10 + 40 * i, "kind": "message", **BASE, "from": "ru", "id": f"m-{i}", "body": "hi"}
                    for i in range(10)]
        if crash:
            timeline.append({"t": 220, "kind": "crash"})
        timeline.append({"t": 690, "kind": "expect", "what": "count", "tu": TU, "type": "follow_up_mail",
                         "ru": RU, "between": [0, 690], "source": "burst", "min": 0, "max": 1})
        return lines + sorted(timeline, key=lambda x: x["t"])

    made = {}
    for crash in (False, True):
        write(tmp_path / f"s{crash}.jsonl", scenario(crash))
        rp, code = replay(tmp_path / f"s{crash}.jsonl", tmp_path / f"data{crash}")
        assert code == 0, [r for r in rp.results if not r.ok]
        made[crash] = sorted((t.source, round(t.created_at - T0, 3), (t.meta or {}).get("ref"))
                             for t in rp.rec.tasks.values() if t.type == "follow_up_mail")
    assert made[True] == made[False] and made[False], made
