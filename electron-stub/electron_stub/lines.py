"""The scenario's line kinds (``shared/scenarios/README.md``): one msgspec Struct per ``kind``.

Rules / theory of operation
---------------------------
* Every line Struct derives from :class:`Base` and is tagged by ``kind`` (``Line`` is the tagged
  union the parser decodes with).  Unknown keys are ignored; enumerated values (``project``,
  ``from``, ``by``, ``what``, ``mode``, notification ``type``) are ``Literal`` types, so msgspec
  rejects a bad value with the JSON path of the key.
* :meth:`Base.check` adds the cross-field rules msgspec cannot express (a like kind of the right
  project, an ``expect``'s required keys, a non-empty window …) and returns what is wrong.
* ``t`` is seconds from the header's ``start`` (float); ``lineno`` is set by the parser.
  Initial-world kinds (:data:`INITIAL`) never take ``t``; ``favorite`` is initial without ``t``
  and a partial timeline change with it.
"""
from __future__ import annotations

from datetime import datetime
from typing import Any, Literal, Union

import msgspec

__all__ = [
    "Base",
    "Operator",
    "Header",
    "Tu",
    "Favorite",
    "HistoryTask",
    "History",
    "ChatLog",
    "MailLog",
    "Login",
    "Logout",
    "Online",
    "Message",
    "Like",
    "Mail",
    "MailReadLine",
    "EmailLine",
    "NotificationLine",
    "Limits",
    "SystemLine",
    "DialogCreatedLine",
    "Icebreaker",
    "ChatRequestLine",
    "Block",
    "Unblock",
    "Crash",
    "StackFault",
    "Target",
    "Rule",
    "Group",
    "Emit",
    "TargetFault",
    "Manage",
    "Expect",
    "PROJECTS",
    "LIKE_KINDS",
    "Project",
    "Side",
    "FAVORITE_ATTRS",
    "Line",
    "INITIAL",
    "KINDS",
]

PROJECTS = ("golden", "chathouse", "prime")
LIKE_KINDS = {"golden": {"rose"}, "chathouse": {"like"},
              "prime": {"likephoto", "wink", "like_newsfeed_post"}}
Project = Literal["golden", "chathouse", "prime"]
Side = Literal["ru", "tu"]


class Base(msgspec.Struct, kw_only=True, tag_field="kind", forbid_unknown_fields=False):
    """Every line; ``lineno`` is set by the parser (not read from the file)."""

    t: float | None = None
    lineno: int = 0

    def check(self) -> str | None:
        """Cross-field validation; returns what is wrong, or None."""
        return None

    def kind_name(self) -> str:
        """The line's ``kind`` as written in the file."""
        return str(type(self).__struct_config__.tag)


# ---- header and initial world ------------------------------------------------------------

class Operator(msgspec.Struct, forbid_unknown_fields=False):
    """The operator model the harness plays (probabilities, delay ranges in seconds)."""

    chat_answer_p: float = 0.85
    chat_delay_s: tuple[float, float] = (15.0, 90.0)
    mail_answer_p: float = 0.6
    mail_delay_s: tuple[float, float] = (60.0, 400.0)


class Header(Base, tag="header", kw_only=True):
    format: int
    start: str  # ISO UTC
    seed: int
    duration_s: float
    name: str = ""
    operator: Operator = msgspec.field(default_factory=Operator)
    routing: dict[str, Any] | None = None  # {"match_mode": "all"|"first", "dedup_window_s": N} (DESIGN §10)

    def check(self) -> str | None:
        if self.format != 1:
            return f"unsupported format {self.format} (expected 1)"
        try:
            _parse_iso(self.start)
        except ValueError:
            return f"bad start {self.start!r} (expected ISO UTC, e.g. 2026-11-30T08:00:00Z)"
        if self.duration_s <= 0:
            return "duration_s must be > 0"
        o = self.operator
        for p in ("chat_answer_p", "mail_answer_p"):
            if not 0.0 <= getattr(o, p) <= 1.0:
                return f"operator.{p} must be in [0, 1]"
        for d in ("chat_delay_s", "mail_delay_s"):
            lo, hi = getattr(o, d)
            if lo < 0 or hi < lo:
                return f"operator.{d} must be [lo, hi] with 0 <= lo <= hi"
        return None

    @property
    def start_unix(self) -> float:
        return _parse_iso(self.start)


class Tu(Base, tag="tu", kw_only=True):
    project: Project
    tu: str
    operator: str = ""


