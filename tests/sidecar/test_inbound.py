"""Unanswered message / mail / e-mail, Like, Open Limits and captcha on the virtual clock
(DESIGN §6, seed 003 "План реалізації")."""
from __future__ import annotations

import pytest

from tests.sidecar.world import T0, World, fav

TU, RU = "tu-1", "ru-1"


def created(w: World, type_: str):
    return w.d.created(type_)


def test_burst_is_one_task_with_deadline_from_first_message_then_overdue_not_expired():
    """DESIGN §6: an answer-awaiting task becomes overdue at its deadline and stays open."""
    w = World()
    w.login([fav(RU)])
    for t in (10, 12, 14):
        w.at(t).ru_writes(RU)
    [task] = created(w, "unanswered_message")
    assert (task.created_at, task.deadline) == (T0 + 10, T0 + 130)
    w.at(129.999)
    assert not w.open_task("unanswered_message", RU).overdue
    assert [p for m, p in w.d.notes if m == "task.updated"] == []
    w.at(130)
    [upd] = [p for m, p in w.d.notes if m == "task.updated"]
    assert (upd.task_id, upd.overdue, upd.at, upd.deadline) == (task.task_id, True, T0 + 130, T0 + 130)
    w.at(5000)
    assert w.d.closed() == []
    assert w.open_task("unanswered_message", RU).overdue
    w.at(5000).ru_writes(RU)  # still one task for the burst: the deadline stays at the first message
    assert len(created(w, "unanswered_message")) == 1
    w.at(5001).tu_writes(RU)
    [closed] = w.d.closed("unanswered_message")
    assert (closed.reason, closed.closed_at) == ("answered", T0 + 5001)


def test_tu_send_answers_every_task_of_its_channel_for_the_pair_only():
    w = World()
    w.login([fav(RU), fav("ru-2")])
    w.at(5).ru_writes(RU)
    w.at(6).ru_writes("ru-2")
    w.at(7).d.event(TU, "golden", "statistics", {"type": "EmailSend", "userId": RU, "at": T0 + 7, "eventKey": "e1"})
    w.at(20).tu_writes(RU)
    reasons = sorted((c.type, c.ru, c.reason) for c in w.d.closed())
    assert reasons == [("unanswered_message", RU, "answered")]
    assert w.open_task("unanswered_mail", RU) is not None
    assert w.open_task("unanswered_message", "ru-2") is not None


@pytest.mark.parametrize("project,name,data,kind", [
    ("golden", "receivePrivateMessage", {"messageId": "l", "senderId": RU, "recipientId": TU, "sentAt": T0, "text": "🌹"}, "rose"),
    ("chathouse", "Send", {"id": "l", "type": "message", "from": RU, "to": TU, "at": T0, "body": "[like]"}, "like"),
    ("prime", "MessageSent", {"id": "l", "type": "wink", "senderId": RU, "recipientId": TU, "at": T0}, "wink"),
    ("prime", "MessageSent", {"id": "l", "type": "likephoto", "senderId": RU, "recipientId": TU, "at": T0}, "likephoto"),
    ("prime", "MessageSent", {"id": "l", "type": "like_newsfeed_post", "senderId": RU, "recipientId": TU, "at": T0}, "like_newsfeed_post"),
])
def test_like_kinds_per_project(project, name, data, kind):
    w = World(project=project)
    w.login([fav(RU, project)])
    w.at(10).d.event(TU, project, name, data)
    [task] = created(w, "like")
    assert task.deadline - task.created_at == 300
    assert created(w, "unanswered_message") == []


def test_like_with_no_chat_limit_but_mail_limit_says_answer_by_mail():
    w = World(project="prime")
    w.login([fav(RU, "prime", chat_limit=0, mail_limit=2)])
    w.at(10).d.event(TU, "prime", "MessageSent",
                     {"id": "l", "type": "wink", "senderId": RU, "recipientId": TU, "at": T0 + 10})
    [task] = created(w, "like")
    assert task.meta == {"answer_by": "mail"}


