"""Tasks that answer the RU's own actions: Unanswered message / mail / e-mail, Like, Open Limits
and Open Limits (captcha) (DESIGN §6, seed 003 "План реалізації").

Rule 1.  Unanswered message: every RU chat message (socket) and every row of the unanswered column
         ("check chat": Chathouse tab ``new``, Prime criteria ``unanswered``).  Three messages in a
         row are one task — the Task Factory refuses a second open one, so the deadline stays at the
         first.  A column row is *covered* when a task of that type for the pair was created at or
         after the RU's last message: the column repeats what the socket already delivered, and a
         message whose task expired unanswered is not raised again by every 30-minute check.
Rule 2.  Unanswered mail: Golden stats ``EmailSend*``, Chathouse ``Send``/``inmail_message`` and
         stats ``inmail_send*``, Prime socket ``email`` and "check mail" (``inbox_unanswered``) at
         login.  Unanswered e-mail: deadline 12 h from the e-mail's receipt, not from now.
Rule 3.  Like: like kinds per project; created whatever the limits; on Chathouse/Prime with no chat
         limit but a mail limit it says "answer by mail" (``meta.answer_by``, DESIGN §12.4).
Rule 4.  Open Limits: never on Golden (no limits).  Chathouse: tab ``new`` (empty dialog, mutual
         like, icebreaker last) and the icebreaker socket event, gated by the cached chat limit.
         Prime: the system "limits opened" message / dialog created / criteria ``active`` scroll,
         gated by a **live** ``chat_restriction`` check (seed 003: the list's limits may be cached)
         and no block.  Prime's socket and scroll meet in **one condition** (seed 003 "Open Limits":
         "Сокет і скрол ведуть в одну умову: останнє повідомлення system + є ліміти + не
         заблокований, з VIP-дедупом"): the dialog row's last message is ``system``, the row says no
         block, the live limits are open, and no Open Limits was raised for that system message yet.
         ``dialog_created`` carries no row, so it reads the first page of criteria ``active`` (the
         newest dialogs) for it first.
Rule 5.  **A blocked RU gets no Open Limits**, favorite or not: blocks come from the dialog row when
         the signal has one, else from the pair's attributes, which every block event and dialog row
         refreshes for favorites and non-favorites alike (:meth:`InboundService.blocked`).  An
         **untouched** Chathouse empty dialog (no id, no messages) — and likewise a mutual like that
         no message followed — raises Open Limits once: it has no message instant, so any earlier
         Open Limits of the pair covers it (not every check chat anew: a standing mutual like would
         be raised again every 30 min and at each socket reconnect).
Rule 6.  Refusals that never reach the Task Factory go to the decision log (DESIGN §13).  Open
         Limits (captcha): every chat request.  A limit the sidecar does not know counts as absent
         (DESIGN §6): a Chathouse Open Limits signal with no known chat limit is refused
         (``limit_unknown``, in the decision log once per change) and kept; it is re-checked when
         the next dialog row or limits answer carries the limit.
"""
from __future__ import annotations

import logging
from typing import Any

import msgspec

from sidecar.runtime.decisions import record_outcome
from sidecar.domain import events as ev
from sidecar.domain.favorites import Favorite
from sidecar.domain.tasks import TaskType
from sidecar.runtime.factory import Candidate
from sidecar.services.base import Request, Service, Step

log = logging.getLogger("sidecar.inbound")

EPS = 1e-6
UNDATED = ("empty_dialog", "mutual_like")  # tab-new Open Limits rows that carry no message instant


