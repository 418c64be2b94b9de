"""Contract: every frame the world encodes decodes through platform_clients into the expected
domain events (the raw shapes are the platform_clients Structs, not copies)."""
from __future__ import annotations

import json

import pytest
from stubhelp import HEADER

from electron_stub import encode
from electron_stub import scenario as sc
from electron_stub.world import World
from platform_clients import client_for
from sidecar.domain import events as ev

NOW = 1_796_025_700.0
TU = {"golden": "g-tu", "chathouse": "c-tu", "prime": "p-tu"}


def line(**kw):
    s = sc.parse_lines([HEADER, json.dumps({"t": 1, **kw})], "x.jsonl")
    return s.timeline[0]


def decode(frame):
    method, p = frame
    assert method == "platform.event"
    assert set(p) == {"project", "tu", "name", "data", "received_at"} and p["received_at"] == NOW
    json.dumps(p)  # plain JSON
    return client_for(p["project"]).decode_event(p["tu"], p["name"], p["data"])


def one(project, kind, **kw):
    frames = encode.frames_for(line(kind=kind, project=project, tu=TU[project], ru="r1", **kw), NOW,
                               World(NOW - 1))
    assert len(frames) == 1
    return frames[0]


@pytest.mark.parametrize("project, name", [("golden", "receivePrivateMessage"), ("chathouse", "Send"),
                                           ("prime", "MessageSent")])
def test_ru_message_is_chat_in(project, name):
    f = one(project, "message", **{"from": "ru", "id": "m1", "body": "hi"})
    assert f[1]["name"] == name
    (e,) = decode(f)
    assert isinstance(e, ev.ChatIn) and (e.tu, e.ru, e.at, e.msg_id, e.body) == (TU[project], "r1", NOW, "m1", "hi")


@pytest.mark.parametrize("project, name", [("golden", "privateMessageSent"), ("chathouse", "Send"),
                                           ("prime", "MessageSent")])
def test_tu_message_is_own_send_echo(project, name):
    f = one(project, "message", **{"from": "tu", "id": "m2", "body": "yo"})
    assert f[1]["name"] == name
    (e,) = decode(f)
    assert isinstance(e, ev.ChatOut) and (e.ru, e.msg_id) == ("r1", "m2")
    (e2,) = decode(encode.own_send(project, TU[project], "r1", "chat", "m3", NOW))
    assert isinstance(e2, ev.ChatOut) and e2.msg_id == "m3"


@pytest.mark.parametrize("project, like, name", [
    ("golden", "rose", "receivePrivateMessage"), ("chathouse", "like", "Send"), ("prime", "likephoto", "MessageSent"),
    ("prime", "wink", "MessageSent"), ("prime", "like_newsfeed_post", "MessageSent")])
def test_likes(project, like, name):
    f = one(project, "like", like=like)
    assert f[1]["name"] == name
    (e,) = decode(f)
    assert isinstance(e, ev.LikeIn) and e.kind == like and e.ru == "r1"
    if project == "golden":
        assert f[1]["data"]["text"] == "🌹"
    if project == "chathouse":
        assert f[1]["data"]["body"] == "[like]" and f[1]["data"]["type"] == "message"


@pytest.mark.parametrize("project, name, typ", [("golden", "statistics", "EmailSend"),
                                                ("chathouse", "Send", "inmail_message"), ("prime", "email", None)])
def test_ru_mail_is_mail_in(project, name, typ):
    f = one(project, "mail", **{"from": "ru", "id": "ml1"})
    assert f[1]["name"] == name and (typ is None or f[1]["data"]["type"] == typ)
    (e,) = decode(f)
    assert isinstance(e, ev.MailIn) and e.mail_id == "ml1" and e.ru == "r1"


@pytest.mark.parametrize("project, name", [("golden", "mailSent"), ("chathouse", "Send"), ("prime", "email")])
def test_tu_mail_is_mail_out(project, name):
    f = one(project, "mail", **{"from": "tu", "id": "ml2"})
    assert f[1]["name"] == name
    (e,) = decode(f)
    assert isinstance(e, ev.MailOut) and e.mail_id == "ml2"
    (e2,) = decode(encode.own_send(project, TU[project], "r1", "mail", "ml3", NOW))
    assert isinstance(e2, ev.MailOut) and e2.mail_id == "ml3"