@pytest.mark.parametrize("project,name,data,source", [
    ("golden", "statistics", {"type": "EmailSend", "userId": RU, "at": T0, "eventKey": "e1"}, "stats"),
    ("golden", "statistics", {"type": "EmailSendBonusCoins", "userId": RU, "at": T0, "eventKey": "e1"}, "stats"),
    ("chathouse", "Send", {"id": "m", "type": "inmail_message", "from": RU, "to": TU, "at": T0}, "socket"),
    ("chathouse", "statistic", {"type": "inmail_photo_send", "from": RU, "to": TU, "at": T0, "eventKey": "e"}, "stats"),
    ("prime", "email", {"id": "m", "senderId": RU, "recipientId": TU, "at": T0}, "socket"),
])
def test_unanswered_mail_triggers(project, name, data, source):
    w = World(project=project)
    w.login([fav(RU, project)])
    w.at(10).d.event(TU, project, name, data)
    [task] = created(w, "unanswered_mail")
    assert (task.source, task.deadline - task.created_at) == (source, 600)


def test_unanswered_email_deadline_counts_from_receipt():
    w = World()
    w.login([fav(RU)])
    w.at(100).d.event(TU, "golden", "incomingEmail",
                      {"emailId": "e", "fromId": RU, "receivedAt": T0 + 40, "at": T0 + 100})
    [task] = created(w, "unanswered_email")
    assert (task.created_at, task.deadline) == (T0 + 100, T0 + 40 + 43200)


def test_unanswered_supersedes_open_follow_up():
    w = World(project="chathouse")
    w.chat[RU] = [{"id": "a", "from": "tu", "at": T0 - 600}]
    w.online.add(RU)
    w.login([fav(RU, "chathouse")])
    w.at(10).d.event(TU, "chathouse", "new_notification", {"type": "ONLINE_NOW", "userId": RU, "at": T0 + 10})
    assert created(w, "follow_up_message")
    w.at(20).ru_writes(RU)
    assert [(c.type, c.reason) for c in w.d.closed()] == [("follow_up_message", "superseded")]


def test_captcha_from_chat_request():
    w = World(project="chathouse")
    w.login([fav(RU, "chathouse")])
    w.at(10).d.event(TU, "chathouse", "chat_request", {"from": RU, "at": T0 + 10})
    [task] = created(w, "open_limits_captcha")
    assert task.deadline == T0 + 310


def test_prime_system_message_opens_limits_after_live_check():
    w = World(project="prime")
    w.login([fav(RU, "prime")])
    w.at(10).d.event(TU, "prime", "MessageSent",
                     {"id": "s", "type": "system", "senderId": RU, "recipientId": TU, "at": T0 + 10, "text": "limits opened"})
    [task] = created(w, "open_limits")
    assert task.source == "socket"
    assert ("tu-1", "chat_restriction", {"ru": RU}) in w.d.requests


def test_prime_system_message_without_live_limits_is_refused():
    w = World(project="prime")
    w.limits[RU] = (0, 0)
    w.login([fav(RU, "prime")])
    w.at(10).d.event(TU, "prime", "MessageSent",
                     {"id": "s", "type": "system", "senderId": RU, "recipientId": TU, "at": T0 + 10, "text": "limits opened"})
    assert created(w, "open_limits") == []
    assert w.d.engine.tus[TU].favorites[RU].chat_limit == 0
    from sidecar.store.ops import PutDecision
    assert [(op.task_type, op.outcome) for op in w.d.ops if isinstance(op, PutDecision)] == [
        ("open_limits", "refused:no_chat_limit")]


def test_golden_has_no_open_limits():
    w = World()
    w.login([fav(RU)])
    w.at(10).d.event(TU, "golden", "chatRequest", {"senderId": RU, "at": T0 + 10})
    assert created(w, "open_limits") == []
    assert len(created(w, "open_limits_captcha")) == 1


