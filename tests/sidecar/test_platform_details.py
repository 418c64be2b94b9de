"""Per-platform details of seed 003 "План реалізації" that the conformance audit found (issue 6,
item 6), each on the virtual clock: which pass runs when, how a like is recognised in a column,
the one Prime Open Limits condition, blocks, the untouched Chathouse empty dialog, VIP labels."""
from __future__ import annotations

from tests.sidecar.world import T0, World, fav

TU, RU, STRANGER = "tu-1", "ru-1", "ru-9"


class ColumnWorld(World):
    """A world whose column answers are set by the test: ``columns[(method, criteria)]``."""

    def __init__(self, project: str) -> None:
        self.columns: dict[tuple, list[dict]] = {}
        self.mails: list[dict] = []
        super().__init__(project=project)

    def answer(self, tu, method, params):
        key = (method, tuple(params.get("criteria") or ()))
        if key in self.columns:
            return {"dialogs": self.columns[key], "next_cursor": None}
        if method == "inbox_unanswered":
            return {"mails": self.mails}
        return super().answer(tu, method, params)


def row(ru: str, **kw) -> dict:
    base = {"userId": ru, "dialogId": "d-" + ru, "isOnline": False, "lastMessage": None,
            "chatLimit": 3, "mailLimit": 1}
    base.update(kw)
    return base


def created(w: World, type_: str) -> list:
    return w.d.created(type_)


def requests(w: World, method: str) -> int:
    return sum(1 for _, m, _ in w.d.requests if m == method)


# seed 003 "Unanswered mail": "сокет є → перевірка тільки при логіні"
def test_prime_check_mail_runs_at_login_only_not_on_socket_reconnect():
    w = ColumnWorld("prime")
    w.login([fav(RU, "prime")])
    assert requests(w, "inbox_unanswered") == 1
    unanswered = sum(1 for _, m, p in w.d.requests if m == "dialogs" and p.get("criteria") == ["unanswered"])
    w.at(100).d.run(lambda s: w.d.engine.reconnected(s, TU))
    assert requests(w, "inbox_unanswered") == 1  # not again
    assert sum(1 for _, m, p in w.d.requests
               if m == "dialogs" and p.get("criteria") == ["unanswered"]) == unanswered + 1  # check chat is


# seed 003 "Like": Chathouse — "лайк по тілу повідомлення", in the column as on the socket
def test_chathouse_like_in_the_unanswered_column_is_recognised_by_body():
    w = ColumnWorld("chathouse")
    w.columns[("scroll_new", ())] = [row(RU, lastMessage={"from": "ru", "at": T0 - 30, "type": "message",
                                                          "body": "[like]"})]
    w.login([fav(RU, "chathouse")])
    assert [t.source for t in created(w, "like")] == ["check_chat"]
    assert created(w, "unanswered_message") == []


def test_prime_like_kinds_in_the_all_dialogs_list_are_likes():
    w = ColumnWorld("prime")
    w.columns[("dialogs", ())] = [row(RU, lastMessage={"from": "ru", "at": T0 - 30, "type": "wink", "body": ""})]
    w.login([fav(RU, "prime")])
    assert len(created(w, "like")) == 1


# seed 003 "Open Limits": "Сокет і скрол ведуть в одну умову: останнє повідомлення system + є ліміти
# + не заблокований, з VIP-дедупом"
def test_prime_dialog_created_needs_a_system_last_message_in_the_dialog_row():
    w = ColumnWorld("prime")
    w.login([])
    w.columns[("dialogs", ("active",))] = [row(STRANGER, lastMessage={"from": "ru", "at": T0 + 9, "type": "message"})]
    w.at(10).d.event(TU, "prime", "dialog_created", {"dialogId": "d", "ruId": STRANGER, "at": T0 + 10})
    assert created(w, "open_limits") == []
    w.columns[("dialogs", ("active",))] = [row(STRANGER, lastMessage={"from": "system", "at": T0 + 20, "type": "system"})]
    w.at(20).d.event(TU, "prime", "dialog_created", {"dialogId": "d", "ruId": STRANGER, "at": T0 + 20})
    [task] = created(w, "open_limits")
    assert task.source == "dialog_created"


def test_prime_dialog_created_reads_blocks_from_the_dialog_row():
    w = ColumnWorld("prime")
    w.login([])
    w.columns[("dialogs", ("active",))] = [row(STRANGER, blockedByUser=True,
                                               lastMessage={"from": "system", "at": T0 + 9, "type": "system"})]
    w.at(10).d.event(TU, "prime", "dialog_created", {"dialogId": "d", "ruId": STRANGER, "at": T0 + 10})
    assert created(w, "open_limits") == []


