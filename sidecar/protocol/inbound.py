"""The bridge's method catalogue (DESIGN §4), Electron → sidecar: one msgspec Struct per
request method's params (``INBOUND``), the manage API's included.  The sidecar → Electron side
(notifications, ``platform.request``) is :mod:`sidecar.protocol.outbound`; the answers are
:mod:`sidecar.protocol.answers`.  ``sidecar schema`` prints the JSON Schema generated from these
Structs; it is the truth for the Electron team.  Unknown fields are ignored: Electron may send more.

Times on the wire are unix seconds (UTC) as floats unless a field says ISO.  Every integer is
bounded here (int64 or tighter) and every enum is a ``Literal``, so an out-of-range number or a
list where a name goes is a -32602 naming the field, decided by msgspec before any handler runs.
"""
from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from sidecar.protocol.paging import INT64_MAX, Cursor, Limit, Weight
from sidecar.protocol.patterns import NO_CONTROL
from sidecar.protocol.polls import MAX_POLL_ANSWERS, AheadS, PollAnswer
from sidecar.protocol.rules import Priority, RuleAction, RuleChanges, RuleConditions
from sidecar.protocol.version import PROTOCOL_MAJOR

# a TU / RU / task id: no control characters (NUL, newline …), which would reach logs raw
Id = Annotated[str, msgspec.Meta(min_length=1, max_length=256, pattern=NO_CONTROL)]
Project = Literal["golden", "chathouse", "prime"]
Int64 = Annotated[int, msgspec.Meta(ge=-INT64_MAX - 1, le=INT64_MAX)]  # SQLite's INTEGER
Count = Annotated[int, msgspec.Meta(ge=0, le=INT64_MAX)]  # a count, a limit, a seq


class Params(msgspec.Struct, kw_only=True, forbid_unknown_fields=False):
    """Base of every params Struct."""


class PollsAsked(Params, kw_only=True):
    """The two optional params of ``clock.advance_to`` and ``platform.events`` on the virtual
    clock (:mod:`sidecar.protocol.polls`): ``polls_ahead_s`` asks for ``polls`` in the answer;
    ``poll_answers`` are answers to passes an earlier answer listed."""

    polls_ahead_s: AheadS | None = None
    poll_answers: Annotated[list[PollAnswer], msgspec.Meta(max_length=MAX_POLL_ANSWERS)] | None = None


# ---- Electron → sidecar -------------------------------------------------------------------

class Auth(Params, kw_only=True):
    """First frame; ``token``: the per-launch secret; ``protocol``: the client's ``"MAJOR.MINOR"`` (another
    major: -32602, close 4426); ``capabilities``: what it serves (None: unknown).  ``bridge.auth`` rule 5."""

    token: str
    client: str = "electron"
    version: str = ""
    protocol: Annotated[str, msgspec.Meta(pattern=rf"^{PROTOCOL_MAJOR}\.[0-9]+$")] = "1.0"  # this major's
    capabilities: list[Annotated[str, msgspec.Meta(max_length=64)]] | None = None


class SessionLogin(Params, kw_only=True):
    """The operator opened a TU; runs restore (DESIGN §9)."""

    tu: Id
    project: Project
    operator: str = ""


class SessionLogout(Params, kw_only=True):
    tu: Id


class PlatformEvent(Params, kw_only=True):
    """A raw platform socket event, as the platform sent it (platform_clients decode it).
    ``data`` stays undecoded JSON (``msgspec.Raw``): the project client decodes it once,
    straight into the event's own Struct."""

    project: Project
    tu: Id
    name: str
    data: msgspec.Raw
    received_at: float | None = None


class BatchEvent(PlatformEvent, kw_only=True):
    """One event of ``platform.events``: a :class:`PlatformEvent` plus ``if_open`` (a task id;
    a replayed operator's answer, handled only if that task is still open when the event's turn
    comes — see :class:`PlatformEvents`).  ``platform.event`` has no ``if_open``: it refuses one
    (-32602, :class:`PlatformEventIn`) rather than run a conditional event unconditionally."""

    if_open: str | None = None


