"""Task model (DESIGN §6, seed 003 "Цільовий набір").

Rules
-----
* Eight task types, each with a TTL (seconds), a channel and whether it needs the RU online.
* One open task per (TU, RU, type); the deadline is fixed at creation (first trigger + TTL;
  ``unanswered_email`` counts from the e-mail's receipt).
* **The deadline is not a lifetime for answer-awaiting types** (``unanswered_message``,
  ``unanswered_mail``, ``unanswered_email``, ``like``): at the deadline they become *overdue* and
  stay open until answered, dismissed, blocked or logged out (DESIGN §6; seed 003 "Follow-up
  message": the chain counts from the Unanswered close, "теоретично він може бути через скільки
  завгодно від моменту, як написав RU", and the overdue task is the "жовтий Unanswered таск").
  *Prompts* (``follow_up_message``, ``follow_up_mail``, ``open_limits``, ``open_limits_captcha``)
  close as ``expired`` at the deadline.
* Close reasons: ``answered`` (the TU sent on the task's channel), ``dismissed`` (the operator
  closed it), ``expired`` (a prompt past its deadline or its RU offline), ``superseded`` (a
  stronger task for the pair replaced it), ``blocked``, ``logout``.
* **One strength order per channel** (:data:`STRENGTH`, DESIGN §6), used for supersede, for
  refusing a candidate while a stronger (or the same) task is open, for the Follow-up final
  check and as the sort's last tie-break.
* Sort: earliest deadline first (so overdue tasks lead), then VIP tier (green > yellow > red >
  none), then strength; ties by creation, then task id (a total order, the same after a restore).
"""
from __future__ import annotations

import enum
import hashlib
import types
from typing import Any, Union, get_args, get_origin

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
    awaits_answer: bool  # True: overdue at the deadline, stays open; False: expires (DESIGN §6)


SPECS: dict[TaskType, TaskSpec] = {
    TaskType.UNANSWERED_MESSAGE: TaskSpec(120, Channel.CHAT, False, True),
    TaskType.UNANSWERED_MAIL: TaskSpec(600, Channel.MAIL, False, True),
    TaskType.UNANSWERED_EMAIL: TaskSpec(43200, Channel.EMAIL, False, True),
    TaskType.FOLLOW_UP_MESSAGE: TaskSpec(300, Channel.CHAT, True, False),
    TaskType.FOLLOW_UP_MAIL: TaskSpec(900, Channel.MAIL, True, False),
    TaskType.OPEN_LIMITS: TaskSpec(300, Channel.CHAT, False, False),
    TaskType.OPEN_LIMITS_CAPTCHA: TaskSpec(300, Channel.CHAT, False, False),
    TaskType.LIKE: TaskSpec(300, Channel.CHAT, False, True),
}

#: THE strength order, strongest first, per channel (DESIGN §6).  Creating a task supersedes the
#: pair's open weaker tasks of its channel; a candidate is refused while a stronger or the same
#: task of its channel is open; Follow-up message's final check asks the same question.  An RU
#: who writes is answered, not reminded (seed 003: Follow-up only "якщо діалог уже ведеться —
#: нічого").  Every type is in exactly one row.
STRENGTH: dict[Channel, tuple[TaskType, ...]] = {
    Channel.CHAT: (TaskType.UNANSWERED_MESSAGE, TaskType.LIKE, TaskType.OPEN_LIMITS_CAPTCHA,
                   TaskType.OPEN_LIMITS, TaskType.FOLLOW_UP_MESSAGE),
    Channel.MAIL: (TaskType.UNANSWERED_MAIL, TaskType.FOLLOW_UP_MAIL),
    Channel.EMAIL: (TaskType.UNANSWERED_EMAIL,),
}
_RANK: dict[TaskType, tuple[Channel, int]] = {
    t: (ch, i) for ch, row in STRENGTH.items() for i, t in enumerate(row)}


def strength_rank(type_: TaskType) -> int:
    """0 = strongest of its channel."""
    return _RANK[type_][1]


