"""Task model (DESIGN §6, seed 003 "Цільовий набір").

Rules
-----
* Eight task types, each with a TTL (seconds), a channel and whether it needs the RU online.
* One open task per (TU, RU, type); the deadline is fixed at creation (first trigger + TTL;
  ``unanswered_email`` counts from the e-mail's receipt).
* Close reasons: ``answered`` (the TU sent on the task's channel, or the operator closed it),
  ``expired`` (deadline passed), ``superseded`` (a stronger task for the pair replaced it),
  ``blocked``, ``logout``.
* Sort: earliest deadline first, then VIP tier (green > yellow > red > none), then table order.
"""
from __future__ import annotations

import enum
import hashlib

import msgspec


class TaskType(str, enum.Enum):
    UNANSWERED_MESSAGE = "unanswered_message"
    UNANSWERED_MAIL = "unanswered_mail"
    UNANSWERED_EMAIL = "unanswered_email"
    FOLLOW_UP_MESSAGE = "follow_up_message"
    FOLLOW_UP_MAIL = "follow_up_mail"
    OPEN_LIMITS = "open_limits"
    OPEN_LIMITS_CAPTCHA = "open_limits_captcha"
    LIKE = "like"


class Channel(str, enum.Enum):
    CHAT = "chat"
    MAIL = "mail"
    EMAIL = "email"


class CloseReason(str, enum.Enum):
    ANSWERED = "answered"
    EXPIRED = "expired"
    SUPERSEDED = "superseded"
    BLOCKED = "blocked"
    LOGOUT = "logout"
    DISMISSED = "dismissed"


class TaskSpec(msgspec.Struct, frozen=True):
    """One row of DESIGN §6's table."""

    ttl_s: float  # seconds from the trigger to the deadline
    channel: Channel  # what the TU sends to answer it
    online_only: bool  # created only for an online RU (seed 003 "за замовчуванням ... онлайн")
    order: int  # position in the table: last tie-break of the sort


SPECS: dict[TaskType, TaskSpec] = {
    TaskType.UNANSWERED_MESSAGE: TaskSpec(120, Channel.CHAT, False, 0),
    TaskType.UNANSWERED_MAIL: TaskSpec(600, Channel.MAIL, False, 1),
    TaskType.UNANSWERED_EMAIL: TaskSpec(43200, Channel.EMAIL, False, 2),
    TaskType.FOLLOW_UP_MESSAGE: TaskSpec(300, Channel.CHAT, True, 3),
    TaskType.FOLLOW_UP_MAIL: TaskSpec(900, Channel.MAIL, True, 4),
    TaskType.OPEN_LIMITS: TaskSpec(300, Channel.CHAT, False, 5),
    TaskType.OPEN_LIMITS_CAPTCHA: TaskSpec(300, Channel.CHAT, False, 6),
    TaskType.LIKE: TaskSpec(300, Channel.CHAT, False, 7),
}

#: A new task of the key type closes open tasks of the value types for the pair as
#: ``superseded``: an RU who writes is answered, not reminded (seed 003: Follow-up is only for a
#: dialog that is not already being worked; DESIGN §6 "superseded").
SUPERSEDES: dict[TaskType, tuple[TaskType, ...]] = {
    TaskType.UNANSWERED_MESSAGE: (TaskType.FOLLOW_UP_MESSAGE, TaskType.OPEN_LIMITS),
    TaskType.LIKE: (TaskType.FOLLOW_UP_MESSAGE,),
    TaskType.UNANSWERED_MAIL: (TaskType.FOLLOW_UP_MAIL,),
}

#: Chat tasks that count as "a stronger chat task" for Follow-up message (DESIGN §7).
STRONGER_CHAT = (TaskType.UNANSWERED_MESSAGE, TaskType.LIKE, TaskType.OPEN_LIMITS,
                 TaskType.OPEN_LIMITS_CAPTCHA, TaskType.FOLLOW_UP_MESSAGE)

VIP_RANK = {"green": 3, "yellow": 2, "red": 1, None: 0}


def vip_tier(spend_30d_usd: float | None) -> str | None:
    """VIP label from the RU's global spend over 30 days (seed 003: red 300 $, yellow 600 $,
    green 900 $); None below 300 $."""
    s = spend_30d_usd or 0.0
    if s >= 900:
        return "green"
    if s >= 600:
        return "yellow"
    if s >= 300:
        return "red"
    return None


class Task(msgspec.Struct, kw_only=True):
    """A task on the operator's list.  Times are unix seconds (UTC)."""

    task_id: str
    type: TaskType
    project: str
    tu: str
    ru: str
    source: str  # trigger name: socket, check_chat, chain, over_60m, notification, ...
    created_at: float
    deadline: float
    vip: str | None = None
    closed_at: float | None = None
    reason: CloseReason | None = None
    meta: dict = {}  # service details, e.g. {"answer_by": "mail"} for a Like with no chat limit

    @property
    def is_open(self) -> bool:
        return self.closed_at is None

    @property
    def channel(self) -> Channel:
        if self.meta.get("answer_by") == "mail":
            return Channel.MAIL
        return SPECS[self.type].channel

    def sort_key(self) -> tuple:
        """Earliest deadline, then VIP tier (green first), then table order (DESIGN §6)."""
        return (self.deadline, -VIP_RANK.get(self.vip, 0), SPECS[self.type].order)


def task_id_for(tu: str, ru: str, type_: TaskType, created_at: float, source: str) -> str:
    """Deterministic id: the same trigger on any machine, before or after a crash, names the same
    task, which is what makes crash-equivalent traces and idempotent Stack writes possible."""
    raw = f"{tu}|{ru}|{type_.value}|{created_at:.3f}|{source}".encode()
    return "t-" + hashlib.blake2b(raw, digest_size=9).hexdigest()
