"""World answers to every platform.request method, at virtual time."""
from __future__ import annotations

import json

import msgspec
import pytest
from stubhelp import HEADER

from electron_stub import answers
from electron_stub import scenario as sc
from electron_stub.world import World
from platform_clients import ChathouseClient, GoldenClient, PrimeClient
from platform_clients.base import RawDialogPage

T0 = sc.parse_lines([HEADER], "x").start


def build(*lines):
    s = sc.parse_lines([HEADER] + [json.dumps(x) for x in lines], "x.jsonl")
    w = World.from_scenario(s)
    for ln in s.timeline:
        w.apply(ln, s.abs(ln.t))
    return w


def fav(project, tu, ru, **kw):
    base = {"kind": "favorite", "project": project, "tu": tu, "ru": ru, "active": True, "is_white": False,
            "chat_limit": None if project == "golden" else 2, "mail_limit": None if project == "golden" else 1}
    return {**base, **kw}


def msg(t, project, tu, ru, frm, id_, **kw):
    return {"t": t, "kind": "message", "project": project, "tu": tu, "ru": ru, "from": frm, "id": id_, "body": "b", **kw}


def ask(w, project, tu, method, params=None, now=T0 + 100):
    out = answers.answer(w, project, tu, method, params or {}, now)
    json.dumps(out)
    return out


def test_golden_online_history_mail():
    w = build(fav("golden", "g", "r1"), fav("golden", "g", "r2"),
              {"kind": "mail_log", "project": "golden", "tu": "g", "ru": "r1", "from": "tu", "at": -50, "id": "ml0"},
              {"t": 1, "kind": "online", "project": "golden", "ru": "r1", "online": True},
              {"t": 1, "kind": "online", "project": "golden", "ru": "x", "online": True},
              msg(2, "golden", "g", "r1", "ru", "m1"), {"t": 3, "kind": "like", "project": "golden", "tu": "g", "ru": "r1", "like": "rose"},
              {"t": 4, "kind": "mail", "project": "golden", "tu": "g", "ru": "r1", "from": "ru", "id": "ml1"})
    on = ask(w, "golden", "g", "online_ru")
    assert on == {"online": ["r1"]}
    assert GoldenClient.decode_online(on)[0] == {"r1"}
    h = ask(w, "golden", "g", "chat_history", {"ru_ids": ["r1", "r2"]})
    assert h["dialogs"][0]["ru"] == "r1" and [m["kind"] for m in h["dialogs"][0]["messages"]] == ["message", "like"]
    assert h["dialogs"][0]["messages"][0] == {"id": "m1", "from": "ru", "at": T0 + 2, "kind": "message"}
    assert h["dialogs"][1] == {"ru": "r2", "messages": []}
    assert ask(w, "golden", "g", "get_mail", {"ru": "r1"}) == {"mails": [
        {"id": "ml0", "from": "tu", "at": T0 - 50}, {"id": "ml1", "from": "ru", "at": T0 + 4}]}


def rows(page):
    p = msgspec.convert(page, RawDialogPage)
    return {r.userId: r for r in p.dialogs}