class InboundService(Service):
    name = "inbound"

    def __init__(self, tu) -> None:
        super().__init__(tu)
        self.waiting_limit: dict[str, ev.OpenLimitsSignal] = {}  # ru -> signal refused limit_unknown

    def blocked(self, ru: str, row: ev.DialogSnapshot | None = None) -> bool:
        """Is the pair blocked either way?  The signal's own dialog row wins, then the pair's
        attributes (favorite or not), which every block event and dialog row refreshes
        (:meth:`~sidecar.runtime.tu.TuRuntime.note_row`, the engine's ``BlockChanged``)."""
        if row is not None:
            return row.blocked_by_tu or row.blocked_by_ru
        return self.tu.blocked(ru)

    def on_event(self, step: Step, event: ev.DomainEvent) -> None:
        match event:
            case ev.ChatIn():
                self._propose(step, TaskType.UNANSWERED_MESSAGE, event.ru, "socket")
            case ev.MailIn():
                self._propose(step, TaskType.UNANSWERED_MAIL, event.ru, event.source)
            case ev.EmailIn():
                self._propose(step, TaskType.UNANSWERED_EMAIL, event.ru, "socket",
                              anchor=event.received_at)
            case ev.LikeIn():
                self._like(step, event.ru, "socket")
            case ev.UnansweredSeen():
                if event.channel == "mail":
                    type_ = TaskType.UNANSWERED_MAIL
                elif event.kind == "like":
                    type_ = TaskType.LIKE
                else:
                    type_ = TaskType.UNANSWERED_MESSAGE
                if self._covered(event.ru, type_, event.last_at):
                    return
                if type_ is TaskType.LIKE:
                    self._like(step, event.ru, event.source)
                else:
                    self._propose(step, type_, event.ru, event.source)
            case ev.ChatRequestIn():
                if self.blocked(event.ru):  # Open Limits (captcha) is Open Limits: no block
                    record_outcome(step, self.tu, event.ru, TaskType.OPEN_LIMITS_CAPTCHA, "socket",
                                   "blocked")
                    return
                self._propose(step, TaskType.OPEN_LIMITS_CAPTCHA, event.ru, "socket")
            case ev.OpenLimitsSignal():
                self._open_limits(step, event)

    # Open Limits ------------------------------------------------------------------------------
    def _open_limits(self, step: Step, sig: ev.OpenLimitsSignal) -> None:
        rt = self.tu
        if not rt.client.has_limits:
            return  # Golden: no limits concept, the type does not apply (seed 003)
        since = sig.at
        if sig.reason in UNDATED and (sig.row is None or sig.row.last_at is None):
            # an untouched empty dialog or a mutual like nobody wrote after has no message
            # instant (seed 003 Open Limits, Chathouse tab new): any earlier Open Limits covers
            # it, or every check chat (30 min, each socket reconnect) raised it again
            since = float("-inf")
        if sig.source != "socket" and self._covered(sig.ru, TaskType.OPEN_LIMITS, since):
            return  # VIP dedup: this system message / dialog state was raised already
        if rt.factory.open_for(rt.tu, sig.ru, TaskType.OPEN_LIMITS) is not None:
            return
        if sig.source == "dialog_created" and sig.row is None:
            # the socket event has no row: read the newest dialogs (criteria active, page 0) and
            # apply the scroll's condition to this RU's row (seed 003 "одна умова")
            rt.request(step, self.name, "dialogs", {"criteria": ["active"], "cursor": 0},
                       tag="dialog_row", context=sig)
            return
        if self.blocked(sig.ru, sig.row):
            self._refuse(step, sig, "blocked")
            return
        if sig.needs_live_limits and sig.row is not None and sig.row.last_from != "system":
            self._refuse(step, sig, "not_system")
            return
        if sig.needs_live_limits:
            rt.request(step, self.name, "chat_restriction", {"ru": sig.ru}, tag="restriction",
                       context=sig)
            return
        limit = rt.limit(sig.ru, "chat")
        if limit is None:
            # unknown counts as absent (DESIGN §6); kept and re-checked when a limit arrives
            self.waiting_limit[sig.ru] = sig
            self._refuse(step, sig, "limit_unknown")
            return
        self.waiting_limit.pop(sig.ru, None)
        if limit <= 0:
            self._refuse(step, sig, "no_chat_limit")
            return
        self._propose(step, TaskType.OPEN_LIMITS, sig.ru, sig.source, meta={"reason": sig.reason})

    def _refuse(self, step: Step, sig: ev.OpenLimitsSignal, reason: str) -> None:
        record_outcome(step, self.tu, sig.ru, TaskType.OPEN_LIMITS, sig.source, reason,
                       detail={"reason": sig.reason})

    def on_favorite_changed(self, step: Step, ru: str, before: Favorite, after: Favorite) -> None:
        sig = self.waiting_limit.get(ru)
        if sig is not None and after.chat_limit is not None:
            self._open_limits(step, sig)  # the limit is known now: re-check (DESIGN §6)

    def on_result(self, step: Step, request: Request, result: Any, error: str | None) -> None:
        if request.tag not in ("restriction", "dialog_row"):
            return
        sig: ev.OpenLimitsSignal = request.context
        rt = self.tu
        if error is not None:
            log.warning("%s %s for %s failed: %s", rt.tu, request.method, sig.ru, error)
            return
        if request.tag == "dialog_row":
            snaps, _ = rt.client.decode_dialogs(result)
            row = next((s for s in snaps if s.ru == sig.ru), None)
            if row is None:
                self._refuse(step, sig, "dialog_not_listed")  # the active scroll finds it later
                return
            rt.snapshots[row.ru] = row
            rt.note_row(step, row)  # its blocks and limits, as a pass's row would (DESIGN §6)
            at = row.last_at if row.last_at is not None else sig.at
            self._open_limits(step, msgspec.structs.replace(sig, row=row, at=at))
            return
        limits = rt.client.decode_restriction(result)
        # a non-favorite's limits go to its pair attributes; it never becomes a favorite
        rt.update_favorite(step, sig.ru, {"chat_limit": limits.chatLimit,
                                          "mail_limit": limits.mailLimit})
        if limits.chatLimit > 0:
            self._propose(step, TaskType.OPEN_LIMITS, sig.ru, sig.source,
                          meta={"reason": sig.reason})
        else:
            self._refuse(step, sig, "no_chat_limit")

    # helpers ----------------------------------------------------------------------------------
    def _like(self, step: Step, ru: str, source: str) -> None:
        rt = self.tu
        meta = None
        if rt.client.has_limits:
            # an unknown chat limit counts as absent (DESIGN §6)
            if (rt.limit(ru, "chat") or 0) <= 0 and (rt.limit(ru, "mail") or 0) > 0:
                meta = {"answer_by": "mail"}
        self._propose(step, TaskType.LIKE, ru, source, meta=meta)

    def _propose(self, step: Step, type_: TaskType, ru: str, source: str, *,
                 anchor: float | None = None, meta: dict | None = None) -> None:
        self.tu.propose(step, Candidate(type_, ru, source, anchor, meta))

    def _covered(self, ru: str, type_: TaskType, last_at: float) -> bool:
        row = self.tu.last_task(ru, type_.value)
        return row is not None and row.created_at >= last_at - EPS
