"""The Task Factory on the virtual clock (issue 6 items 1 and 4; DESIGN §6):
overdue instead of expired for answer-awaiting tasks, prompts expiring at the deadline and when
RU Online says the RU went offline, and one strength table per channel."""
from __future__ import annotations

import pytest

from sidecar.domain.tasks import (SPECS, STRENGTH, Channel, TaskType, stronger_or_same,
                                  weaker_than)
from tests.sidecar.world import T0, World, fav

TU, RU = "tu-1", "ru-1"


def updates(w: World) -> list:
    return [p for m, p in w.d.notes if m == "task.updated"]


def golden_event(w: World, name: str, data: dict) -> None:
    w.d.event(TU, "golden", name, data)


# item 1 -- overdue, not expired ------------------------------------------------------------

TRIGGERS = {
    "unanswered_message": lambda w: w.ru_writes(RU),
    "unanswered_mail": lambda w: golden_event(w, "statistics", {"type": "EmailSend", "userId": RU,
                                                                "at": w.d.now, "eventKey": "e1"}),
    "unanswered_email": lambda w: golden_event(w, "incomingEmail", {"emailId": "e", "fromId": RU,
                                                                    "receivedAt": w.d.now, "at": w.d.now}),
    "like": lambda w: golden_event(w, "receivePrivateMessage", {"messageId": "l", "senderId": RU,
                                                                "recipientId": TU, "sentAt": w.d.now,
                                                                "text": "🌹"}),
}


@pytest.mark.parametrize("type_", sorted(TRIGGERS))
def test_answer_awaiting_task_becomes_overdue_at_its_deadline_and_stays_open(type_):
    w = World()
    w.login([fav(RU)])
    w.at(10)
    TRIGGERS[type_](w)
    [task] = w.d.created(type_)
    deadline = T0 + 10 + SPECS[TaskType(type_)].ttl_s
    assert task.deadline == deadline
    w.at_abs(deadline - 0.001)
    assert updates(w) == [] and not w.open_task(type_, RU).overdue
    w.at_abs(deadline)
    [u] = updates(w)
    assert (u.task_id, u.type, u.ru, u.overdue, u.at) == (task.task_id, type_, RU, True, deadline)
    w.at_abs(deadline + 86400)
    assert w.d.closed() == [] and len(updates(w)) == 1  # announced once, never expired
    assert w.open_task(type_, RU).overdue


@pytest.mark.parametrize("type_", ["open_limits_captcha"])
def test_prompt_expires_at_its_deadline(type_):
    w = World(project="chathouse")
    w.login([fav(RU, "chathouse")])
    w.at(10).d.event(TU, "chathouse", "chat_request", {"from": RU, "at": T0 + 10})
    w.at(309.999)
    assert w.d.closed() == []
    w.at(310)
    [c] = w.d.closed()
    assert (c.type, c.reason, c.closed_at) == (type_, "expired", T0 + 310)
    assert updates(w) == []


def test_overdue_reply_at_any_delay_closes_answered_and_starts_the_chain():
    from sidecar.services import chain as ch
    w = World()
    w.online.add(RU)
    w.login([fav(RU)])
    w.at(10).ru_writes(RU)
    [task] = w.d.created("unanswered_message")
    w.at(7200).tu_writes(RU)  # two hours late
    [c] = w.d.closed("unanswered_message")
    assert (c.reason, c.closed_at) == ("answered", T0 + 7200)
    due = ch.ms(T0 + 7200 + ch.delay(w.d.engine.rng, TU, RU, task.task_id, 0))
    w.at_abs(due)
    [fu] = w.d.created("follow_up_message")
    assert (fu.source, fu.created_at) == ("chain", due)


def test_overdue_tasks_sort_first_and_are_listed_overdue():
    w = World()
    w.login([fav(RU), fav("ru-2")])
    w.at(10).ru_writes(RU)
    w.at(100).ru_writes("ru-2")
    w.at(131)
    listed = w.d.engine.open_tasks(TU)
    assert [(t.ru, t.overdue) for t in listed] == [(RU, True), ("ru-2", False)]
    from sidecar.app.wire import task_view
    assert task_view(listed[0]).overdue is True


def test_logout_closes_an_overdue_task_as_logout():
    w = World()
    w.login([fav(RU)])
    w.at(10).ru_writes(RU)
    w.at(500).d.logout(TU)
    [c] = w.d.closed()
    assert (c.type, c.reason, c.closed_at) == ("unanswered_message", "logout", T0 + 500)


def test_restart_adopts_an_overdue_task_as_overdue_without_announcing_it_again():
    w = World()
    w.login([fav(RU)])
    w.at(10).ru_writes(RU)
    w.at(200)
    w2 = w.restart()
    t = w2.open_task("unanswered_message", RU)
    assert t is not None and t.overdue
    w2.at(5000)
    assert updates(w2) == [] and w2.d.closed() == []