class PlatformEventIn(PlatformEvent, kw_only=True):
    """How ``platform.event`` decodes its params: :class:`PlatformEvent` (the schema's), and an
    ``if_open`` member — a :class:`BatchEvent` field only — is refused naming it (breaker 16
    F5: it used to be accepted and ignored)."""

    if_open: Any = msgspec.UNSET

    def __post_init__(self) -> None:
        if self.if_open is not msgspec.UNSET:
            raise ValueError("if_open is a platform.events item field (an event run only if that task"
                             " is still open); platform.event does not take it — send it in platform.events")


class PlatformEvents(PollsAsked, kw_only=True):
    """A burst of raw platform socket events: handled in order, each its own
    step, all committed in ONE transaction.  Answer :class:`~sidecar.protocol.answers.EventsAnswer`:
    one result per event taken, in order; a refused event (bad raw event, TU not logged in) is
    an error result and changes nothing, the others are handled.

    Virtual clock only: an event whose ``received_at`` (unix seconds) is later than the clock
    first advances the clock to it exactly as ``clock.advance_to`` would (the timers due
    meanwhile run first, each at its instant), so a replayer sends every event up to its next
    sync point in one frame; every delivery — Stack's flushes included — goes out at its own
    instant inside the call, stamped with it (``Sidecar-Virtual-At``).  Every event is taken
    unless ``stop_at_due`` (below).  On the wall clock ``received_at`` is informational, as in
    ``platform.event``, and every event is taken.

    ``stop_at_due`` (virtual clock; a replayer that must see what the sidecar does by itself
    before it sends later events): stop before any event but the first when a timer or a
    delivery pass of the sidecar's own is due at or before its ``received_at`` — so between
    the events of one call only the events run — and answer ``taken`` < len(events).  A
    replayer that answers ``platform.request`` as of its ``at`` and records HTTP calls at their
    ``Sidecar-Virtual-At`` stamp needs no stop: the sidecar's timers run between the events,
    each at its instant, exactly as ``clock.advance_to`` would run them.

    An event with ``if_open`` (a task id; a replayed operator's answer, whose operator answers
    only a task still open) is handled only if that task is open when its turn comes, after the
    advance to its ``received_at``; otherwise it is skipped — nothing runs, its result is
    ``{"ok": true, "skipped": true, "events": 0}`` — and the ``platform.request`` calls after it
    list it in ``batch_skipped``."""

    events: list[BatchEvent]
    stop_at_due: bool = False


class PlatformReconnected(Params, kw_only=True):
    """Electron's platform socket for a TU reconnected: events may have been missed, so the
    sidecar runs check chat again (seed 003: "при реконекті сокета")."""

    project: Project
    tu: Id


class PlatformPoll(Params, kw_only=True):
    """A poll result Electron made on its own (same shape as the platform.request answer)."""

    project: Project
    tu: Id
    pass_: str = msgspec.field(name="pass")
    data: Any = None


class FavoriteUpdate(Params, kw_only=True):
    """A favorite's attributes changed (Stack or the operator's UI); absent fields keep value."""

    tu: Id
    ru: Id
    project: Project | None = None
    active: bool | None = None
    is_white: bool | None = None
    spend_30d_usd: float | None = None
    spend_total_usd: float | None = None
    paid_actions: Count | None = None
    paid_with_bonuses_only: bool | None = None
    chat_limit: Int64 | None = None
    mail_limit: Int64 | None = None
    blocked_by_tu: bool | None = None
    blocked_by_ru: bool | None = None


class TaskClose(Params, kw_only=True):
    """The operator acted on a task (answered / dismissed)."""

    task_id: Id
    reason: Literal["answered", "dismissed"] = "answered"  # the rest are the sidecar's own


class StreamAck(Params, kw_only=True):
    """Outbound frames up to ``seq`` are shown (decoded by the bridge, ``bridge.session._Ack``); a
    ``seq`` beyond the last issued is -32602 ``seq``, nothing released; an old one is harmless."""

    seq: Count


