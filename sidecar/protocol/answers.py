"""The answers (JSON-RPC ``result``) of every request, for ``sidecar schema``.

Rules / theory of operation
---------------------------
* One struct per Electron → sidecar request method (``ANSWERS``), and the answer Electron gives
  to the sidecar's own ``platform.request`` (``PLATFORM_ANSWER``: the platform's JSON as is,
  which the project's client decodes — see ``platform_clients/``).
* On the virtual clock every object answer also carries ``next_due`` (unix seconds or null): the
  earliest instant the sidecar acts by itself, so a driver may jump straight to it.
* Errors are JSON-RPC error objects; their codes are in docs/architecture.md ("error codes").
* ``tests/protocol/test_protocol_answers.py`` checks the real answers against these structs, so
  the schema cannot drift from what the sidecar sends.
"""
from __future__ import annotations

from typing import Any

import msgspec

from sidecar.protocol.contract import ErrorData
from sidecar.protocol.inbound import LogLevel
from sidecar.protocol.outbound import TaskView
from sidecar.protocol.polls import PollAhead

__all__ = ["ANSWERS", "PLATFORM_ANSWER"]


class Answer(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    next_due: float | None = None  # virtual clock only (see the module header)


class Ok(Answer, kw_only=True):
    ok: bool


class AuthAnswer(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """``protocol``: the sidecar's contract version ``"MAJOR.MINOR"``; ``capabilities``: what it
    supports (:data:`sidecar.protocol.contract.CAPABILITIES`); ``last_seq``: the last stream seq
    issued; ``stream_id``: this process's stream (a new process starts a new stream: re-read
    ``tasks.list``)."""

    ok: bool
    protocol: str
    capabilities: list[str]
    last_seq: int
    stream_id: str


class LoginAnswer(Ok, kw_only=True):
    favorites: int  # favorites known for the TU after the restore
    restored_from_stack: bool  # False: Stack was unavailable, restored from local state
    # True: Stack answered with no favorites list for the TU (startup ``favorites`` missing or
    # null, not ``[]``): no follow-ups until it has one; the shift lead is alerted (DESIGN §12.5).
    # False also when Stack was unavailable: then nobody knows, and the local cache stands in.
    no_favorites_list: bool
    open_tasks: int


class EventAnswer(Ok, kw_only=True):
    events: int  # domain events the raw event became


class EventError(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    code: int  # JSON-RPC error code: -32602 (a refused event)
    message: str
    data: ErrorData | None = None  # {"field": …} as a -32602's data (sidecar.domain.errors)


class EventResult(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    """One event of a ``platform.events`` batch: ``ok`` with the domain events it became, or
    ``error`` (it was refused and changed nothing).  ``seq``: the stream's last seq once this
    event's step was sent — the notifications up to it include everything it caused.
    ``skipped``: an ``if_open`` event whose task was no longer open: nothing ran."""

    ok: bool
    events: int = 0
    seq: int = 0
    error: EventError | None = None
    skipped: bool = False


class EventsAnswer(Answer, kw_only=True):
    """``taken``: how many of the events were handled (all of them unless ``stop_at_due``
    stopped before a timer of the sidecar's own, see ``platform.events``); ``results``: one per
    event taken;
    ``now``: the clock after them (unix seconds)."""

    taken: int
    results: list[EventResult]
    now: float | None
    # asked by polls_ahead_s / given poll_answers (sidecar.protocol.polls); absent otherwise
    polls: list[PollAhead] | msgspec.UnsetType = msgspec.UNSET
    poll_answers_used: list[int] | msgspec.UnsetType = msgspec.UNSET


class CloseAnswer(Ok, kw_only=True):
    closed: bool  # False: the task was already closed (idempotent)


class LogsAnswer(Ok, kw_only=True):
    """``logs.subscribe``: ``ok`` false when the connection that asked is gone (nothing was
    subscribed); ``level`` the one asked; ``process_level`` the sidecar's ``--log-level``: records
    below it are never made, so none below it arrive whatever ``level`` says."""

    level: LogLevel
    process_level: LogLevel


class AdvanceAnswer(Answer, kw_only=True):
    """``now``: the virtual clock after the advance (unix seconds); ``polls`` /
    ``poll_answers_used``: :mod:`sidecar.protocol.polls` (absent unless asked / given)."""

    now: float
    polls: list[PollAhead] | msgspec.UnsetType = msgspec.UNSET
    poll_answers_used: list[int] | msgspec.UnsetType = msgspec.UNSET


class StackWaiting(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Why Stack's writes stay pending after a ``stack.flush``.  ``state``: ``cooldown`` (the
    ``stack`` sender is in cooldown: ``until`` = its modelled exit), ``need_check`` (``until``
    None: waits for ``senders.recover``), ``resting`` (paced or resting after a release until
    ``until``), ``retry`` (the sender may send: the writes wait for their next flush instant
    ``until`` — a retry on Stack's 5 s … 2 min ladder, or the flush grid).  ``until`` unix
    seconds; ``reason`` the text a shift lead reads (UTC)."""

    state: str
    until: float | None
    reason: str


class StackFlushAnswer(Answer, kw_only=True):
    acked: int  # Stack writes acknowledged by this flush
    failed: int  # writes whose attempt failed in it (each retried on Stack's ladder)
    pending: int  # Stack writes still queued after it
    waiting: StackWaiting | None = None  # why they stay queued; None when pending is 0


class ShutdownAnswer(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """``sidecar.shutdown``'s answer, sent once the store is closed, just before the 1001 close
    (no ``next_due``: the process is ending).  ``abandoned``: the close stages that overran their
    bound, e.g. ``"delivery flush at exit (over 0.40 s)"`` — what they had not sent stays queued
    in SQLite for the next start; empty after a clean stop."""

    ok: bool = True
    abandoned: list[str]


class TasksPage(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A page of ``tasks.list`` (asked with ``limit`` or ``cursor``; :mod:`sidecar.app.task_pages`):
    ``tasks`` in the operator's order; ``next_cursor``: pass it back as ``cursor`` for the next page,
    absent on the last page."""

    tasks: list[TaskView]
    next_cursor: str | msgspec.UnsetType = msgspec.UNSET


class StoreCounts(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """``hops``: functions run on the SQLite connection's thread (one event-loop thread hop
    each); ``commits``: transactions of steps (one per step, or per group of steps: the timers
    of one advance, one ``platform.events`` batch); ``ops``: the writes they carried."""

    hops: int
    commits: int
    ops: int


class StatusAnswer(Answer, kw_only=True):
    version: str
    protocol: int
    clock: str  # wall | virtual
    now: float | None  # None: virtual clock not set yet
    tus: list[str]
    open_tasks: int
    timers: int
    events_in: int
    stack_acked: int
    outbox_due: float | None
    store: StoreCounts  # what the store did since this process opened it




class DecisionRow(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """One decision-log row (DESIGN §13; :mod:`sidecar.runtime.decisions`).  ``at``: unix seconds."""

    id: int  # the log's order; the page cursor
    at: float
    type: str  # task type of the candidate (follow_up_message for chain removals)
    source: str  # the trigger: socket, chain, over_60m, follow_up_pass, notification, scroll_new …
    outcome: str  # created | refused:<reason> | miss | removed:<reason>
    task_id: str | None
    detail: dict[str, Any]  # e.g. {"step": 1, "chance": 0.75}
    text: str  # the same decision as one sentence for a shift lead


class WhyAnswer(Answer, kw_only=True):
    """The pair's decisions at or after ``since`` (unix seconds, null = all kept), in order."""

    tu: str
    ru: str
    since: float | None
    decisions: list[DecisionRow]
    next: int | None  # the ``after_id`` of the next page; None = no more rows


class GroupView(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A sender group (seed 000 §6): delays in minutes, intervals in seconds, UTC window text."""

    id: str
    name: str
    priority: int
    failed_in_row: int
    cooldown_delay_from: float
    cooldown_delay_to: float
    send_from_message_interval: float
    send_to_message_interval: float
    from_time: str | None
    to_time: str | None
    senders: list[str]


class SenderView(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A sender's health: ``cooldown_end`` / ``next_send_at`` unix seconds (``next_send_at``
    covers pacing and the 10 min rest after a release); ``groups``: group ids (the built-in
    ``builtin-stack`` for ``stack``)."""

    sender: str
    state: str  # active | cooldown | need_check
    failed_in_row: int
    cooldown_times: int
    cooldown_end: float | None
    need_check_path: str | None  # A (ladder exhausted) | B (warm-up failed terminally)
    next_send_at: float
    groups: list[str]


class HistoryRowView(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    id: int  # the history's order; the page cursor
    at: float
    code: int  # 100 finished, 101 started, 102 extended, 103 Need Check, 104/105 warm-up, 106, 109
    note: str


class GroupsAnswer(Answer, kw_only=True):
    groups: list[GroupView]


class GroupAnswer(Answer, kw_only=True):
    group: GroupView


class AssignmentsAnswer(Ok, kw_only=True):
    senders: int  # items applied


class GroupSendersAnswer(Ok, kw_only=True):
    group: GroupView


class SendersAnswer(Answer, kw_only=True):
    senders: list[SenderView]


class SenderAnswer(Answer, kw_only=True):
    sender: SenderView


class RecoverAnswer(SenderAnswer, kw_only=True):
    recovered: bool  # False: the sender was active, nothing was changed or written


class HistoryAnswer(Answer, kw_only=True):
    sender: str
    rows: list[HistoryRowView]
    next: int | None  # the ``after_id`` of the next page; None = no more rows
class RulesAnswer(Answer, kw_only=True):
    rules: list[dict[str, Any]]  # {name, conditions, actions, throttle_seconds, weight, enabled}
    match_mode: str  # all | first
    next: tuple[int, str] | None  # the ``after`` of the next page; None = no more rules


class RuleChanged(Ok, kw_only=True):
    rule: dict[str, Any]  # the rule as stored (deleted: as it was)


class DeliveryRow(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """One row of the audit (DESIGN §10); instants unix seconds; no secret is ever stored."""

    id: str  # the webhook-id / "<event_id>.<n>"
    event_id: str
    event_at: float
    source: str
    subject: str
    action: str
    priority: str
    rule: str | None  # None: the built-in Stack route
    channel: str
    target: str
    status: str  # pending | delivered | failed | skipped | duplicate
    message: str  # what the channel sends (telegram text, JSON body); cut at 16 Ki characters
    message_cut: bool  # the message was cut for the list (the row keeps it whole)
    attempts: int
    next_attempt_at: float | None
    expires_at: float | None
    last_error: str | None
    note: str | None  # why skipped / duplicate / critical bypass
    delivered_at: float | None
    pair: str | None
    idem_key: str | None
    method: str | None
    path: str | None
    tu: str | None
    ru: str | None
    seq: int


class DeliveriesAnswer(Answer, kw_only=True):
    deliveries: list[DeliveryRow]  # one page, by seq
    next: int | None  # the ``after_seq`` of the next page; None = no more rows


class EmitAnswer(Ok, kw_only=True):
    event_id: str | None  # the event's id (its deliveries are "<event_id>.<n>"); of a duplicate:
    # the FIRST event's (None when its key was accepted before schema v7), seed 002 ingest
    deduplicated: bool = False  # the event was a duplicate inside the dedup window (seed 002)


ANSWERS: dict[str, Any] = {
    "auth": AuthAnswer,
    "session.login": LoginAnswer,
    "session.logout": Ok,
    "platform.event": EventAnswer,
    "platform.events": EventsAnswer,
    "platform.poll": Ok,
    "platform.reconnected": Ok,
    "favorite.update": Ok,
    "task.close": CloseAnswer,
    "stream.ack": Ok,
    "clock.advance_to": AdvanceAnswer,
    "tasks.list": list[TaskView] | TasksPage,
    "status": StatusAnswer,
    "logs.subscribe": LogsAnswer,
    "logs.unsubscribe": Ok,
    "stack.flush": StackFlushAnswer,
    "sidecar.shutdown": ShutdownAnswer,
    "why": WhyAnswer,
    "groups.list": GroupsAnswer,
    "groups.get": GroupAnswer,
    "groups.create": GroupAnswer,
    "groups.patch": GroupAnswer,
    "groups.delete": Ok,
    **{f"groups.assignments.{m}": AssignmentsAnswer for m in ("set", "add", "remove")},
    **{f"groups.senders.{m}": GroupSendersAnswer for m in ("set", "add", "remove")},
    "senders.list": SendersAnswer,
    "senders.get": SenderAnswer,
    "senders.history": HistoryAnswer,
    "senders.recover": RecoverAnswer,
    "rules.list": RulesAnswer,
    "rules.create": RuleChanged,
    "rules.patch": RuleChanged,
    "rules.delete": RuleChanged,
    "deliveries.list": DeliveriesAnswer,
    "events.emit": EmitAnswer,
}
PLATFORM_ANSWER: Any = dict[str, Any]  # the platform API's own JSON object


class RequestError(msgspec.Struct, kw_only=True):
    code: int
    message: str
    data: Any = None


class RequestResult(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One answer of ``platform.requests``: ``result`` (the platform's JSON) or ``error``."""

    result: Any = None
    error: RequestError | None = None


class PlatformRequestsAnswer(msgspec.Struct, kw_only=True):
    """What Electron answers to ``platform.requests``: one result per request, in order."""

    results: list[RequestResult]