def test_online_only_prompt_expires_at_the_pass_that_says_its_ru_went_offline():
    w = World(project="chathouse")
    w.chat[RU] = [{"id": "a", "from": "tu", "at": T0 - 600}]
    w.online.add(RU)
    w.login([fav(RU, "chathouse")])
    w.at(10).d.event(TU, "chathouse", "new_notification", {"type": "ONLINE_NOW", "userId": RU, "at": T0 + 10})
    [task] = w.d.created("follow_up_message")
    w.at(11)
    w.online.discard(RU)
    slot = w.d.engine.tus[TU].due_of(("passes", "online"))
    assert slot is not None and slot < task.deadline
    w.at_abs(slot - 0.001)
    assert w.d.closed() == []
    w.at_abs(slot)
    [c] = w.d.closed()
    assert (c.type, c.reason, c.closed_at) == ("follow_up_message", "expired", slot)


def test_answer_awaiting_tasks_do_not_expire_when_the_ru_goes_offline():
    w = World(project="chathouse")
    w.online.add(RU)
    w.login([fav(RU, "chathouse")])
    w.at(10).ru_writes(RU)
    w.online.discard(RU)
    w.at(400)
    assert w.d.closed() == [] and w.open_task("unanswered_message", RU).overdue


def test_check_chat_raises_no_second_task_for_a_pair_whose_overdue_task_is_open():
    w = World(project="chathouse")
    w.login([fav(RU, "chathouse")])
    w.at(10).ru_writes(RU)
    w.new_rows[RU] = {"userId": RU, "dialogId": "d-1", "isOnline": False,
                      "lastMessage": {"from": "ru", "at": T0 + 10, "type": "message"}, "chatLimit": 3}
    w.at(4 * 3600)  # eight check chats later
    assert len(w.d.created("unanswered_message")) == 1
    assert w.open_task("unanswered_message", RU).overdue


# item 4 -- one strength table per channel ---------------------------------------------------

def test_the_strength_table_holds_every_type_once_in_its_own_channel():
    seen = [t for row in STRENGTH.values() for t in row]
    assert sorted(seen) == sorted(TaskType) and len(seen) == len(set(seen))
    for ch, row in STRENGTH.items():
        assert all(SPECS[t].channel is ch for t in row)
    assert STRENGTH[Channel.CHAT] == (TaskType.UNANSWERED_MESSAGE, TaskType.LIKE,
                                      TaskType.OPEN_LIMITS_CAPTCHA, TaskType.OPEN_LIMITS,
                                      TaskType.FOLLOW_UP_MESSAGE)
    assert stronger_or_same(TaskType.LIKE) == (TaskType.UNANSWERED_MESSAGE, TaskType.LIKE)
    assert weaker_than(TaskType.UNANSWERED_MAIL) == (TaskType.FOLLOW_UP_MAIL,)


def test_unanswered_message_supersedes_every_weaker_chat_task():
    w = World(project="chathouse")
    w.login([fav(RU, "chathouse")])
    w.at(10).d.event(TU, "chathouse", "chat_request", {"from": RU, "at": T0 + 10})
    w.at(20).ru_writes(RU)
    assert [(c.type, c.reason, c.closed_at) for c in w.d.closed()] == [
        ("open_limits_captcha", "superseded", T0 + 20)]


def test_a_weaker_candidate_is_refused_while_a_stronger_task_is_open():
    from sidecar.runtime.factory import Candidate
    w = World()
    w.login([fav(RU)])
    w.at(10).ru_writes(RU)
    rt = w.d.engine.tus[TU]
    made = w.d.run(lambda s: rt.factory.propose(s, rt, Candidate(TaskType.LIKE, RU, "socket")))
    assert made.reason == "stronger_task_open"
    made = w.d.run(lambda s: rt.factory.propose(s, rt, Candidate(TaskType.UNANSWERED_MESSAGE, RU, "socket")))
    assert made.reason == "open"
    assert w.d.created("like") == []


def test_a_superseded_chain_follow_up_writes_one_marker_change():
    from sidecar.services import chain as ch
    w = World()
    w.online.add(RU)
    w.login([fav(RU)])
    w.at(10).ru_writes(RU)
    src = w.open_task("unanswered_message", RU).task_id
    w.at(20).tu_writes(RU)
    due = ch.ms(T0 + 20 + ch.delay(w.d.engine.rng, TU, RU, src, 0))
    w.at_abs(due)
    assert w.open_task("follow_up_message", RU) is not None
    before = len(w.markers(RU))
    w.at_abs(due + 5).ru_writes(RU)  # a new Unanswered supersedes the chain Follow-up
    [c] = w.d.closed("follow_up_message")
    assert c.reason == "superseded"
    assert w.markers(RU)[before:] == [(f"followUpChat:{TU}:{RU}:{src}:0:clear", None)]


