"""The platform half of the contract in one place (issue 20 item 1; DESIGN §4 "The contract is
portable"): every raw socket event each project's client accepts (``platform.event`` ``name`` →
the ``data`` Struct its decoder converts to) and every ``platform.request`` method the sidecar
asks Electron to call (``method`` → its params Struct and the answer Struct the sidecar decodes).
``sidecar schema`` exports both as tagged unions, so Electron — which owns the platform sessions —
has them machine-readable; until now they lived only in these modules' docstrings.

* :data:`RAW_EVENTS` keys are each client's ``decoders`` keys (a test holds them equal), and its
  Structs are the ones the decoders convert to, so the schema is what the code accepts.  Raw
  objects stay open: a platform may send more fields than the sidecar reads (DESIGN §4).
* :data:`REQUESTS` covers every method the services ask (poll passes, mail history, Golden's
  chat history, Prime's live limits and Open Limits page); a test checks the code's requests —
  the passes' params included — against it.  Answers are decoded leniently (a bad row is
  skipped and logged, see each client), so their Structs are the rows the sidecar uses.
* All times are unix seconds (:data:`~platform_clients.base.Timestamp`); ids have no control
  characters (:data:`~platform_clients.base.RawId`).
"""
from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from platform_clients import chathouse, golden, prime
from platform_clients.base import RawDialogPage, RawId, Timestamp
from platform_clients.mail import RawMails

__all__ = ["RAW_EVENTS", "REQUESTS", "NoParams", "RuParams", "RuIdsParams", "DialogsParams", "ChatHistory"]


class NoParams(msgspec.Struct, kw_only=True):
    """A request without params (``{}``)."""


class RuParams(msgspec.Struct, kw_only=True):
    """A request about one RU (its id on the platform)."""

    ru: RawId


class RuIdsParams(msgspec.Struct, kw_only=True):
    """Golden ``chat_history``: the RUs whose chat history to read (online RUs only, DESIGN §7)."""

    ru_ids: list[RawId]


class DialogsParams(msgspec.Struct, kw_only=True):
    """Prime ``dialogs``: the criteria (all of them must hold; ``[]`` = every dialog), the page
    size ``limit`` (dialogs per page, 1..100; the ``active`` scroll asks for seed 003's 15; absent:
    the platform's default) and the page cursor (``next_cursor`` of the previous page; absent / 0 =
    the first page)."""

    criteria: list[Literal["active", "online", "unanswered"]]
    limit: Annotated[int, msgspec.Meta(ge=1, le=100)] | None = None
    cursor: int | None = None


class HistoryMessage(msgspec.Struct, kw_only=True, rename={"from_": "from"}):
    """One chat message of a Golden history: ``from`` ``ru`` | ``tu``; ``at`` unix seconds."""

    id: RawId = ""
    from_: Literal["ru", "tu"]
    at: Timestamp
    kind: str | None = None  # message | rose …


class HistoryDialog(msgspec.Struct, kw_only=True):
    ru: RawId
    messages: list[HistoryMessage] = []


class ChatHistory(msgspec.Struct, kw_only=True):
    """Golden ``chat_history`` answer (read by ``sidecar.services.follow_up_checks.parse_history``)."""

    dialogs: list[HistoryDialog] = []


RAW_EVENTS: dict[str, dict[str, type]] = {
    "golden": {
        "receivePrivateMessage": golden.PrivateMessage,
        "privateMessageSent": golden.PrivateMessage,
        "statistics": golden.Statistic,
        "mailSent": golden.MailSent,
        "userBlocked": golden.UserBlocked,
        "chatRequest": golden.ChatRequest,
        "incomingEmail": golden.IncomingEmail,
    },
    "chathouse": {
        "Send": chathouse.Send,
        "new_notification": chathouse.NewNotification,
        "statistic": chathouse.Statistic,
        "block": chathouse.Block,
        "chat_request": chathouse.ChatRequest,
        "incomingEmail": golden.IncomingEmail,
    },
    "prime": {
        "MessageSent": prime.MessageSent,
        "email": prime.Email,
        "dialog_created": prime.DialogCreated,
        "blockStatus": prime.BlockStatus,
        "chatRequest": golden.ChatRequest,
        "incomingEmail": golden.IncomingEmail,
    },
}

REQUESTS: dict[str, dict[str, tuple[type, type]]] = {
    "golden": {
        "online_ru": (NoParams, golden.OnlineRu),
        "chat_history": (RuIdsParams, ChatHistory),
        "get_mail": (RuParams, RawMails),
    },
    "chathouse": {
        "scroll_all_online": (NoParams, RawDialogPage),
        "scroll_new": (NoParams, RawDialogPage),
        "inmails_chain": (RuParams, RawMails),
    },
    "prime": {
        "dialogs": (DialogsParams, RawDialogPage),
        "inbox_unanswered": (NoParams, prime.InboxUnanswered),
        "chat_restriction": (RuParams, prime.Restriction),
        "correspondence_get": (RuParams, RawMails),
        "emails_history": (RuParams, RawMails),
    },
}