def test_check_chat_covers_socket_tasks_and_raises_missed_ones():
    w = World(project="chathouse")
    rows = []
    base = w.answer

    def answer(tu, method, params):
        if method == "scroll_new":
            return {"dialogs": rows}
        return base(tu, method, params)
    w.d.answer = answer
    rows[:] = [{"userId": "ru-2", "dialogId": "d2", "lastMessage": {"from": "ru", "at": T0 - 50, "type": "message"}},
               {"userId": "ru-3", "dialogId": "d3", "lastMessage": {"from": "ru", "at": T0 - 40, "type": "like"}},
               {"userId": "ru-4", "dialogId": "d4", "lastMessage": {"from": "tu", "at": T0 - 40, "type": "icebreaker"}},
               {"userId": "ru-5", "dialogId": "d5", "unansweredMailAt": T0 - 30}]
    w.login([fav(r, "chathouse") for r in ("ru-2", "ru-3", "ru-4", "ru-5")])
    got = sorted((t.type, t.ru, t.source) for t in w.d.created())
    assert got == [("like", "ru-3", "check_chat"), ("open_limits", "ru-4", "scroll_new"),
                   ("unanswered_mail", "ru-5", "check_chat"),
                   ("unanswered_message", "ru-2", "check_chat")]
    w.at(3700)  # two more 30-minute checks: the same rows are covered, nothing new
    assert len(w.d.created()) == 4


def test_one_open_task_per_pair_and_type_and_vip_sort():
    w = World()
    w.login([fav("r-a", spend_30d_usd=950), fav("r-b", spend_30d_usd=10), fav("r-c", spend_30d_usd=650)])
    w.at(10)
    for ru in ("r-b", "r-a", "r-c"):
        w.ru_writes(ru)
    tasks = w.d.engine.open_tasks(TU)
    assert [(t.ru, t.vip) for t in tasks] == [("r-a", "green"), ("r-c", "yellow"), ("r-b", None)]


def test_logout_closes_open_tasks_and_stops_timers():
    w = World()
    w.login([fav(RU)])
    w.at(10).ru_writes(RU)
    w.d.logout(TU)
    assert [c.reason for c in w.d.closed()] == ["logout"]
    assert len(w.d.engine.scheduler) == 0


def test_block_by_tu_from_ui_closes_pair_tasks():
    w = World()
    w.login([fav(RU)])
    w.at(10).ru_writes(RU)
    w.at(20).d.favorite(TU, RU, blocked_by_tu=True)
    assert [c.reason for c in w.d.closed()] == ["blocked"]
    w.at(30).ru_writes(RU)
    assert len(created(w, "unanswered_message")) == 1  # blocked pair: refused


# issue 6 item 5 -- an unknown limit counts as absent (DESIGN §6) ------------------------------

def test_open_limits_with_an_unknown_chat_limit_waits_for_a_row_that_carries_it():
    other = "ru-9"
    w = World(project="chathouse")
    w.limits[other] = (None, None)
    w.new_rows[other] = {"userId": other, "dialogId": None, "lastMessage": None, "chatLimit": None}
    w.login([])
    assert created(w, "open_limits") == []  # refused:limit_unknown at the login's check chat
    slot = w.d.engine.tus[TU].due_of(("passes", "check_chat"))
    w.new_rows[other]["chatLimit"] = 2
    w.at_abs(slot - 0.001)
    assert created(w, "open_limits") == []
    w.at_abs(slot)
    [task] = created(w, "open_limits")
    assert (task.created_at, task.source, task.meta) == (slot, "scroll_new", {"reason": "empty_dialog"})


def test_open_limits_with_a_known_zero_chat_limit_is_not_made():
    other = "ru-9"
    w = World(project="chathouse")
    w.new_rows[other] = {"userId": other, "dialogId": None, "lastMessage": None, "chatLimit": 0}
    w.login([])
    w.at(4000)
    assert created(w, "open_limits") == []


def test_follow_up_with_an_unknown_chat_limit_is_refused_then_made_when_a_pass_carries_it():
    from sidecar.services import chain as ch
    w = World(project="chathouse")
    w.limits[RU] = (None, None)
    w.online.add(RU)
    w.login([fav(RU, "chathouse", chat_limit=None, mail_limit=None)])
    w.at(10).ru_writes(RU)
    src = w.open_task("unanswered_message", RU).task_id
    w.at(20).tu_writes(RU)
    due = ch.ms(T0 + 20 + ch.delay(w.d.engine.rng, TU, RU, src, 0))
    w.at_abs(due)
    assert created(w, "follow_up_message") == []
    assert w.d.attempts()[-1].outcome == "refused:limit_unknown"
    w.limits[RU] = (3, 1)
    slot = w.d.engine.tus[TU].due_of(("passes", "online"))
    w.at_abs(slot)
    [task] = created(w, "follow_up_message")
    assert (task.created_at, task.source) == (slot, "chain")