class ClockAdvance(PollsAsked, kw_only=True):
    """Virtual clock only: run every timer due up to ``t`` (unix seconds), then answer
    (``polls_ahead_s`` / ``poll_answers``: :class:`PollsAsked`)."""

    t: float


class TasksList(Params, kw_only=True):
    """The open tasks (of ``tu``; absent: every TU) in the operator's order.  ``limit`` (1..1000)
    / ``cursor`` (a page's ``next_cursor``) ask for a page ``{tasks, next_cursor?}``; neither: a bare list."""

    tu: str | None = None
    limit: Limit | None = None
    cursor: Annotated[str, msgspec.Meta(max_length=1024)] | None = None


class Status(Params, kw_only=True):
    pass


class SidecarShutdown(Params, kw_only=True):
    """Stop this sidecar gracefully (DESIGN §3) — the one graceful path on Windows, where Node's
    ``child.kill()`` is a hard kill.  Requests already read are answered first; every later one is
    refused -32002 (nothing done).  Answered ``{"ok": true, "abandoned": [...]}`` once the step
    under way committed, the delivery flush at exit ran and the store is closed; then the
    connection closes (1001) and the process exits 0 (``abandoned``: close stages that overran
    their bound — unsent deliveries stay queued for the next start; empty normally)."""


LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]  # logging's names, a closed enum


class LogsSubscribe(Params, kw_only=True):
    """Send this connection the sidecar's log records at ``level`` or above as ``log``
    notifications, outside the stream (:mod:`sidecar.app.log_feed`); again: the level changes live.
    Ends with ``logs.unsubscribe`` or the connection.  Answer ``{"ok", "level", "process_level"}``."""

    level: LogLevel


class LogsUnsubscribe(Params, kw_only=True):
    """No more ``log`` notifications (harmless without a subscription).  Answer ``{"ok": true}``."""


class StackFlush(Params, kw_only=True):
    """Send every due Stack write now, ignoring the flush cadence (``stack_flush_interval_s``,
    virtual clock): call it before reading Stack elsewhere (another machine's login, a check of
    a marker).  A write waiting for a retry (5 s, 15 s, 30 s, 1 min, 2 min after a failed
    attempt) is not due yet and stays queued.  Answer ``{"acked", "failed", "pending",
    "waiting"?}``: writes acknowledged and writes whose attempt failed in this flush, Stack
    writes still queued after it, and when ``pending`` > 0 ``waiting {state, until, reason}``:
    why they wait — ``cooldown`` / ``need_check`` / ``resting`` (the ``stack`` sender's health)
    or ``retry`` (their next flush instant) — and until when (unix seconds; None in Need
    Check)."""


class Why(Params, kw_only=True):
    """The pair's decision log (DESIGN §13), oldest first: every candidate with its outcome
    (``created`` / ``refused:<reason>`` / ``miss``) and every chain removal with its reason.
    ``since``: unix seconds (default: everything kept, 7 days); one page of at most ``limit``
    (1..1000, default 1000) decisions after ``after_id`` (the previous answer's ``next``).
    Answer ``{"tu", "ru", "since", "decisions": [{"id", "at", "type", "source", "outcome",
    "task_id", "detail", "text"}], "next": id | null}``, never past the frame cap."""

    tu: Id
    ru: Id
    since: float | None = None
    after_id: Cursor | None = None
    limit: Limit | None = None  # null / absent: 1000


# ---- sender health: the manage API (seed 000 §6; DESIGN §10 "Management") ------------------
# Bad input — a duplicate priority, a window that does not parse, more than 500 items, an
# unknown sender or group — is a -32602 whose ``data.field`` names the field; nothing changes.

Unset = msgspec.UnsetType
UNSET = msgspec.UNSET
SenderName = Annotated[str, msgspec.Meta(min_length=1, max_length=200)]


class GroupsList(Params, kw_only=True):
    """Every group, highest priority first.  Answer ``{"groups": [GroupView]}``."""