class Favorite(Base, tag="favorite", kw_only=True):
    """Initial (all keys) or a timeline change (partial: None = unchanged)."""

    project: Project
    tu: str
    ru: str
    active: bool | None = None
    is_white: bool | None = None
    spend_30d_usd: float | None = None
    spend_total_usd: float | None = None
    paid_actions: int | None = None
    paid_with_bonuses_only: bool | None = None
    chat_limit: int | None = None
    mail_limit: int | None = None
    markers: dict[str, Any] | None = None

    def changes(self) -> dict[str, Any]:
        """The attribute keys this line sets (markers excluded)."""
        return {k: getattr(self, k) for k in FAVORITE_ATTRS if getattr(self, k) is not None}


FAVORITE_ATTRS = ("active", "is_white", "spend_30d_usd", "spend_total_usd", "paid_actions",
                  "paid_with_bonuses_only", "chat_limit", "mail_limit")


class HistoryTask(msgspec.Struct, forbid_unknown_fields=False):
    task_id: str
    type: str
    source: str = "socket"
    created_at: float = 0.0  # t value
    closed_at: float | None = None  # t value
    reason: str | None = None


class History(Base, tag="history", kw_only=True):
    project: Project
    tu: str
    ru: str
    task: HistoryTask


class ChatLog(Base, tag="chat_log", kw_only=True):
    project: Project
    tu: str
    ru: str
    from_: Side = msgspec.field(name="from")
    at: float
    id: str


class MailLog(Base, tag="mail_log", kw_only=True):
    project: Project
    tu: str
    ru: str
    from_: Side = msgspec.field(name="from")
    at: float
    id: str


# ---- timeline ----------------------------------------------------------------------------

class Login(Base, tag="login", kw_only=True):
    project: Project
    tu: str
    operator: str = ""
    fresh: bool = False


class Logout(Base, tag="logout", kw_only=True):
    project: Project
    tu: str
    operator: str = ""


class Online(Base, tag="online", kw_only=True):
    project: Project
    ru: str
    online: bool


class Message(Base, tag="message", kw_only=True):
    project: Project
    tu: str
    ru: str
    from_: Side = msgspec.field(name="from")
    id: str
    body: str = ""


class Like(Base, tag="like", kw_only=True):
    project: Project
    tu: str
    ru: str
    like: str

    def check(self) -> str | None:
        ok = LIKE_KINDS[self.project]
        if self.like not in ok:
            return f"like {self.like!r} is not a {self.project} like (expected one of {sorted(ok)})"
        return None


class Mail(Base, tag="mail", kw_only=True):
    project: Project
    tu: str
    ru: str
    from_: Side = msgspec.field(name="from")
    id: str


class MailReadLine(Base, tag="mail_read", kw_only=True):
    project: Project
    tu: str
    ru: str
    mail_id: str = ""
    event_key: str


class EmailLine(Base, tag="email", kw_only=True):
    project: Project
    tu: str
    ru: str
    id: str
    received_at: float | None = None  # t value; None = at t


class NotificationLine(Base, tag="notification", kw_only=True):
    project: Project
    tu: str
    ru: str
    type: Literal["ONLINE_NOW", "RECENT_PURCHASE"]

    def check(self) -> str | None:
        return None if self.project == "chathouse" else "notification exists on chathouse only"


class Limits(Base, tag="limits", kw_only=True):
    project: Project
    tu: str
    ru: str
    chat: int | None = None
    mail: int | None = None


class SystemLine(Base, tag="system", kw_only=True):
    project: Project
    tu: str
    ru: str
    text: str = ""

    def check(self) -> str | None:
        return None if self.project == "prime" else "system messages exist on prime only"


class DialogCreatedLine(Base, tag="dialog_created", kw_only=True):
    project: Project
    tu: str
    ru: str

    def check(self) -> str | None:
        return None if self.project == "prime" else "dialog_created exists on prime only"


class Icebreaker(Base, tag="icebreaker", kw_only=True):
    project: Project
    tu: str
    ru: str


class ChatRequestLine(Base, tag="chat_request", kw_only=True):
    project: Project
    tu: str
    ru: str


class Block(Base, tag="block", kw_only=True):
    project: Project
    tu: str
    ru: str
    by: Side


class Unblock(Base, tag="unblock", kw_only=True):
    project: Project
    tu: str
    ru: str
    by: Side


class Crash(Base, tag="crash", kw_only=True):
    pass


class StackFault(Base, tag="stack", kw_only=True):
    mode: Literal["down", "up", "error_rate", "latency"]
    value: float | None = None

    def check(self) -> str | None:
        if self.mode == "error_rate" and (self.value is None or not 0.0 <= self.value <= 1.0):
            return "stack error_rate needs a value in [0, 1]"
        if self.mode == "latency" and (self.value is None or self.value < 0):
            return "stack latency needs a value >= 0 (seconds)"
        return None


# ---- routing world (DESIGN §10; README "Routing world") -----------------------------------

