"""Prime (seed 003): criteria scrolls, live restriction API, no read statistics.

Raw socket events (all times unix seconds):

* ``MessageSent`` :class:`MessageSent` — a message either way (``senderId`` tells the direction).
  ``type``: ``message``; ``likephoto`` / ``wink`` / ``like_newsfeed_post`` (Like); ``system``
  (e.g. "limits opened" → Open Limits after a live limits check).
* ``email`` :class:`Email` — a platform letter either way (Unanswered mail when from the RU).
* ``dialog_created`` :class:`DialogCreated` — a dialog appeared (Open Limits after a live check).
* ``blockStatus`` :class:`BlockStatus`; ``chatRequest`` / ``incomingEmail`` as Golden's.

Requests:

* ``dialogs {"criteria": [...], "cursor"?}`` → :class:`~platform_clients.base.RawDialogPage`:
  ``["active","online"]`` every 60 s (RU Online), ``["unanswered"]`` at check chat,
  ``[]`` (all; the only place likes show, DESIGN §12.5) at check chat, ``["active"]`` with
  ``"limit": 15`` and a stateful ``cursor`` (page index) every 120 s, back to 7 days (Open Limits,
  DESIGN §12.3; seed 003 «1 сторінка (15 діалогів) за тік ~120 с»: the request names the page
  size, so a platform whose default page differs still gets the seed's cadence of 15 per tick).
* ``inbox_unanswered {}`` → ``{"mails": [{"ru","id","at"}]}`` — check mail, at login only.
* ``chat_restriction {"ru"}`` → ``{"chatLimit","mailLimit"}`` — the live limits
  (``POST /platform/chat/restriction``).
* ``correspondence_get {"ru"}`` / ``emails_history {"ru"}`` → ``{"mails": [{"id","from","at"}]}``.

Freeloader: fewer than 11 paid actions.
"""
from __future__ import annotations

from typing import Any

import msgspec

from platform_clients.base import RawId, Timestamp, BadAnswer, Pass, PlatformClient, convert, list_field
from platform_clients.golden import ChatRequest, IncomingEmail, _chat_request, _email
from sidecar.domain import events as ev
from sidecar.domain.favorites import Favorite

LIKE_TYPES = frozenset({"likephoto", "wink", "like_newsfeed_post"})
ACTIVE_PAGE = 15  # dialogs per criteria-active page: seed 003 «1 сторінка (15 діалогів) за тік ~120 с»

__all__ = ["PrimeClient", "MessageSent", "Email", "DialogCreated", "BlockStatus", "ChatRequest",
           "IncomingEmail", "LIKE_TYPES", "UnansweredMail", "Restriction"]


class MessageSent(msgspec.Struct):
    id: RawId
    type: str
    senderId: RawId
    recipientId: RawId
    at: Timestamp
    text: str = ""


class Email(msgspec.Struct):
    id: RawId
    senderId: RawId
    recipientId: RawId
    at: Timestamp


class DialogCreated(msgspec.Struct):
    dialogId: RawId
    ruId: RawId
    at: Timestamp


class BlockStatus(msgspec.Struct):
    senderId: RawId
    recipientId: RawId
    blocked: bool
    at: Timestamp


class UnansweredMail(msgspec.Struct):
    ru: RawId
    id: RawId
    at: Timestamp


class InboxUnanswered(msgspec.Struct):
    mails: list[UnansweredMail] = []


class Restriction(msgspec.Struct):
    chatLimit: int = 0
    mailLimit: int = 0


def _message(tu: str, data: Any) -> list[ev.DomainEvent]:
    m = convert(data, MessageSent)
    outgoing = m.senderId == tu
    ru = m.recipientId if outgoing else m.senderId
    if outgoing:
        return [ev.ChatOut(tu=tu, ru=ru, at=m.at, msg_id=m.id)] if m.type == "message" else []
    if PrimeClient.message_kind(m.type, m.text) == "like":
        return [ev.LikeIn(tu=tu, ru=ru, at=m.at, kind=m.type)]
    if m.type == "system":
        return [ev.OpenLimitsSignal(tu=tu, ru=ru, at=m.at, reason="system", source="socket",
                                    needs_live_limits=True)]
    return [ev.ChatIn(tu=tu, ru=ru, at=m.at, msg_id=m.id, body=m.text)]


def _email_letter(tu: str, data: Any) -> list[ev.DomainEvent]:
    e = convert(data, Email)
    if e.senderId == tu:
        return [ev.MailOut(tu=tu, ru=e.recipientId, at=e.at, mail_id=e.id)]
    return [ev.MailIn(tu=tu, ru=e.senderId, at=e.at, mail_id=e.id, source="socket")]


def _dialog_created(tu: str, data: Any) -> list[ev.DomainEvent]:
    d = convert(data, DialogCreated)
    return [ev.OpenLimitsSignal(tu=tu, ru=d.ruId, at=d.at, reason="dialog_created",
                                source="dialog_created", needs_live_limits=True)]


def _block(tu: str, data: Any) -> list[ev.DomainEvent]:
    b = convert(data, BlockStatus)
    by, ru = ("tu", b.recipientId) if b.senderId == tu else ("ru", b.senderId)
    return [ev.BlockChanged(tu=tu, ru=ru, at=b.at, by=by, blocked=b.blocked)]


class PrimeClient(PlatformClient):
    project = "prime"
    has_limits = True
    has_read_stats = False
    like_kinds = LIKE_TYPES
    passes = (
        Pass("online", "dialogs", {"criteria": ["active", "online"]}, 60.0, "online"),
        Pass("check_chat", "dialogs", {"criteria": ["unanswered"]}, 1800.0, "check_chat"),
        Pass("likes", "dialogs", {"criteria": []}, 1800.0, "likes"),
        Pass("check_mail", "inbox_unanswered", {}, None, "check_mail", on_reconnect=False),
        Pass("open_limits", "dialogs", {"criteria": ["active"], "limit": ACTIVE_PAGE}, 120.0, "open_limits",
             on_reconnect=False),
    )
    decoders = {
        "MessageSent": _message,
        "email": _email_letter,
        "dialog_created": _dialog_created,
        "blockStatus": _block,
        "chatRequest": _chat_request,
        "incomingEmail": _email,
    }

    @staticmethod
    def is_freeloader(fav: Favorite) -> bool:
        return (fav.paid_actions or 0) < 11

    @classmethod
    def decode_unanswered_mail(cls, result: Any) -> list[UnansweredMail]:
        """Rows that do not match :class:`UnansweredMail` are skipped; BadAnswer if unusable."""
        out = []
        for row in list_field(result, "mails", cls.project):
            try:
                out.append(msgspec.convert(row, UnansweredMail))
            except msgspec.ValidationError:
                continue
        return out

    @classmethod
    def decode_restriction(cls, result: Any) -> Restriction:
        """Raises BadAnswer when the live limits cannot be read."""
        try:
            return msgspec.convert(result, Restriction)
        except msgspec.ValidationError as exc:
            raise BadAnswer(f"prime chat_restriction: {exc}") from None
