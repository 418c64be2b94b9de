"""Chathouse (seed 003): chat and mail limits, tab ``new`` as the unanswered column, the online
column scrolled every 60 s, ``new_notification`` pings.

Raw socket events (all times unix seconds):

* ``Send`` :class:`Send` — a message either way (``from`` = the sender's id).  ``type``:
  ``message`` (a Like when the body is one of :data:`LIKE_BODIES`, seed 003 "лайк по тілу"),
  ``inmail_message`` (a letter → Unanswered mail), ``icebreaker`` (Open Limits).
* ``new_notification`` :class:`NewNotification` — ``ONLINE_NOW`` / ``RECENT_PURCHASE``.
* ``statistic`` :class:`Statistic` — ``inmail_send`` / ``inmail_photo_send`` / ``inmail_video_send``
  (RU's letter bonus → Unanswered mail), ``inmail_read`` / ``inmail_photo_read`` /
  ``inmail_video_read`` (RU read the TU's letter).
* ``block`` :class:`Block`, ``chat_request`` :class:`ChatRequest`, ``incomingEmail`` (as Golden's).

Requests:

* ``scroll_all_online {}`` → :class:`~platform_clients.base.RawDialogPage` — tab all + is_online,
  every 60 s: RU Online, favorites' snapshots, Follow-up "over 60 min".
* ``scroll_new {}`` → ``RawDialogPage`` — tab new ("check chat"): at login, socket reconnect and every
  30 min: Unanswered chat/mail, Like, Open Limits (empty dialog, mutual like, icebreaker).
* ``inmails_chain {"ru"}`` → ``{"mails": [{"id","from","at"}]}`` — mail history.

Freeloader: pays only with bonuses.
"""
from __future__ import annotations

from typing import Any

import msgspec

from platform_clients.base import (RawId, Timestamp, Pass, PlatformClient, convert, convert_ids,
                                   unchecked_twin)
from platform_clients.golden import IncomingEmail, _email
from sidecar.domain import events as ev
from sidecar.domain.favorites import Favorite

LIKE_BODIES = frozenset({"[like]", "❤", "❤️"})
MAIL_IN_STATS = frozenset({"inmail_send", "inmail_photo_send", "inmail_video_send"})
MAIL_READ_STATS = frozenset({"inmail_read", "inmail_photo_read", "inmail_video_read"})

__all__ = ["ChathouseClient", "Send", "NewNotification", "Statistic", "Block", "ChatRequest",
           "IncomingEmail", "LIKE_BODIES"]


class Send(msgspec.Struct, rename={"from_": "from"}):
    id: RawId
    type: str
    from_: RawId
    to: RawId
    at: Timestamp
    body: str = ""


_SendUnchecked, _SEND_IDS = unchecked_twin(Send)  # for convert_ids: ids checked in one search


class NewNotification(msgspec.Struct):
    type: str
    userId: RawId
    at: Timestamp


class Statistic(msgspec.Struct, rename={"from_": "from"}):
    type: str
    from_: RawId
    to: RawId
    at: Timestamp
    eventKey: RawId = ""
    mailId: RawId = ""


class Block(msgspec.Struct, rename={"from_": "from"}):
    from_: RawId
    to: RawId
    blocked: bool
    at: Timestamp


class ChatRequest(msgspec.Struct, rename={"from_": "from"}):
    from_: RawId
    at: Timestamp


def _send(tu: str, data: Any) -> list[ev.DomainEvent]:
    s = convert_ids(data, Send, _SendUnchecked, _SEND_IDS)
    outgoing = s.from_ == tu
    ru = s.to if outgoing else s.from_
    if s.type == "inmail_message":
        return [ev.MailOut(tu=tu, ru=ru, at=s.at, mail_id=s.id) if outgoing
                else ev.MailIn(tu=tu, ru=ru, at=s.at, mail_id=s.id, source="socket")]
    if s.type == "icebreaker":
        return [ev.OpenLimitsSignal(tu=tu, ru=ru, at=s.at, reason="icebreaker", source="socket")]
    if outgoing:
        return [ev.ChatOut(tu=tu, ru=ru, at=s.at, msg_id=s.id)]
    if ChathouseClient.message_kind(s.type, s.body) == "like":
        return [ev.LikeIn(tu=tu, ru=ru, at=s.at, kind="like")]
    return [ev.ChatIn(tu=tu, ru=ru, at=s.at, msg_id=s.id, body=s.body)]


def _notification(tu: str, data: Any) -> list[ev.DomainEvent]:
    n = convert(data, NewNotification)
    return [ev.Notification(tu=tu, ru=n.userId, at=n.at, kind=n.type)]


def _statistic(tu: str, data: Any) -> list[ev.DomainEvent]:
    s = convert(data, Statistic)
    if s.type in MAIL_IN_STATS:
        return [ev.MailIn(tu=tu, ru=s.from_, at=s.at, mail_id=s.mailId or s.eventKey, source="stats")]
    if s.type in MAIL_READ_STATS:
        return [ev.MailRead(tu=tu, ru=s.from_, at=s.at, mail_id=s.mailId, event_key=s.eventKey)]
    return []


def _block(tu: str, data: Any) -> list[ev.DomainEvent]:
    b = convert(data, Block)
    by, ru = ("tu", b.to) if b.from_ == tu else ("ru", b.from_)
    return [ev.BlockChanged(tu=tu, ru=ru, at=b.at, by=by, blocked=b.blocked)]


def _chat_request(tu: str, data: Any) -> list[ev.DomainEvent]:
    r = convert(data, ChatRequest)
    return [ev.ChatRequestIn(tu=tu, ru=r.from_, at=r.at)]


class ChathouseClient(PlatformClient):
    project = "chathouse"
    has_limits = True
    has_read_stats = True
    like_kinds = frozenset({"like"})
    passes = (
        Pass("online", "scroll_all_online", {}, 60.0, "online"),
        Pass("check_chat", "scroll_new", {}, 1800.0, "check_chat"),
    )
    decoders = {
        "Send": _send,
        "new_notification": _notification,
        "statistic": _statistic,
        "block": _block,
        "chat_request": _chat_request,
        "incomingEmail": _email,
    }

    @classmethod
    def message_kind(cls, type_: str | None, body: str | None) -> str | None:
        """A like is recognised by its body (seed 003 "лайк по тілу повідомлення") — on the
        socket and in tab ``new`` rows alike."""
        if type_ in ("message", "like") and (type_ == "like" or (body or "").strip() in LIKE_BODIES):
            return "like"
        return type_

    @staticmethod
    def is_freeloader(fav: Favorite) -> bool:
        return bool(fav.paid_with_bonuses_only)