class GroupRef(Params, kw_only=True):
    """``groups.get`` / ``groups.delete``: the group's ``id``, or ``group`` = its id or its name
    (a name must name exactly one group)."""

    id: str | None = None
    group: str | None = None


class GroupFields(Params, kw_only=True, forbid_unknown_fields=True):
    """A group's fields (seed 000 §6): ``failed_in_row`` (0 = default 2, 1 = every failure),
    ``cooldown_delay_from/to`` minutes (both > 0 replace the ladder), ``send_from/to_message_
    interval`` seconds (pacing), ``from_time``/``to_time`` ``HH:MM[:SS]`` UTC (may cross midnight;
    start inclusive, end exclusive; both null = always), ``priority`` unique, larger wins."""

    name: str | Unset = UNSET
    priority: Int64 | Unset = UNSET  # the manage API bounds it tighter (senders.groups.MAX_PRIORITY)
    failed_in_row: Count | None | Unset = UNSET
    cooldown_delay_from: float | None | Unset = UNSET
    cooldown_delay_to: float | None | Unset = UNSET
    send_from_message_interval: float | None | Unset = UNSET
    send_to_message_interval: float | None | Unset = UNSET
    from_time: str | None | Unset = UNSET
    to_time: str | None | Unset = UNSET


class GroupCreate(GroupFields, kw_only=True):
    """``groups.create``: ``name`` and ``priority`` required.  Answer ``{"group": GroupView}``."""


class GroupPatch(GroupFields, kw_only=True):
    """``groups.patch {id | group, …fields}``: any field; applies from the sender's next failure,
    never to a running cooldown.  ``group``: the id or the name.  Answer ``{"group": GroupView}``."""

    id: str | None = None
    group: str | None = None


class Assignments(Params, kw_only=True):
    """``groups.assignments.set|add|remove`` (sender-centric): ``items`` = at most 500
    ``{"sender": name, "groups": [id…]}``.  Answer ``{"ok": true, "senders": n}``."""

    items: list[Any]


class GroupSenders(Params, kw_only=True):
    """``groups.senders.set|add|remove`` (group-centric): the group ``id`` and at most 500
    sender names.  Answer ``{"ok": true, "group": GroupView}``."""

    id: str | None = None
    group: str | None = None  # the id or the name, instead of ``id``
    senders: list[Any]


class SendersList(Params, kw_only=True):
    """Every sender with its health.  Answer ``{"senders": [SenderView]}``."""


class SenderRef(Params, kw_only=True):
    """``senders.get`` / ``senders.recover`` (manual recovery from cooldown or Need Check:
    counters reset, history code 106; ``by`` goes into the row's note; an active sender: a
    no-op).  Answer ``{"sender": SenderView}`` (recover: and ``"recovered": bool``)."""

    sender: SenderName
    by: Annotated[str, msgspec.Meta(min_length=1, max_length=200, pattern=NO_CONTROL)] = "manual"
    # ``by`` goes into a history row's note and the log: bounded, no control characters


class SenderHistory(Params, kw_only=True):
    """A sender's history rows since ``since`` (unix seconds), oldest first: one page of at most
    ``limit`` (1..1000, default 500) rows after ``after_id`` (the previous answer's ``next``).
    Answer ``{"sender", "rows": [{"id", "at", "code", "note"}], "next": id | null}``, never past
    the frame cap."""

    sender: SenderName
    since: float | None = None
    after_id: Cursor | None = None
    limit: Limit | None = None  # null / absent: 500
# ---- the router's management (DESIGN §10; sidecar/app/router.py) ------------------------------
# The types are checked here (an enum is a Literal, an integer bounded: -32602 naming the
# field); the values by the router itself (``sidecar.router.model.parse_rule`` /
# ``parse_event``: a blank name, an unknown target …), whose errors name the field too (-32602
# with ``data.field``); unknown fields are refused here.  ``null`` is the same as absent.