def test_prime_active_scroll_reads_blocks_from_the_row_and_dedups_with_the_socket():
    w = ColumnWorld("prime")
    sys_row = {"from": "system", "at": T0 + 5, "type": "system"}
    w.columns[("dialogs", ("active",))] = [row(STRANGER, blockedByMe=True, lastMessage=sys_row),
                                           row(RU, lastMessage=sys_row)]
    w.at(5).login([])
    assert [t.ru for t in created(w, "open_limits")] == [RU]
    w.at(5 + 400)  # the task expired; the next scroll ticks list the same system message again
    assert len(created(w, "open_limits")) == 1  # VIP dedup: one task per system message


def test_a_blocked_ru_gets_no_open_limits_favorite_or_not():
    for favorites in ([], [fav(STRANGER, "chathouse")]):
        w = ColumnWorld("chathouse")
        w.login(favorites)
        w.at(5).d.event(TU, "chathouse", "block", {"from": STRANGER, "to": TU, "blocked": True, "at": T0 + 5})
        w.at(10).d.event(TU, "chathouse", "Send", {"id": "i", "type": "icebreaker", "from": TU, "to": STRANGER,
                                                   "at": T0 + 10})
        assert created(w, "open_limits") == [], favorites
    w = ColumnWorld("chathouse")  # a non-favorite whose block only a dialog row showed
    w.columns[("scroll_all_online", ())] = [row(STRANGER, isOnline=True, blockedByMe=True)]
    w.login([])
    w.at(10).d.event(TU, "chathouse", "Send", {"id": "i", "type": "icebreaker", "from": STRANGER, "to": TU,
                                               "at": T0 + 10})
    assert created(w, "open_limits") == []
    w = ColumnWorld("chathouse")  # nor Open Limits (captcha), the block known from a dialog row
    w.columns[("scroll_all_online", ())] = [row(STRANGER, isOnline=True, blockedByUser=True)]
    w.login([])
    w.at(10).d.event(TU, "chathouse", "chat_request", {"from": STRANGER, "at": T0 + 10})
    assert created(w, "open_limits_captcha") == []
    assert STRANGER not in w.d.engine.tus[TU].favorites  # a row never makes a favorite
    w = ColumnWorld("chathouse")  # and from a tab-new row that says so
    w.columns[("scroll_new", ())] = [row(STRANGER, dialogId=None, blockedByMe=True)]
    w.login([])
    assert created(w, "open_limits") == []


def test_an_untouched_chathouse_empty_dialog_raises_open_limits_once():
    w = ColumnWorld("chathouse")
    w.columns[("scroll_new", ())] = [row(STRANGER, dialogId=None)]
    w.login([])
    assert len(created(w, "open_limits")) == 1
    w.at(4 * 3600)  # eight check chats later, still untouched
    assert len(created(w, "open_limits")) == 1


def test_a_standing_chathouse_mutual_like_raises_open_limits_once():
    """Seed 003 Open Limits «… або взаємний лайк»: a mutual like nobody has written after has no
    message instant either, so like the empty dialog one Open Limits covers it — it was raised
    again by every check chat (each 30 min, each socket reconnect) while it stood."""
    w = ColumnWorld("chathouse")
    w.columns[("scroll_new", ())] = [row(STRANGER, mutualLike=True)]
    w.login([])
    [task] = created(w, "open_limits")
    assert task.meta == {"reason": "mutual_like"}
    w.at(4 * 3600)
    assert len(created(w, "open_limits")) == 1
    w.columns[("scroll_new", ())] = [row(STRANGER, mutualLike=True, lastMessage={  # the RU writes
        "from": "ru", "at": T0 + 4 * 3600 + 5, "type": "message", "body": "hi"})]
    w.at(5 * 3600)  # a dated state after the task: Unanswered supersedes, Open Limits is weaker
    assert len(created(w, "unanswered_message")) == 1


# seed 003: "Приставка VIP — по всіх клієнтах"
def test_vip_tier_labels_tasks_of_non_favorites_from_the_dialog_snapshot():
    w = ColumnWorld("chathouse")
    w.columns[("scroll_new", ())] = [row(STRANGER, spend30dUsd=650.0,
                                         lastMessage={"from": "ru", "at": T0 - 30, "type": "message", "body": "hi"})]
    w.login([])
    [task] = created(w, "unanswered_message")
    assert task.vip == "yellow"


# seed 003 "Open Limits": «1 сторінка (15 діалогів) за тік ~120 с» — the request names the page
# size instead of leaving it to the platform (issue 22 item 3)
def test_prime_active_scroll_asks_for_one_page_of_15_each_tick():
    w = ColumnWorld("prime")
    w.login([])
    w.at(600)
    asks = [p for _, m, p in w.d.requests if m == "dialogs" and p.get("criteria") == ["active"]]
    assert len(asks) >= 5  # the login's and one per ~120 s tick
    assert all(p.get("limit") == 15 and p.get("cursor") == 0 for p in asks), asks
