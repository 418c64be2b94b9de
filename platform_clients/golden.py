"""Golden (seed 003): no limits, no unanswered column, an online-RU API polled every 15 s.

Raw socket events (``platform.event.name`` → ``data``), all times unix seconds:

* ``receivePrivateMessage`` :class:`PrivateMessage` — RU → TU chat; text ``🌹`` is a Like (rose).
* ``privateMessageSent`` :class:`PrivateMessage` — the TU's own chat send (echo).
* ``statistics`` :class:`Statistic` — ``EmailSend`` / ``EmailSendSatellite`` /
  ``EmailSendBonusCoins`` (RU sent a letter → Unanswered mail), ``EmailRead`` /
  ``OpenAttachFileSatellite`` (RU read the TU's letter → Follow-up mail source 2).
* ``mailSent`` :class:`MailSent` — the TU sent a letter.
* ``userBlocked`` :class:`UserBlocked` — a block either way.
* ``chatRequest`` :class:`ChatRequest` — a chat request (Open Limits captcha).
* ``incomingEmail`` :class:`IncomingEmail` — an e-mail (Unanswered e-mail).

Requests (``platform.request.method``):

* ``online_ru {}`` → ``{"online": [ru, ...]}`` — every 15 s (RU Online, seed 003).
* ``chat_history {"ru_ids": [...]}`` → ``{"dialogs": [{"ru", "messages": [{"id","from","at","kind"}]}]}``
  — Follow-up message reads it for online RU ids only (DESIGN §7).
* ``get_mail {"ru"}`` → ``{"mails": [{"id","from","at"}]}`` — mail history (DESIGN §8).

Freeloader: a favorite whose total spend is 0 (seed 003 "бонусні фаворити").
"""
from __future__ import annotations

from typing import Any

import msgspec

from platform_clients.base import RawId, Timestamp, Pass, PlatformClient, convert, list_field
from sidecar.domain import events as ev
from sidecar.domain.favorites import Favorite

ROSE = "🌹"
MAIL_IN_STATS = frozenset({"EmailSend", "EmailSendSatellite", "EmailSendBonusCoins"})
MAIL_READ_STATS = frozenset({"EmailRead", "OpenAttachFileSatellite"})


class PrivateMessage(msgspec.Struct):
    messageId: RawId
    senderId: RawId
    recipientId: RawId
    sentAt: Timestamp
    text: str = ""


class Statistic(msgspec.Struct):
    type: str
    userId: RawId  # the RU
    at: Timestamp
    eventKey: RawId = ""
    mailId: RawId = ""


class MailSent(msgspec.Struct):
    mailId: RawId
    recipientId: RawId
    sentAt: Timestamp


class UserBlocked(msgspec.Struct):
    blockerId: RawId
    blockedId: RawId
    blocked: bool
    at: Timestamp


class ChatRequest(msgspec.Struct):
    senderId: RawId
    at: Timestamp


class IncomingEmail(msgspec.Struct):
    emailId: RawId
    fromId: RawId
    receivedAt: Timestamp
    at: Timestamp


class OnlineRu(msgspec.Struct):
    online: list[str] = []


def _incoming(tu: str, data: Any) -> list[ev.DomainEvent]:
    m = convert(data, PrivateMessage)
    if m.senderId == tu:  # our own message echoed on the incoming channel: not the RU's
        return [ev.ChatOut(tu=tu, ru=m.recipientId, at=m.sentAt, msg_id=m.messageId)]
    if GoldenClient.message_kind("message", m.text) == "like":
        return [ev.LikeIn(tu=tu, ru=m.senderId, at=m.sentAt, kind="rose")]
    return [ev.ChatIn(tu=tu, ru=m.senderId, at=m.sentAt, msg_id=m.messageId, body=m.text)]


def _sent(tu: str, data: Any) -> list[ev.DomainEvent]:
    m = convert(data, PrivateMessage)
    return [ev.ChatOut(tu=tu, ru=m.recipientId, at=m.sentAt, msg_id=m.messageId)]


def _stats(tu: str, data: Any) -> list[ev.DomainEvent]:
    s = convert(data, Statistic)
    if s.type in MAIL_IN_STATS:
        return [ev.MailIn(tu=tu, ru=s.userId, at=s.at, mail_id=s.mailId or s.eventKey, source="stats")]
    if s.type in MAIL_READ_STATS:
        return [ev.MailRead(tu=tu, ru=s.userId, at=s.at, mail_id=s.mailId, event_key=s.eventKey)]
    return []  # other bonus types are not task triggers


def _mail_sent(tu: str, data: Any) -> list[ev.DomainEvent]:
    m = convert(data, MailSent)
    return [ev.MailOut(tu=tu, ru=m.recipientId, at=m.sentAt, mail_id=m.mailId)]


def _blocked(tu: str, data: Any) -> list[ev.DomainEvent]:
    b = convert(data, UserBlocked)
    by, ru = ("tu", b.blockedId) if b.blockerId == tu else ("ru", b.blockerId)
    return [ev.BlockChanged(tu=tu, ru=ru, at=b.at, by=by, blocked=b.blocked)]


def _chat_request(tu: str, data: Any) -> list[ev.DomainEvent]:
    r = convert(data, ChatRequest)
    return [ev.ChatRequestIn(tu=tu, ru=r.senderId, at=r.at)]


def _email(tu: str, data: Any) -> list[ev.DomainEvent]:
    e = convert(data, IncomingEmail)
    return [ev.EmailIn(tu=tu, ru=e.fromId, at=e.at, email_id=e.emailId, received_at=e.receivedAt)]


class GoldenClient(PlatformClient):
    project = "golden"
    has_limits = False
    has_read_stats = True
    like_kinds = frozenset({"rose"})
    passes = (
        Pass("online", "online_ru", {}, 15.0, "online"),
    )

    @classmethod
    def message_kind(cls, type_: str | None, body: str | None) -> str | None:
        """A message whose text is 🌹 is a Like (seed 003 "Golden — текст 🌹")."""
        if (body or "").strip() == ROSE or type_ in ("like", "rose"):
            return "like"
        return type_
    decoders = {
        "receivePrivateMessage": _incoming,
        "privateMessageSent": _sent,
        "statistics": _stats,
        "mailSent": _mail_sent,
        "userBlocked": _blocked,
        "chatRequest": _chat_request,
        "incomingEmail": _email,
    }

    @staticmethod
    def is_freeloader(fav: Favorite) -> bool:
        return (fav.spend_total_usd or 0.0) <= 0.0

    @classmethod
    def decode_online(cls, result: Any):
        """``{"online": [ru, ...]}``; non-string ids are skipped; BadAnswer if unusable."""
        return {ru for ru in list_field(result, "online", cls.project) if isinstance(ru, str) and ru}, []
