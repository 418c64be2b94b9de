"""Golden's backed-up messages (issue 22 item 1; DESIGN §12.7, §6): seed 003, Unanswered message,
Golden column «При перегляді активних фаворитів онлайн — генерація Follow-up підстрахує».

Where the follow-up logic reads a favorite's ``chatHistory`` anyway, a last RU message no
Unanswered message covers raises one (source ``follow_up_pass``, deadline from the discovery);
a dismissal sticks, a logout's open task comes back, a 🌹 raises nothing, and no read is added."""
from __future__ import annotations

from sidecar.store import ops
from tests.sidecar.world import T0, World, fav

TU, RU = "tu-1", "ru-1"


def _writes_unseen(w: World, ru: str, at: float, kind: str = "message") -> None:
    """The RU wrote at ``T0 + at`` and no socket carried it (logged out, a gap, a restart)."""
    w.chat.setdefault(ru, []).append({"id": f"m-{at}", "from": "ru", "at": T0 + at, "kind": kind})


def _backups(w: World) -> list:
    return [t for t in w.d.created("unanswered_message") if t.source == "follow_up_pass"]


def _reads(w: World) -> int:
    return sum(1 for _, m, _ in w.d.requests if m == "chat_history")


def _row(task_id: str, created: float, closed: float | None, reason: str | None) -> dict:
    return {"task_id": task_id, "type": "unanswered_message", "ru": RU, "source": "socket",
            "created_at": T0 + created, "closed_at": None if closed is None else T0 + closed,
            "reason": reason}


def test_the_measured_case_a_message_sent_while_logged_out_becomes_a_task():
    """RU writes at +20 s, the TU logs in at +100 s, the RU is online from +105 s."""
    w = World()
    _writes_unseen(w, RU, 20)
    w.at(100).login([fav(RU)])
    w.online.add(RU)
    w.at(130)
    [task] = _backups(w)
    assert T0 + 105 <= task.created_at <= T0 + 120  # the first RU Online pass that lists the RU
    assert task.deadline == task.created_at + 120  # from the discovery (DESIGN §6, §12.7)
    assert _reads(w) == 1  # the read the follow-up check made anyway
    found, made = [op for op in w.d.ops if isinstance(op, ops.PutDecision) and op.source == "follow_up_pass"]
    assert (found.task_type, found.outcome, found.detail) == ("unanswered_message", "found",
                                                              {"message_at": T0 + 20})
    assert (made.outcome, made.task_id) == ("created", task.task_id)
    w.at(4000)
    assert len(_backups(w)) == 1 and _reads(w) == 1  # known contact: no further read, no repeat


def _fresh(history: list[dict], *, kind: str = "message", at: float = 20) -> World:
    """A fresh machine (no contact known: the history is read) with Stack's task ``history``."""
    w = World()
    _writes_unseen(w, RU, at, kind)
    w.online.add(RU)
    w.at(100).login([fav(RU)], history=history)
    w.at(130)
    return w


def test_a_dismissal_sticks_and_a_task_open_when_the_message_came_covers_it():
    assert _backups(_fresh([_row("u-1", 20, 50, "dismissed")])) == []  # created at the message
    # a second message while the first one's task was open is that task's (one task per burst)
    assert _backups(_fresh([_row("u-1", 10, 50, "dismissed")], at=20)) == []
    assert _backups(_fresh([_row("u-1", 10, None, None)], at=20)) == []


def test_a_task_a_logout_closed_does_not_cover_and_an_older_one_does_not_either():
    [t] = _backups(_fresh([_row("u-1", 20, 60, "logout")]))
    assert t.source == "follow_up_pass"
    [t] = _backups(_fresh([_row("u-1", 5, 10, "answered")], at=20))  # before the message: not it
    assert t.source == "follow_up_pass"


def test_a_rose_as_the_last_item_raises_nothing_here():
    w = _fresh([], kind="like")
    assert _backups(w) == [] and w.d.created("like") == []
    # and a TU message last means the RU was answered
    w = World()
    _writes_unseen(w, RU, 10)
    w.chat[RU].append({"id": "t-1", "from": "tu", "at": T0 + 20, "kind": "message"})
    w.online.add(RU)
    w.at(100).login([fav(RU)])
    w.at(130)
    assert _backups(w) == []


def test_a_restored_chain_shares_the_read_and_the_new_unanswered_wipes_it():
    """A due chain step on a fresh machine reads the history for its boundary; that same read
    finds the RU's uncovered message: the Unanswered message is raised and removes the chain
    (seed 003 scenario 1), and no second read is made."""
    history = [_row("u-1", -200, -150, "answered")]
    w = World()
    w.chat[RU] = [{"id": "a", "from": "ru", "at": T0 - 200, "kind": "message"},
                  {"id": "b", "from": "tu", "at": T0 - 150, "kind": "message"}]
    _writes_unseen(w, RU, -60)
    w.online.add(RU)
    w.login([fav(RU)], history=history)
    w.at(30)
    [t] = _backups(w)
    assert _reads(w) == 1
    assert w.d.created("follow_up_message") == []
    assert [op.outcome for op in w.d.ops if isinstance(op, ops.PutDecision)
            and op.task_type == "follow_up_message"][-1] == "removed:new_unanswered"
    assert t.ru == RU