class RulesList(Params, kw_only=True):
    """The rules in application order (weight, then name), one page: at most ``limit`` (1..1000,
    default 1000) after ``after`` = ``[weight, name]`` (the previous answer's ``next``).
    Answer ``{"rules": [rule…], "match_mode", "next": [weight, name] | null}``, never past the
    frame cap."""

    after: tuple[Weight, str] | None = None
    limit: Limit | None = None  # null / absent: 1000


class RulesCreate(Params, kw_only=True, forbid_unknown_fields=True):
    """A new rule (DESIGN §10): ``name``, ``conditions`` {source?, subjects?, actions?,
    priority_min?, payload?}, ``actions`` [{target, template?}], ``throttle_seconds``?,
    ``weight``?, ``enabled``?.  Answer ``{"ok", "rule"}``."""

    name: str | None = None
    conditions: RuleConditions | None = None
    actions: list[RuleAction] | None = None
    throttle_seconds: float | None = None
    weight: Weight | None = None
    enabled: bool | None = None


class RulesPatch(Params, kw_only=True, forbid_unknown_fields=True):
    """``changes`` (any rule field but ``name``) merged over the rule ``name``."""

    name: str | None = None
    changes: RuleChanges | None = None


class RulesDelete(Params, kw_only=True, forbid_unknown_fields=True):
    name: str | None = None


class DeliveriesList(Params, kw_only=True, forbid_unknown_fields=True):
    """The delivery audit by seq, one page: ``status``?, ``target``?, ``since``? (events at or
    after, unix seconds), ``after_seq``? (the previous answer's ``next``), ``limit``? (1..1000,
    default 1000).  Answer ``{"deliveries": [...], "next": seq | null}``: a page never exceeds
    the frame cap (``sidecar.protocol.paging``); pass ``next`` back as ``after_seq`` until it is null."""

    status: Literal["pending", "delivered", "failed", "skipped", "duplicate"] | None = None
    target: str | None = None
    since: float | None = None
    after_seq: Cursor | None = None
    limit: Limit | None = None  # null / absent: 1000


class EventsEmit(Params, kw_only=True, forbid_unknown_fields=True):
    """Electron routes an event of its own (DESIGN §10): ``source`` (not the sidecar's own),
    ``subject``, ``action``, ``priority``?, ``payload``?, ``dedup_key``?, ``ttl_s``?."""

    source: str | None = None
    subject: str | None = None
    action: str | None = None
    priority: Priority | None = None  # null / absent: normal
    payload: dict[str, Any] | None = None
    dedup_key: str | None = None
    ttl_s: float | None = None


INBOUND: dict[str, type[Params]] = {
    "auth": Auth,
    "session.login": SessionLogin,
    "session.logout": SessionLogout,
    "platform.event": PlatformEvent,
    "platform.events": PlatformEvents,
    "platform.poll": PlatformPoll,
    "platform.reconnected": PlatformReconnected,
    "favorite.update": FavoriteUpdate,
    "task.close": TaskClose,
    "stream.ack": StreamAck,
    "clock.advance_to": ClockAdvance,
    "tasks.list": TasksList,
    "status": Status,
    "logs.subscribe": LogsSubscribe,
    "logs.unsubscribe": LogsUnsubscribe,
    "stack.flush": StackFlush,
    "sidecar.shutdown": SidecarShutdown,
    "why": Why,
    "groups.list": GroupsList,
    "groups.get": GroupRef,
    "groups.create": GroupCreate,
    "groups.patch": GroupPatch,
    "groups.delete": GroupRef,
    **{f"groups.assignments.{m}": Assignments for m in ("set", "add", "remove")},
    **{f"groups.senders.{m}": GroupSenders for m in ("set", "add", "remove")},
    "senders.list": SendersList,
    "senders.get": SenderRef,
    "senders.history": SenderHistory,
    "senders.recover": SenderRef,
    "rules.list": RulesList,
    "rules.create": RulesCreate,
    "rules.patch": RulesPatch,
    "rules.delete": RulesDelete,
    "deliveries.list": DeliveriesList,
    "events.emit": EventsEmit,
}