def stronger_or_same(type_: TaskType) -> tuple[TaskType, ...]:
    """The types whose open task refuses a ``type_`` candidate (``type_`` itself included)."""
    return _STRONGER_OR_SAME[type_]


def weaker_than(type_: TaskType) -> tuple[TaskType, ...]:
    """The types a new ``type_`` task supersedes."""
    return _WEAKER[type_]


# both asked on every candidate: computed once from STRENGTH
_STRONGER_OR_SAME = {t: STRENGTH[ch][: i + 1] for t, (ch, i) in _RANK.items()}
_WEAKER = {t: STRENGTH[ch][i + 1:] for t, (ch, i) in _RANK.items()}

#: the ``Task.meta`` key that records a candidate's override of its type's ``online_only``; kept
#: in ``meta`` so it is stored, restored and shown to Electron with the task, with no new column
ONLINE_REQUIRED = "online_required"

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


class Task(msgspec.Struct, gc=False):
    """A task on the operator's list.  Times are unix seconds (UTC).  ``gc=False``: a task holds
    plain values (``meta`` is a dict of scalars) and never takes part in a reference cycle, so
    the garbage collector need not track every open task.  Not ``kw_only``:
    the Task Factory builds one per created task positionally, in this field order (keywords cost
    more: docs/decisions.md "Keywords vs positions")."""

    task_id: str
    type: TaskType
    project: str
    tu: str
    ru: str
    source: str  # trigger name: socket, check_chat, chain, over_60m, follow_up_pass, notification, ...
    created_at: float
    deadline: float
    vip: str | None = None
    closed_at: float | None = None
    reason: CloseReason | None = None
    meta: dict = {}  # service details, e.g. {"answer_by": "mail"} for a Like with no chat limit
    overdue: bool = False  # an answer-awaiting task past its deadline (derived, not stored)

    @property
    def is_open(self) -> bool:
        return self.closed_at is None

    @property
    def channel(self) -> Channel:
        if self.meta.get("answer_by") == "mail":
            return Channel.MAIL
        return SPECS[self.type].channel

    @property
    def awaits_answer(self) -> bool:
        return SPECS[self.type].awaits_answer

    @property
    def online_required(self) -> bool:
        """True when the task needs its RU online: at creation, and an open prompt expires when
        RU Online says the RU left (DESIGN §6).  The type's default (:class:`TaskSpec`), unless
        the candidate that made the task said otherwise (``meta[ONLINE_REQUIRED]``, set by the
        Task Factory from :attr:`~sidecar.runtime.factory.Candidate.online_required`; e.g. the
        post-chat Follow-up mail, seed 003 "можна писати офлайн РЮ")."""
        value = self.meta.get(ONLINE_REQUIRED)
        return SPECS[self.type].online_only if not isinstance(value, bool) else value

    def sort_key(self) -> tuple:
        """Earliest deadline (overdue first), then VIP tier (green first), then strength
        (DESIGN §6); ties by creation, then task id, so the order is total: a restored sidecar
        lists tied tasks as the one that never stopped did (task ids are deterministic)."""
        return (self.deadline, -VIP_RANK.get(self.vip, 0), strength_rank(self.type), self.created_at,
                self.task_id)


#: an empty BLAKE2b of 9 bytes, copied per id: ``hashlib.blake2b(raw, digest_size=9)`` parses
#: its keyword parameters on every call, and a copy of this one (then ``update``) is the same hash
#: for ~1.2 k instructions less (one per created task; docs/decisions.md "i24-eng4")
_ID_HASH = hashlib.blake2b(digest_size=9)


def task_id_for(tu: str, ru: str, type_: TaskType, created_at: float, source: str) -> str:
    """Deterministic id: the same trigger on any machine, before or after a crash, names the same
    task, which is what makes crash-equivalent traces and idempotent Stack writes possible:
    ``"t-"`` + the hex BLAKE2b-72 of ``tu|ru|type|created_at (3 decimals)|source``."""
    h = _ID_HASH.copy()
    h.update(f"{tu}|{ru}|{type_._value_}|{created_at:.3f}|{source}".encode())  # _value_: no descriptor
    return "t-" + h.hexdigest()


