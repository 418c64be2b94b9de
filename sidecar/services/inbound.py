"""Tasks that answer the RU's own actions: Unanswered message / mail / e-mail, Like, Open Limits
and Open Limits (captcha) (DESIGN §6, seed 003 "План реалізації").

Rules / theory of operation
---------------------------
* Unanswered message: every RU chat message (socket) and every row of the unanswered column
  ("check chat": Chathouse tab ``new``, Prime criteria ``unanswered``).  Three messages in a row
  are one task — the Task Factory refuses a second open one, so the deadline stays at the first.
* A column row is *covered* when a task of that type for the pair was created at or after the
  RU's last message: the column repeats what the socket already delivered, and a message whose
  task expired unanswered is not raised again by every 30-minute check.
* Unanswered mail: Golden stats ``EmailSend*``, Chathouse ``Send``/``inmail_message`` and stats
  ``inmail_send*``, Prime socket ``email`` and "check mail" (``inbox_unanswered``) at login.
* Unanswered e-mail: deadline 12 h from the e-mail's receipt, not from now.
* Like: like kinds per project; created whatever the limits; on Chathouse/Prime with no chat limit
  but a mail limit it says "answer by mail" (``meta.answer_by``, DESIGN §12.4).
* Open Limits: never on Golden (no limits).  Chathouse: tab ``new`` (empty dialog, mutual like,
  icebreaker last) and the icebreaker socket event, gated by the cached chat limit.  Prime: the
  system "limits opened" message / dialog created / criteria ``active`` scroll, gated by a **live**
  ``chat_restriction`` check (seed 003: the list's limits may be cached) and no block.
* Open Limits (captcha): every chat request.
* A limit the sidecar does not know counts as absent (DESIGN §6): a Chathouse Open Limits signal
  with no known chat limit is refused (``limit_unknown``) and kept; it is re-checked when the
  next dialog row or limits answer carries the limit.
"""
from __future__ import annotations

import logging
from typing import Any

from sidecar.domain import events as ev
from sidecar.domain.tasks import TaskType
from sidecar.factory import Candidate
from sidecar.services.base import Request, Service, Step

log = logging.getLogger("sidecar.inbound")

EPS = 1e-6


class InboundService(Service):
    name = "inbound"

    def __init__(self, tu) -> None:
        super().__init__(tu)
        self.waiting_limit: dict[str, ev.OpenLimitsSignal] = {}  # ru -> signal refused limit_unknown

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
                self._propose(step, TaskType.OPEN_LIMITS_CAPTCHA, event.ru, "socket")
            case ev.OpenLimitsSignal():
                self._open_limits(step, event)

    # Open Limits ------------------------------------------------------------------------------
    def _open_limits(self, step: Step, sig: ev.OpenLimitsSignal) -> None:
        rt = self.tu
        if not rt.client.has_limits:
            return  # Golden: no limits concept, the type does not apply (seed 003)
        if sig.source != "socket" and self._covered(sig.ru, TaskType.OPEN_LIMITS, sig.at):
            return
        if rt.factory.open_for(rt.tu, sig.ru, TaskType.OPEN_LIMITS) is not None:
            return
        if sig.needs_live_limits:
            rt.request(step, self.name, "chat_restriction", {"ru": sig.ru}, tag="restriction",
                       context=sig)
            return
        limit = rt.limit(sig.ru, "chat")
        if limit is None:
            log.debug("%s Open Limits for %s: refused:limit_unknown", rt.tu, sig.ru)
            self.waiting_limit[sig.ru] = sig
            return
        self.waiting_limit.pop(sig.ru, None)
        if limit <= 0:
            return
        self._propose(step, TaskType.OPEN_LIMITS, sig.ru, sig.source, meta={"reason": sig.reason})

    def on_favorite_changed(self, step: Step, ru: str, before: dict, after: dict) -> None:
        sig = self.waiting_limit.get(ru)
        if sig is not None and after.get("chat_limit") is not None:
            self._open_limits(step, sig)  # the limit is known now: re-check (DESIGN §6)

    def on_result(self, step: Step, request: Request, result: Any, error: str | None) -> None:
        if request.tag != "restriction":
            return
        sig: ev.OpenLimitsSignal = request.context
        if error is not None:
            log.warning("%s live limits for %s failed: %s", self.tu.tu, sig.ru, error)
            return
        rt = self.tu
        limits = rt.client.decode_restriction(result)
        rt.update_favorite(step, sig.ru, {"chat_limit": limits.chatLimit,
                                          "mail_limit": limits.mailLimit})
        if limits.chatLimit > 0:
            self._propose(step, TaskType.OPEN_LIMITS, sig.ru, sig.source,
                          meta={"reason": sig.reason})

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
        self.tu.factory.propose(step, self.tu, Candidate(type_, ru, source, anchor, meta))

    def _covered(self, ru: str, type_: TaskType, last_at: float) -> bool:
        row = self.tu.last_task(ru, type_.value)
        return row is not None and row["created_at"] >= last_at - EPS
