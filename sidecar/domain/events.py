"""Domain events: what ``platform_clients`` make of the platforms' raw socket events and poll
results.  Frozen values; services decide on them, nothing here does I/O.

All times are unix seconds (UTC).  ``ru`` is the platform's customer id, ``tu`` our profile.
"""
from __future__ import annotations

import msgspec


class Event(msgspec.Struct, frozen=True, tag=True, kw_only=True):
    tu: str
    ru: str
    at: float


class ChatIn(Event):
    """RU wrote a chat message (Golden ``receivePrivateMessage``, Chathouse ``Send``, Prime
    ``MessageSent``)."""

    msg_id: str
    body: str = ""


class ChatOut(Event):
    """The TU sent a chat message (the platform's echo of the operator's own send)."""

    msg_id: str


class LikeIn(Event):
    """A free action: Golden 🌹, Chathouse like by body, Prime likephoto/wink/like_newsfeed_post."""

    kind: str


class MailIn(Event):
    """RU sent a platform letter (socket or statistics, per project)."""

    mail_id: str
    source: str = "socket"  # socket | stats | check_mail


class MailOut(Event):
    """The TU sent a platform letter."""

    mail_id: str


class MailRead(Event):
    """RU read / opened an attachment of the TU's letter (statistics; not on Prime)."""

    mail_id: str
    event_key: str


class EmailIn(Event):
    """An incoming e-mail; ``received_at`` anchors the 12 h deadline."""

    email_id: str
    received_at: float


class Notification(Event):
    """Chathouse ``new_notification``: ONLINE_NOW or RECENT_PURCHASE."""

    kind: str


class OpenLimitsSignal(Event):
    """A dialog where the TU may write first: Chathouse empty dialog / mutual like / icebreaker,
    Prime system "limits opened" or dialog created.  ``needs_live_limits``: Prime checks the
    restriction API before creating (seed 003: cached limits in the list may be stale)."""

    reason: str  # empty_dialog | mutual_like | icebreaker | system | dialog_created
    source: str  # socket | scroll_new | scroll_active | dialog_created
    needs_live_limits: bool = False
    row: "DialogSnapshot | None" = None  # the dialog row the signal came from (blocks, last message)


class ChatRequestIn(Event):
    """A chat request (Open Limits, captcha)."""


class BlockChanged(Event):
    """A block either way; ``by`` is ``tu`` or ``ru``."""

    by: str
    blocked: bool


class UnansweredSeen(Event):
    """The unanswered column (check chat / check mail) lists the pair: the RU's last message
    ``last_at`` is unanswered.  ``channel``: chat or mail; ``kind``: message or like."""

    channel: str
    kind: str
    last_at: float
    source: str


DomainEvent = (ChatIn | ChatOut | LikeIn | MailIn | MailOut | MailRead | EmailIn | Notification
               | OpenLimitsSignal | ChatRequestIn | BlockChanged | UnansweredSeen)


class DialogSnapshot(msgspec.Struct, frozen=True, kw_only=True):
    """One dialog as an online pass / scroll sees it (normalised across projects)."""

    ru: str
    online: bool = True
    last_from: str | None = None  # "ru" | "tu" | "system" | None (no messages yet)
    last_at: float | None = None
    last_kind: str | None = None  # message | like | system | icebreaker | ...
    last_tu_at: float | None = None  # the TU's last chat message
    chat_limit: int | None = None  # None: project has no limits (Golden) or unknown
    mail_limit: int | None = None
    blocked_by_tu: bool = False
    blocked_by_ru: bool = False
    dialog_id: str | None = None  # None: dialog not created yet (Chathouse tab new)
    mutual_like: bool = False
    unanswered_mail_at: float | None = None  # the RU's last unanswered letter (tab new)
    spend_30d_usd: float | None = None  # the RU's global 30-day spend, when the row shows it
