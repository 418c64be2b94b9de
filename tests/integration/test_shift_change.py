"""A shift change in the middle of a chain: op-1 logs out, op-2 logs in on a fresh machine (empty
data dir), which restores the chain from Stack alone and checks at the instant the marker says.
Self-contained: the scenario is written here, so it runs without ../shared."""
from __future__ import annotations

import json

from sidecar.core.clock import from_iso, to_iso
from sidecar.core.rng import KeyedRandom
from sidecar.domain.tasks import TaskType, task_id_for
from sidecar.services import chain as ch
from tests.integration.replay_util import replay

START = "2026-11-30T08:00:00Z"
T0 = from_iso(START)
SEED = 5
TU, RU = "g-tu-1", "g-ru-1"


def write(path, lines):
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))


def test_fresh_machine_continues_the_chain_at_the_marker_time(tmp_path):
    # the chain's source: the Unanswered message created by the RU's message at t=10
    src = task_id_for(TU, RU, TaskType.UNANSWERED_MESSAGE, T0 + 10, "socket")
    due = ch.ms(T0 + 20 + ch.delay(KeyedRandom(SEED), TU, RU, src, 0)) - T0  # closed at t=20
    assert 80 <= due <= 200
    base = {"project": "golden", "tu": TU, "ru": RU}
    write(tmp_path / "s.jsonl", [
        {"kind": "header", "format": 1, "name": "shift_change_mid_chain", "start": START, "seed": SEED,
         "duration_s": 400, "operator": {"chat_answer_p": 1.0, "chat_delay_s": [10, 10],
                                          "mail_answer_p": 0.0, "mail_delay_s": [60, 60]}},
        {"kind": "tu", "project": "golden", "tu": TU, "operator": "op-1"},
        {"kind": "favorite", **base, "active": True, "is_white": False, "spend_30d_usd": 50.0,
         "spend_total_usd": 400.0, "paid_actions": 40, "paid_with_bonuses_only": False,
         "chat_limit": None, "mail_limit": None, "markers": {}},
        {"t": 0, "kind": "login", "project": "golden", "tu": TU, "operator": "op-1"},
        {"t": 5, "kind": "online", "project": "golden", "ru": RU, "online": True},
        {"t": 10, "kind": "message", **base, "from": "ru", "id": "m-1", "body": "hi"},
        {"t": 40, "kind": "logout", "project": "golden", "tu": TU, "operator": "op-1"},
        {"t": 45, "kind": "expect", "what": "marker", "tu": TU, "ru": RU, "name": "followUpChat",
         "value": {"sourceUnansweredTaskId": src, "step": 0}},
        {"t": 50, "kind": "login", "project": "golden", "tu": TU, "operator": "op-2", "fresh": True},
        {"t": due - 1, "kind": "expect", "what": "no_task", "tu": TU, "type": "follow_up_message",
         "ru": RU, "between": [0, due - 1.5]},
        {"t": due + 2, "kind": "expect", "what": "task_created", "tu": TU, "type": "follow_up_message",
         "ru": RU, "between": [due, due + 1], "source": "chain"},
    ])
    rp, code = replay(tmp_path / "s.jsonl", tmp_path / "data")
    assert code == 0, [r for r in rp.results if not r.ok]
    machines = {e.machine for e in rp.stats.exits}
    assert len(machines) == 2  # op-2 really ran on a second, fresh machine
    first = min((t for t in rp.rec.tasks.values() if t.type == "follow_up_message"),
                key=lambda t: t.created_at)
    assert round(first.created_at - T0, 3) == round(due, 3)


def test_fresh_machine_continues_a_pending_post_chat_timer_at_the_marker_time(tmp_path):
    """Issue 8 "Done when": a shift change with ``fresh: true`` continues a pending post-chat
    timer at the time its marker says (seed 001 "Ініціалізація": the marker restores the timer;
    "Післячатовий таймер": the mail is made online or not).  op-1's machine sets the timer at the
    Unanswered close (t=20) and logs out; op-2's machine, with an empty data dir, reads the marker
    from Stack's startup data and makes the post-chat mail exactly at ``postChatDueAt`` — with the
    RU offline by then — and not a moment sooner."""
    from sidecar.services.follow_up_mail import marker as mk
    from sidecar.services.follow_up_mail import sources as fum

    src = task_id_for(TU, RU, TaskType.UNANSWERED_MESSAGE, T0 + 10, "socket")
    due_abs = mk.ms(T0 + 20 + fum.post_chat_delay(KeyedRandom(SEED), TU, RU, src))  # closed at t=20
    due = round(due_abs - T0, 3)
    assert 620 <= due <= 1220
    base = {"project": "golden", "tu": TU, "ru": RU}
    write(tmp_path / "s.jsonl", [
        {"kind": "header", "format": 1, "name": "shift_change_pending_post_chat", "start": START,
         "seed": SEED, "duration_s": 1300, "operator": {"chat_answer_p": 1.0, "chat_delay_s": [10, 10],
                                                        "mail_answer_p": 0.0, "mail_delay_s": [60, 60]}},
        {"kind": "tu", "project": "golden", "tu": TU, "operator": "op-1"},
        {"kind": "favorite", **base, "active": True, "is_white": False, "spend_30d_usd": 50.0,
         "spend_total_usd": 400.0, "paid_actions": 40, "paid_with_bonuses_only": False,
         "chat_limit": None, "mail_limit": None, "markers": {}},
        {"kind": "mail_log", **base, "from": "tu", "at": -3600, "id": "ml-0"},  # 1 h old: no 6 h mail
        {"t": 0, "kind": "login", "project": "golden", "tu": TU, "operator": "op-1"},
        {"t": 5, "kind": "online", "project": "golden", "ru": RU, "online": True},
        {"t": 10, "kind": "message", **base, "from": "ru", "id": "m-1", "body": "hi"},
        {"t": 40, "kind": "logout", "project": "golden", "tu": TU, "operator": "op-1"},
        {"t": 45, "kind": "expect", "what": "marker", "tu": TU, "ru": RU, "name": "followUpMail",
         "value": {"postChatSourceTaskId": src, "postChatDueAt": to_iso(due_abs)}},
        {"t": 50, "kind": "login", "project": "golden", "tu": TU, "operator": "op-2", "fresh": True},
        {"t": 100, "kind": "online", "project": "golden", "ru": RU, "online": False},
        {"t": due - 1, "kind": "expect", "what": "no_task", "tu": TU, "type": "follow_up_mail",
         "ru": RU, "between": [0, due - 1.5]},
        {"t": due + 2, "kind": "expect", "what": "task_created", "tu": TU, "type": "follow_up_mail",
         "ru": RU, "between": [due, due + 1], "source": "post_chat"},
        {"t": due + 3, "kind": "expect", "what": "marker", "tu": TU, "ru": RU, "name": "followUpMail",
         "value": None},  # the timer was consumed by its check
    ])
    rp, code = replay(tmp_path / "s.jsonl", tmp_path / "data")
    assert code == 0, [r for r in rp.results if not r.ok]
    assert len({e.machine for e in rp.stats.exits}) == 2  # op-2 really ran on a second, fresh machine
    [mail] = [t for t in rp.rec.tasks.values() if t.type == "follow_up_mail"]
    assert mail.source == "post_chat" and mail.meta.get("ref") == src
    assert round(mail.created_at - T0, 3) == due