@pytest.mark.parametrize("project, name, typ", [("golden", "statistics", "EmailRead"),
                                                ("chathouse", "statistic", "inmail_read")])
def test_mail_read(project, name, typ):
    f = one(project, "mail_read", mail_id="ml0", event_key="rd1")
    assert f[1]["name"] == name and f[1]["data"]["type"] == typ
    (e,) = decode(f)
    assert isinstance(e, ev.MailRead) and (e.mail_id, e.event_key) == ("ml0", "rd1")


def test_prime_mail_read_has_no_event():
    assert encode.frames_for(line(kind="mail_read", project="prime", tu="p", ru="r", event_key="k"), NOW) == []


@pytest.mark.parametrize("project", ["golden", "chathouse", "prime"])
def test_email_received_at_is_absolute(project):
    w = World(NOW - 100)
    f = encode.frames_for(line(kind="email", project=project, tu=TU[project], ru="r1", id="e1", received_at=5),
                          NOW, w)[0]
    assert f[1]["name"] == "incomingEmail"
    (e,) = decode(f)
    assert isinstance(e, ev.EmailIn) and e.received_at == NOW - 95 and e.email_id == "e1"


def test_chathouse_notification_and_icebreaker():
    (e,) = decode(one("chathouse", "notification", type="RECENT_PURCHASE"))
    assert isinstance(e, ev.Notification) and e.kind == "RECENT_PURCHASE"
    f = one("chathouse", "icebreaker")
    assert f[1]["data"]["type"] == "icebreaker"
    (e,) = decode(f)
    assert isinstance(e, ev.OpenLimitsSignal) and e.reason == "icebreaker"


def test_prime_system_and_dialog_created():
    f = one("prime", "system", text="limits opened")
    assert f[1]["data"]["type"] == "system"
    (e,) = decode(f)
    assert isinstance(e, ev.OpenLimitsSignal) and e.reason == "system" and e.needs_live_limits
    (e,) = decode(one("prime", "dialog_created"))
    assert isinstance(e, ev.OpenLimitsSignal) and e.reason == "dialog_created"


@pytest.mark.parametrize("project, name", [("golden", "chatRequest"), ("chathouse", "chat_request"),
                                           ("prime", "chatRequest")])
def test_chat_request(project, name):
    f = one(project, "chat_request")
    assert f[1]["name"] == name
    (e,) = decode(f)
    assert isinstance(e, ev.ChatRequestIn) and e.ru == "r1"


@pytest.mark.parametrize("project, name", [("golden", "userBlocked"), ("chathouse", "block"), ("prime", "blockStatus")])
@pytest.mark.parametrize("kind", ["block", "unblock"])
def test_block_by_ru_is_the_platform_event(project, name, kind):
    f = one(project, kind, by="ru")
    assert f[1]["name"] == name
    (e,) = decode(f)
    assert isinstance(e, ev.BlockChanged) and e.by == "ru" and e.blocked == (kind == "block") and e.ru == "r1"


def test_block_by_tu_favorite_and_limits_are_favorite_updates():
    import msgspec

    from sidecar.protocol.inbound import FavoriteUpdate

    for kind, kw, want in [("block", {"by": "tu"}, {"blocked_by_tu": True}),
                           ("unblock", {"by": "tu"}, {"blocked_by_tu": False}),
                           ("favorite", {"active": False, "is_white": True}, {"active": False, "is_white": True}),
                           ("limits", {"chat": 0, "mail": 2}, {"chat_limit": 0, "mail_limit": 2})]:
        method, p = one("prime", kind, **kw)
        assert method == "favorite.update"
        fu = msgspec.convert(p, FavoriteUpdate)
        assert fu.tu == "p-tu" and fu.ru == "r1" and fu.project == "prime"
        assert {k: getattr(fu, k) for k in want} == want


def test_lines_without_frames():
    w = World(NOW)
    for kw in [dict(kind="online", project="golden", ru="r", online=True), dict(kind="crash"),
               dict(kind="icebreaker", project="golden", tu="g", ru="r"),
               dict(kind="limits", project="golden", tu="g", ru="r", chat=1, mail=1)]:
        assert encode.frames_for(line(**kw), NOW, w) == []