def test_chathouse_scrolls():
    w = build(fav("chathouse", "c", "a"), fav("chathouse", "c", "b"), fav("chathouse", "c", "i"),
              fav("chathouse", "c", "m"), fav("chathouse", "c", "q"),
              {"t": 1, "kind": "online", "project": "chathouse", "ru": "a", "online": True},
              {"t": 1, "kind": "online", "project": "chathouse", "ru": "q", "online": True},
              {"t": 1, "kind": "block", "project": "chathouse", "tu": "c", "ru": "q", "by": "ru"},
              msg(2, "chathouse", "c", "a", "ru", "m1"),                       # unanswered chat
              msg(2, "chathouse", "c", "b", "ru", "m2"), msg(3, "chathouse", "c", "b", "tu", "m3"),  # answered
              {"t": 4, "kind": "icebreaker", "project": "chathouse", "tu": "c", "ru": "i"},
              {"t": 5, "kind": "mail", "project": "chathouse", "tu": "c", "ru": "m", "from": "ru", "id": "ml"},
              {"t": 6, "kind": "like", "project": "chathouse", "tu": "c", "ru": "b", "like": "like"})
    online = rows(ask(w, "chathouse", "c", "scroll_all_online"))
    assert set(online) == {"a", "q"} and online["q"].blockedByUser and online["a"].chatLimit == 2
    ids, snaps = ChathouseClient.decode_online(ask(w, "chathouse", "c", "scroll_all_online"))
    assert ids == {"a", "q"}
    new = rows(ask(w, "chathouse", "c", "scroll_new"))
    assert set(new) == {"a", "b", "i", "m"}
    assert new["a"].lastMessage == {"from": "ru", "at": T0 + 2, "type": "message", "body": "b"}
    # a Chathouse like is a message recognised by its body (seed 003), as the client reads it
    assert new["b"].lastMessage["type"] == "message" and new["b"].lastTuMessageAt == T0 + 3
    assert {s.ru: s.last_kind for s in ChathouseClient.decode_dialogs(ask(w, "chathouse", "c", "scroll_new"))[0]}["b"] == "like"
    assert new["i"].lastMessage["type"] == "icebreaker"
    assert new["m"].unansweredMailAt == T0 + 5 and new["m"].dialogId is None and new["a"].dialogId
    assert ask(w, "chathouse", "c", "inmails_chain", {"ru": "m"})["mails"][0]["id"] == "ml"


def test_chathouse_tab_new_shows_an_empty_dialog_and_a_mutual_like_until_the_tu_writes():
    """README revision 2 ``empty_dialog`` / ``mutual_like`` (seed 003 Open Limits, Chathouse: «вкладка
    new — ще не створений діалог (id=null, без повідомлень) або взаємний лайк»)."""
    w = build({"t": 1, "kind": "empty_dialog", "project": "chathouse", "tu": "c", "ru": "e"},
              {"t": 1, "kind": "mutual_like", "project": "chathouse", "tu": "c", "ru": "m"},
              {"t": 2, "kind": "limits", "project": "chathouse", "tu": "c", "ru": "e", "chat": 3})
    new = rows(ask(w, "chathouse", "c", "scroll_new"))
    assert set(new) == {"e", "m"}
    assert (new["e"].dialogId, new["e"].lastMessage, new["e"].mutualLike, new["e"].chatLimit) == (None, None, False, 3)
    assert new["m"].dialogId and new["m"].mutualLike and new["m"].lastMessage is None  # a match opens the dialog
    snaps = {s.ru: s for s in ChathouseClient.decode_dialogs(ask(w, "chathouse", "c", "scroll_new"))[0]}
    assert (snaps["e"].dialog_id, snaps["e"].last_from, snaps["m"].mutual_like) == (None, None, True)
    for ru in ("e", "m"):  # the TU writes first (what Open Limits asks for): both leave tab new
        w.apply(sc.parse_lines([HEADER, json.dumps(msg(5, "chathouse", "c", ru, "tu", f"w-{ru}"))], "x").timeline[0],
                T0 + 5)
    assert rows(ask(w, "chathouse", "c", "scroll_new")) == {}
    assert not rows(ask(w, "chathouse", "c", "scroll_all_online"))  # neither is an online favorite