class Target(Base, tag="target", kw_only=True):
    """An outward destination; the harness hosts its receiver on loopback (initial world)."""

    name: str
    channel: Literal["journal", "webhook", "telegram"]
    config: dict[str, Any] = msgspec.field(default_factory=dict)


class RuleAction(msgspec.Struct, forbid_unknown_fields=False):
    target: str
    template: str | None = None


class Rule(Base, tag="rule", kw_only=True):
    """A routing rule as DESIGN §10 (initial world)."""

    name: str
    conditions: dict[str, Any] = msgspec.field(default_factory=dict)
    actions: list[RuleAction] = msgspec.field(default_factory=list)
    throttle_seconds: float | None = None
    weight: int | None = None
    enabled: bool = True


class Group(Base, tag="group", kw_only=True):
    """A sender group (seed 000 §6; initial world)."""

    name: str
    priority: int
    senders: list[str] = msgspec.field(default_factory=list)
    failed_in_row: int | None = None
    cooldown_delay_from: float | None = None
    cooldown_delay_to: float | None = None
    send_from_message_interval: float | None = None
    send_to_message_interval: float | None = None
    from_time: str | None = None
    to_time: str | None = None


class Emit(Base, tag="emit", kw_only=True):
    """Electron routes an event of its own through the sidecar (``events.emit``)."""

    source: str
    subject: str
    action: str
    priority: str = "normal"
    payload: dict[str, Any] = msgspec.field(default_factory=dict)
    dedup_key: str | None = None
    ttl_s: float | None = None


class TargetFault(Base, tag="target_fault", kw_only=True):
    target: str
    mode: Literal["down", "up", "error_rate", "latency", "terminal", "probe_fail"]
    value: float | None = None


class Manage(Base, tag="manage", kw_only=True):
    """A management call (``groups.*``, ``senders.*``, ``rules.*``); ``error`` = the expected JSON-RPC code."""

    method: str
    params: dict[str, Any] = msgspec.field(default_factory=dict)
    error: int | None = None


ExpectWhat = Literal["task_created", "no_task", "task_open", "task_closed", "count", "marker",
                     "task_overdue", "delivery", "sender", "history", "decision"]

_EXPECT_NEEDS: dict[str, tuple[str, ...]] = {
    "task_created": ("type", "tu", "ru", "between"), "no_task": ("type", "tu", "ru", "between"),
    "task_open": ("type", "tu", "ru"), "task_closed": ("type", "tu", "ru"),
    "count": ("type", "between", "min", "max"), "marker": ("tu", "ru", "name"),
    "task_overdue": ("type", "tu", "ru"), "delivery": ("target", "between", "min", "max"),
    "sender": ("sender", "state"), "history": ("sender", "code", "between", "min", "max"),
    "decision": ("tu", "ru", "outcome", "between"),
}


class Expect(Base, tag="expect", kw_only=True):
    what: ExpectWhat
    type: str | None = None
    tu: str | None = None
    ru: str | None = None
    between: tuple[float, float] | None = None
    source: str | None = None
    reason: str | None = None
    min: int | None = None
    max: int | None = None
    name: str | None = None
    value: Any = msgspec.UNSET
    # routing and sender health (README "Expectations")
    target: str | None = None
    status: Literal["delivered", "skipped", "failed", "pending", "duplicate"] | None = None
    subject: str | None = None
    action: str | None = None
    sender: str | None = None
    state: Literal["active", "cooldown", "need_check"] | None = None
    cooldown_times: int | None = None
    code: int | None = None
    outcome: str | None = None

    def check(self) -> str | None:
        w = self.what
        missing = [k for k in _EXPECT_NEEDS[w] if getattr(self, k) is None]
        if missing:
            return f"expect {w} needs {', '.join(missing)}"
        if w == "marker" and self.value is msgspec.UNSET:
            return "expect marker needs value (null = absent)"
        if self.between is not None and self.between[0] > self.between[1]:
            return f"between {list(self.between)} is empty (t1 > t2)"
        if self.min is not None and self.max is not None and self.min > self.max:
            return f"{w} needs min <= max"
        return None


Line = Union[Header, Tu, Favorite, History, ChatLog, MailLog, Login, Logout, Online, Message, Like,
             Mail, MailReadLine, EmailLine, NotificationLine, Limits, SystemLine, DialogCreatedLine,
             Icebreaker, ChatRequestLine, Block, Unblock, Crash, StackFault, Target, Rule, Group, Emit,
             TargetFault, Manage, Expect]
INITIAL = (Tu, History, ChatLog, MailLog, Target, Rule, Group)  # never timeline; Favorite is either
KINDS = sorted(c.__struct_config__.tag for c in Line.__args__)  # type: ignore[attr-defined]



def _parse_iso(s: str) -> float:
    return datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()