#: The views of a Task, declared once: each names the Task fields it shows, in the order it
#: encodes them (msgspec encodes a Struct's fields in order, so the order is the bytes').  The
#: Struct of each view is checked against :class:`Task` — names, order, types (an enum as its wire
#: string), defaults — and its encoding against the projection of a Task
#: (tests/app/test_task_views.py), so a field added to Task and not to a view fails there.
#: ``WIRE``: a task as Electron shows it (``task.created``, ``tasks.list``;
#: :class:`sidecar.protocol.outbound.TaskView`) — no close, it is announced open.
#: ``STACK``: as Stack stores it (the ``task`` of a task write, :mod:`sidecar.stack.writes`) —
#: no ``overdue`` (derived, not stored), the close before ``vip`` (the reference Stack's order).
#: ``HISTORY``: a pair's history row (:class:`HistoryRow`), what the services restore from —
#: ``source`` after ``created_at``: the row is built positionally and ``source`` has a default.
WIRE_FIELDS = tuple(f for f in Task.__struct_fields__ if f not in ("closed_at", "reason"))
STACK_FIELDS = ("task_id", "type", "project", "tu", "ru", "source", "created_at", "deadline",
                "closed_at", "reason", "vip", "meta")
HISTORY_FIELDS = ("task_id", "type", "ru", "created_at", "source", "closed_at", "reason")
assert {*WIRE_FIELDS, *STACK_FIELDS, *HISTORY_FIELDS} <= set(Task.__struct_fields__)


def wire_type(tp: Any) -> Any:
    """``tp`` with every enum class replaced by ``str`` (a view carries the enum's value, which
    msgspec encodes as the member does): ``TaskType`` -> ``str``, ``CloseReason | None`` ->
    ``str | None``."""
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return str
    if get_origin(tp) in (Union, types.UnionType):
        return Union[tuple(wire_type(a) for a in get_args(tp))]
    return tp


def view_struct(name: str, names: tuple[str, ...], **config: Any) -> type[msgspec.Struct]:
    """A Struct of Task's fields ``names`` in that order, each with Task's type (:func:`wire_type`)
    and no default (a view is built positionally from a Task, which has every value); ``config``
    is msgspec's (``gc=False`` …).  KeyError for a name that is not a Task field."""
    info = {f.name: f for f in msgspec.structs.fields(Task)}
    return msgspec.defstruct(name, [(n, wire_type(info[n].type)) for n in names],
                             module=__name__, **config)


class HistoryRow(msgspec.Struct, frozen=True):
    """One row of a pair's task history — Task's :data:`HISTORY_FIELDS` view, with ``source``
    defaulting to ``""`` for Stack rows that lack it — as the services read it at login and after (DESIGN §9
    "Restore on login"): from Stack's startup data, from the local task table, and kept current
    by the runtime as tasks are created and closed.  Times are unix seconds (UTC); ``type`` and
    ``reason`` are the wire values of :class:`TaskType` / :class:`CloseReason` (``reason`` and
    ``closed_at`` are None while the task is open).  Frozen: a close is a new row
    (:meth:`closed_as`), never an edit of a row a service may hold.  Not ``kw_only``: one is
    built per created task, positionally in this field order (see :class:`Task`); the row is
    never encoded, so the order is only the constructor's."""

    task_id: str
    type: str
    ru: str
    created_at: float
    source: str = ""
    closed_at: float | None = None
    reason: str | None = None

    @classmethod
    def of(cls, task: Task) -> HistoryRow:
        """The row of ``task`` in its current state."""
        reason = task.reason
        return cls(task.task_id, task.type._value_, task.ru, task.created_at, task.source,
                   task.closed_at, reason._value_ if reason else None)  # HISTORY_FIELDS' order

    def closed_as(self, task: Task) -> HistoryRow:
        """This row with ``task``'s close (``closed_at``, ``reason``; None while open)."""
        return msgspec.structs.replace(self, closed_at=task.closed_at,
                                       reason=task.reason.value if task.reason else None)


# HistoryRow.of builds it positionally: keep in step with its fields
assert HistoryRow.__struct_fields__ == HISTORY_FIELDS