def test_prime_criteria():
    w = build(fav("prime", "p", "u"), fav("prime", "p", "l"), fav("prime", "p", "s", chat_limit=4, mail_limit=0),
              {"t": 1, "kind": "online", "project": "prime", "ru": "u", "online": True},
              msg(2, "prime", "p", "u", "ru", "m1"),
              msg(2, "prime", "p", "l", "tu", "m2"), {"t": 3, "kind": "like", "project": "prime", "tu": "p", "ru": "l", "like": "wink"},
              {"t": 4, "kind": "system", "project": "prime", "tu": "p", "ru": "s", "text": "limits opened"})
    assert set(rows(ask(w, "prime", "p", "dialogs", {"criteria": ["active", "online"]}))) == {"u"}
    assert set(rows(ask(w, "prime", "p", "dialogs", {"criteria": ["unanswered"]}))) == {"u"}
    every = rows(ask(w, "prime", "p", "dialogs", {"criteria": []}))
    assert set(every) == {"u", "l", "s"} and every["l"].lastMessage["type"] == "wink"  # the like kind
    active = ask(w, "prime", "p", "dialogs", {"criteria": ["active"], "cursor": 0})
    assert active["next_cursor"] is None
    act = rows(active)
    assert act["l"].lastMessage["type"] == "message"  # likes are invisible outside []
    assert act["s"].lastMessage == {"from": "system", "at": T0 + 4, "type": "system", "body": "limits opened"}
    assert [r["userId"] for r in active["dialogs"]] == ["s", "u", "l"] or [r["userId"] for r in active["dialogs"]][0] == "s"
    snaps, cur = PrimeClient.decode_dialogs(active)
    assert cur is None and snaps[0].last_kind == "system"
    assert ask(w, "prime", "p", "chat_restriction", {"ru": "s"}) == {"chatLimit": 4, "mailLimit": 0}
    assert PrimeClient.decode_restriction(ask(w, "prime", "p", "chat_restriction", {"ru": "nobody"})).chatLimit == 0


def test_prime_active_pages_and_depth():
    lines = [fav("prime", "p", f"r{i:02d}") for i in range(40)]
    lines.append({"kind": "chat_log", "project": "prime", "tu": "p", "ru": "old", "from": "ru", "at": -8 * 86400, "id": "o"})
    lines += [msg(1 + i, "prime", "p", f"r{i:02d}", "ru", f"m{i}") for i in range(40)]
    w = build(*lines)
    seen, cursor, pages = [], 0, 0
    while cursor is not None:
        page = ask(w, "prime", "p", "dialogs", {"criteria": ["active"], "cursor": cursor})
        assert len(page["dialogs"]) <= answers.PAGE
        seen += [r["userId"] for r in page["dialogs"]]
        cursor, pages = page["next_cursor"], pages + 1
    assert pages == 3 and seen == [f"r{i:02d}" for i in reversed(range(40))]  # newest first, 'old' is past 7 days
    # the page size the sidecar names is the one served (issue 22 item 3)
    small = ask(w, "prime", "p", "dialogs", {"criteria": ["active"], "cursor": 1, "limit": 7})
    assert [r["userId"] for r in small["dialogs"]] == [f"r{i:02d}" for i in reversed(range(26, 33))]
    assert small["next_cursor"] == 2


def test_prime_mail_methods():
    w = build(fav("prime", "p", "a"), fav("prime", "p", "b"),
              {"t": 1, "kind": "mail", "project": "prime", "tu": "p", "ru": "a", "from": "ru", "id": "x1"},
              {"t": 2, "kind": "mail", "project": "prime", "tu": "p", "ru": "b", "from": "ru", "id": "x2"},
              {"t": 3, "kind": "mail", "project": "prime", "tu": "p", "ru": "b", "from": "tu", "id": "x3"})
    inbox = ask(w, "prime", "p", "inbox_unanswered")
    assert inbox == {"mails": [{"ru": "a", "id": "x1", "at": T0 + 1}]}
    assert PrimeClient.decode_unanswered_mail(inbox)[0].ru == "a"
    for m in ("correspondence_get", "emails_history"):
        assert [x["id"] for x in ask(w, "prime", "p", m, {"ru": "b"})["mails"]] == ["x2", "x3"]


@pytest.mark.parametrize("project, method, params, code", [
    ("golden", "scroll_new", {}, -32601), ("chathouse", "dialogs", {}, -32601), ("prime", "get_mail", {}, -32601),
    ("mars", "online_ru", {}, -32601), ("golden", "get_mail", {}, -32602), ("prime", "dialogs", {"criteria": ["x"]}, -32602),
    ("prime", "dialogs", {"criteria": ["active"], "cursor": -1}, -32602),
    ("prime", "dialogs", {"criteria": ["active"], "limit": 0}, -32602)])
def test_errors_are_json_rpc_errors(project, method, params, code):
    w = build()
    with pytest.raises(Exception) as ei:
        answers.answer(w, project, "t", method, params, T0)
    assert ei.value.code == code
