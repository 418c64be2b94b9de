"""The scenario's line kinds (``shared/scenarios/README.md``): the base every line Struct derives
from, the header and the initial world; the timeline's kinds are :mod:`electron_stub.lines_timeline`,
and :mod:`electron_stub.scenario` (which re-exports both) decodes with their union.

Rules / theory of operation
---------------------------
* Every line Struct derives from :class:`Base` and is tagged by ``kind`` (``scenario.Line`` is the
  tagged union the parser decodes with).  Unknown keys are ignored; enumerated values (``project``,
  ``from``, ``by``, ``what``, ``mode``, notification ``type``) are ``Literal`` types, so msgspec
  rejects a bad value with the JSON path of the key.
* :meth:`Base.check` adds the cross-field rules msgspec cannot express (a like kind of the right
  project, an ``expect``'s required keys, a non-empty window …) and returns what is wrong.
* ``t`` is seconds from the header's ``start`` (float); ``lineno`` is set by the parser.
  Initial-world kinds (``scenario.INITIAL``: ``tu``, ``history``, ``chat_log``, ``mail_log`` and
  the routing world's ``target``, ``rule``, ``group``) never take ``t``; ``favorite`` is initial
  without ``t`` and a partial timeline change with it.
"""
from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

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
    "Target",
    "Rule",
    "Group",
    "PROJECTS",
    "LIKE_KINDS",
    "Project",
    "Side",
    "FAVORITE_ATTRS",
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
    """A profile.  ``stack_favorites`` False (README revision 2): the reference Stack's startup
    data for this TU has **no** ``favorites`` key (Stack has no list, DESIGN §9/§12.5); its
    ``favorite`` lines then exist in the platform's world only."""

    project: Project
    tu: str
    operator: str = ""
    stack_favorites: bool = True


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


def _parse_iso(s: str) -> float:
    return datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()
