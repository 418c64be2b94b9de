"""The scenario's timeline line kinds (``shared/scenarios/README.md``): every line with ``t`` —
the platform's and the operator's events, Stack faults and crashes, the routing world's events,
faults and management calls, and the expectations.  The base, the header and the initial world
are :mod:`electron_stub.lines`; :mod:`electron_stub.scenario` re-exports both.

Rules / theory of operation
---------------------------
* As :mod:`electron_stub.lines` says: tagged by ``kind``, unknown keys ignored, enumerated values
  are ``Literal`` types; :meth:`~electron_stub.lines.Base.check` adds the cross-field rules (a
  like kind of the right project, a line of one project only, an ``expect``'s required keys …).
"""
from __future__ import annotations

from typing import Any, Literal

import msgspec

from electron_stub.lines import LIKE_KINDS, Base, Project, Side

__all__ = [
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
    "SocketDown",
    "Reconnect",
    "EmptyDialog",
    "MutualLike",
    "Crash",
    "StackFault",
    "Emit",
    "TargetFault",
    "Manage",
    "Expect",
]


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


class SocketDown(Base, tag="socket_down", kw_only=True):
    """The TU's platform socket drops (README revision 2): world events meant for it are not
    delivered as socket events from here on; the world still changes and passes still see it."""

    project: Project
    tu: str


class Reconnect(Base, tag="reconnect", kw_only=True):
    """The TU's platform socket is back: Electron sends ``platform.reconnected {project, tu}``
    and socket events resume (seed 003: check chat «при реконекті сокета»)."""

    project: Project
    tu: str


class EmptyDialog(Base, tag="empty_dialog", kw_only=True):
    """A not-yet-created dialog (id null, no messages) with ``ru`` appears in Chathouse tab new
    (seed 003, Open Limits: «вкладка new — ще не створений діалог (id=null, без повідомлень)»)."""

    project: Project
    tu: str
    ru: str

    def check(self) -> str | None:
        return None if self.project == "chathouse" else "empty_dialog exists on chathouse only (tab new)"


class MutualLike(Base, tag="mutual_like", kw_only=True):
    """A mutual like with ``ru`` appears in Chathouse tab new (seed 003, Open Limits:
    «… або взаємний лайк»)."""

    project: Project
    tu: str
    ru: str

    def check(self) -> str | None:
        return None if self.project == "chathouse" else "mutual_like exists on chathouse only (tab new)"


class Crash(Base, tag="crash", kw_only=True):
    pass


class StackFault(Base, tag="stack", kw_only=True):
    mode: Literal["down", "up", "error_rate", "latency", "refuse"]
    value: float | None = None

    def check(self) -> str | None:
        if self.mode == "refuse" and self.value is not None and (self.value < 1 or not float(self.value).is_integer()):
            return "stack refuse takes a whole number of writes >= 1 (default 1)"
        if self.mode == "error_rate" and (self.value is None or not 0.0 <= self.value <= 1.0):
            return "stack error_rate needs a value in [0, 1]"
        if self.mode == "latency" and (self.value is None or self.value < 0):
            return "stack latency needs a value >= 0 (seconds)"
        return None


# ---- routing timeline (DESIGN §10; README "Routing world") ---------------------------------

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
    mode: Literal["down", "up", "error_rate", "latency", "terminal", "probe_fail", "rate_limit", "hang"]
    value: float | None = None


class Manage(Base, tag="manage", kw_only=True):
    """A management call (``groups.*``, ``senders.*``, ``rules.*``); ``error`` = the expected JSON-RPC code."""

    method: str
    params: dict[str, Any] = msgspec.field(default_factory=dict)
    error: int | None = None


ExpectWhat = Literal["task_created", "no_task", "task_open", "task_closed", "count", "marker",
                     "task_overdue", "delivery", "sender", "history", "decision", "requests", "received"]

_EXPECT_NEEDS: dict[str, tuple[str, ...]] = {
    "task_created": ("type", "tu", "ru", "between"), "no_task": ("type", "tu", "ru", "between"),
    "task_open": ("type", "tu", "ru"), "task_closed": ("type", "tu", "ru"),
    "count": ("type", "between", "min", "max"), "marker": ("tu", "ru", "name"),
    "task_overdue": ("type", "tu", "ru"), "delivery": ("target", "between", "min", "max"),
    "sender": ("sender", "state"), "history": ("sender", "code", "between", "min", "max"),
    "decision": ("tu", "ru", "outcome", "between"),
    "requests": ("tu", "method", "between", "min", "max"),
    "received": ("target", "between", "min", "max"),  # README revision 2
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
    method: str | None = None  # ``requests``: the platform method (README revision 2)

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