def test_after_a_restart_the_first_grid_pass_expires_a_follow_up_whose_ru_is_offline():
    """The restarted sidecar's RU Online starts empty: "went offline" must be judged against the
    open prompts, not against the previous pass (found by the harness on the demo shift) — at the
    first grid pass, the instant a sidecar that never stopped expires it too, not at the login's
    own pass (the crash instant; issue 18 item 6)."""
    closes = {}
    for crash in (False, True):
        w = World(project="chathouse")
        w.chat[RU] = [{"id": "a", "from": "tu", "at": T0 - 600}]
        w.online.add(RU)
        w.login([fav(RU, "chathouse")])
        w.at(10).d.event(TU, "chathouse", "new_notification", {"type": "ONLINE_NOW", "userId": RU, "at": T0 + 10})
        [task] = w.d.created("follow_up_message")
        w.online.discard(RU)
        w.at(11)
        slot = w.pass_slot(w.d.now)
        if crash:
            w = w.restart()  # crash before the next pass: the task is adopted open
            assert w.d.closed() == []
        w.at_abs(slot)
        [c] = w.d.closed()
        closes[crash] = (c.task_id, c.reason, c.closed_at)
    assert closes[True] == closes[False] == (task.task_id, "expired", slot)


def test_a_candidate_overrides_its_types_online_rule_and_the_task_keeps_it():
    """The factory knows no source names (issue 8): ``Candidate.online_required`` decides, and
    the open task carries it for the offline expiry (DESIGN §6, "except post-chat")."""
    from sidecar.runtime.factory import Candidate, Refused

    w = World()
    w.login([fav(RU), fav("ru-2")])
    rt = w.d.engine.tus[TU]
    exempt = w.d.run(lambda s: rt.propose(s, Candidate(TaskType.FOLLOW_UP_MAIL, RU, "any",
                                                         online_required=False)))
    assert exempt.online_required is False and exempt.meta == {"online_required": False}
    plain = w.d.run(lambda s: rt.propose(s, Candidate(TaskType.FOLLOW_UP_MAIL, RU, "other")))
    assert isinstance(plain, Refused) and plain.reason == "open"
    strict = w.d.run(lambda s: rt.propose(s, Candidate(TaskType.OPEN_LIMITS, "ru-2", "any",
                                                         online_required=True)))
    assert isinstance(strict, Refused) and strict.reason == "offline"
    default = w.d.run(lambda s: rt.propose(s, Candidate(TaskType.FOLLOW_UP_MAIL, "ru-2", "any")))
    assert isinstance(default, Refused) and default.reason == "offline"
    w.at(60)  # passes report RU offline: the exempt prompt stays until its deadline
    assert w.open_task("follow_up_mail", RU) is not None
    w.at(900)
    assert [(c.type, c.reason) for c in w.d.closed()] == [("follow_up_mail", "expired")]


def test_a_deadline_never_lists_every_open_task_and_the_overdue_count_stays_exact(monkeypatch):
    """issue 11 item 5: a deadline timer counted the TU's overdue tasks by listing and sorting
    every open task (``open_of_tu``) — O(open tasks) per deadline, so 12 000 open tasks made the
    engine bench take minutes.  The factory keeps the open overdue tasks per TU instead; the
    operator alert (≥ 5 overdue at once) still fires at the fifth, and closes count down."""
    from sidecar.runtime.factory import OVERDUE_ALERT_COUNT, TaskFactory

    w = World()
    w.login([fav(f"ru-{i}") for i in range(8)])
    w.at(10)
    for i in range(8):
        w.ru_writes(f"ru-{i}")
    factory = w.d.engine.factory
    monkeypatch.setattr(TaskFactory, "open_of_tu", lambda self, tu: pytest.fail("listed every open task"))
    w.at_abs(T0 + 10 + SPECS[TaskType.UNANSWERED_MESSAGE].ttl_s)  # all eight become overdue
    monkeypatch.undo()
    overdue = [t for t in factory.open_of_tu(TU) if t.overdue]
    assert len(overdue) == 8 == factory.overdue_count(TU) >= OVERDUE_ALERT_COUNT
    operator = [e for e in w.d.router.state.dedup if e[1].startswith("operator-overdue:")]
    assert operator, "five overdue tasks at once alert the operator"
    w.tu_writes("ru-0")  # answered: one overdue task fewer
    assert factory.overdue_count(TU) == 7
