"""Follow-up Mail service: the five sources wired to the runtime (seed 001; seed 003 "Follow-up
mail"; DESIGN §6, §8, §9, §13).  The rules themselves are the pure modules beside it
(:mod:`.sources`, :mod:`.check`, :mod:`.marker`, :mod:`.lock`); this module turns hooks into
their inputs and their facts into effects on the step.

Rules / theory of operation
---------------------------
* One per TU, on the service interface every service uses (:class:`~sidecar.services.base.Service`).
  It keeps no tasks (seed 001: "Активні таски не тримає"): candidates go to the Task Factory with
  ``online_required`` from the source (False only for post-chat), so the factory never knows
  of mail.
* Sources → triggers → :class:`~.lock.PairLocks`: an answered Unanswered close (post-chat timer
  set; burst), the post-chat timer ``(follow_up_mail, post_chat, ru)`` in the one scheduler, a
  ``MailRead`` statistics event, a Chathouse notification, a full RU Online pass (last TU mail
  older than 6 h).  A hook only offers; a ``(follow_up_mail, flush)`` timer at the same instant
  (after every input and timer due then) plans every pair with triggers and no read in flight
  (:func:`~.check.plan`), so sources ready at one instant are checked together; what fails
  without the platform is settled at once; the rest costs **one** mail-history read per pair
  (:func:`platform_clients.mail.requests`, one request per method, answered as separate steps and
  decided together once all are in).  Triggers of a pair whose read is in flight wait for the
  next batch (the read must postdate the event it judges).
* The decision (:func:`~.check.decide`) starts from the pair's **current** marker, so marker
  writes made while the read was in flight are never overwritten, and a post-chat trigger whose
  timer was cancelled or replaced meanwhile is dropped.  A bad answer or an RPC error is
  :func:`~.check.failed`: nothing moves; a post-chat timer is retried after ``RETRY_S``.
* Every marker change goes through ``TuRuntime.write_marker`` (favorite row + Stack outbox in the
  step's transaction; keys of :mod:`.marker`, DESIGN §9; the outbox delivers a pair's writes in
  order).  Every refusal, miss and merge goes to the decision log with its source
  (``record_outcome``); created / factory refusals are logged by the Task Factory itself.
* A post-chat timer due before the login's check chat answered waits for it (the check chat may
  turn up a new Unanswered message, which cancels the timer — a restarted sidecar then decides
  as one that never stopped) and is checked at the next RU Online report.
* Restore (seed 001 "Ініціалізація"): the effective marker (Stack startup data < unsent outbox <
  local row, merged by the engine), task history and the Unanswered closes rebuild the post-chat
  timer (:func:`~.sources.restore_post_chat`); an overdue one is checked at once (after the check
  chat); burst and read state is only the marker's (never re-rolled, never re-processed).
* A burst close or a read event waiting for its check survives a crash: a durable row written
  with the offer, deleted with the check, offered again after a restart at the first RU Online
  report and checked once (:mod:`.pending`).
* Last TU mail older than 6 h is judged at grid RU Online passes only (``scheduled``, not a login's
  or reconnect's pass): the same instants across a restart (DESIGN §5); only pairs whose facts
  changed are judged again (:mod:`.six_hours`).  A read
  per pair only when it could pass: none before a letter a read showed is 6 h old, none after a
  limit refusal before the RU comes online again or a row changes the mail limit.  Not state: a
  restart reads once more and reaches the same refusal (no task moves).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from typing import Any

from platform_clients import mail
from platform_clients.base import BadAnswer
from sidecar.domain import events as ev
from sidecar.domain.favorites import Favorite
from sidecar.domain.tasks import CloseReason, Task, TaskType
from sidecar.runtime.decisions import record_outcome
from sidecar.runtime.factory import Candidate
from sidecar.services.base import Request, Service, Step
from sidecar.services.follow_up_mail import check
from sidecar.services.follow_up_mail import marker as mk
from sidecar.services.follow_up_mail import sources as src
from sidecar.services.follow_up_mail.lock import PairLocks
from sidecar.services.follow_up_mail.pending import PendingTriggers
from sidecar.services.follow_up_mail.six_hours import SixHourPass

log = logging.getLogger("sidecar.follow_up_mail")

TYPE = TaskType.FOLLOW_UP_MAIL
MAIL = TYPE.value  # history rows carry the value (read once: Enum.value is a slow descriptor)
UNANSWERED = TaskType.UNANSWERED_MESSAGE.value
# 6 h refusals that hold the pair (module rules): their cause changes only with the limit; the
# others are re-judged by the pass's read-free pre-check (a hold on them outlived a closed task)
SIX_H_HOLD_OUTCOMES = frozenset({"refused:no_mail_limit", "refused:limit_unknown"})
_NO_MARKER = mk.MailMarker()  # the marker of a pair that is not (or no longer) a favorite


@dataclass(slots=True)
class _Read:
    """One pair's mail-history read in flight: the plan it serves and the answers so far."""

    seq: int  # this read's number in the session (a late answer of an older read is ignored)
    plan: check.Plan
    methods: frozenset[str]
    answers: dict[str, Any] = field(default_factory=dict)


class FollowUpMailService(Service):
    name = "follow_up_mail"

    def __init__(self, tu) -> None:
        super().__init__(tu)
        self.locks = PairLocks()
        self.reads: dict[str, _Read] = {}  # ru -> read in flight
        self.seq = 0
        self.closed_at: dict[str, tuple[str, float]] = {}  # ru -> (post-chat source, its close)
        self.processed_reads: dict[str, set[str]] = {}  # ru -> read event keys processed (run)
        self.six_h_after: dict[str, float] = {}  # ru -> the 6 h source may pass only later
        self.six_h_hold: set[str] = set()  # refused for the limit: wait for a change
        self.awaiting_sync: set[str] = set()  # post-chat timers due before the check chat
        self.pending = PendingTriggers(tu)  # burst / read triggers kept durable until checked
        self.restored: dict[str, list[src.Trigger]] = {}  # ru -> pending triggers of a crash
        self._decoded: dict[str, tuple[Favorite, mk.MailMarker]] = {}  # ru -> favorite, its marker
        self.six_hour_pass = SixHourPass()  # the 6 h source at grid passes (its own module)

    # marker -----------------------------------------------------------------------------------
    def marker(self, ru: str) -> mk.MailMarker:
        """The pair's ``followUpMail`` marker as it is now (none: the empty marker).

        Decoded once per favorite value: a :class:`Favorite` is frozen and every marker write
        makes a new one, so the value seen last (kept here, which also keeps its id from being
        reused) still holding means its marker is unchanged."""
        fav = self.tu.favorites.get(ru)
        if fav is None:
            return _NO_MARKER
        seen = self._decoded.get(ru)
        if seen is not None and seen[0] is fav:
            return seen[1]
        m = mk.decode(fav.marker(mk.NAME)).marker
        self._decoded[ru] = (fav, m)
        return m

    def _write(self, step: Step, change: mk.MarkerChange | None) -> None:
        if change is None:
            return
        self.tu.write_marker(step, change.ru, mk.NAME, change.value, change.key)
        if not self.marker(change.ru).post_chat_pending:
            self.tu.cancel((self.name, "post_chat", change.ru))
            self.closed_at.pop(change.ru, None)
            self.awaiting_sync.discard(change.ru)

    def _arm_post_chat(self, step: Step, ru: str, m: mk.MailMarker) -> None:
        if m.post_chat_due_at is not None:
            self.tu.schedule((self.name, "post_chat", ru), max(m.post_chat_due_at, step.now))

    # lifecycle --------------------------------------------------------------------------------
    def on_login(self, step: Step) -> None:
        """Seed 001 "Ініціалізація": post-chat timers from marker and task history; the read key
        of the marker counts as processed; burst / read triggers a crash left unchecked wait for
        the first RU Online report (:mod:`.pending`)."""
        rt = self.tu
        for ru in sorted(rt.favorites):
            value = rt.marker(ru, mk.NAME)
            last_u = rt.last_task(ru, UNANSWERED, closed=True)
            newest = rt.last_task(ru, UNANSWERED)
            unanswered_open = (rt.factory.open_for(rt.tu, ru, TaskType.UNANSWERED_MESSAGE) is not None
                               or (newest is not None and newest.closed_at is None))
            # a post-chat mail made after the last close consumed that close's timer (an older
            # close's timer was cancelled by the newer Unanswered)
            consumed = () if last_u is None or last_u.closed_at is None or not any(
                r.type == MAIL and r.source == src.POST_CHAT and r.created_at >= last_u.closed_at
                for r in rt.history.get(ru, ())) else (last_u.task_id,)
            restored = src.restore_post_chat(
                rt.rng, rt.tu, ru, value, last_unanswered=last_u, unanswered_open=unanswered_open,
                post_chat_mail_sources=consumed, marker_cleared=rt.marker_cleared(ru, mk.NAME))
            self._write(step, restored.change)  # re-derived: the live key and body, idempotent
            m = restored.marker
            if m.last_read_event_key is not None:
                self.processed_reads.setdefault(ru, set()).add(m.last_read_event_key)
            if m.post_chat_pending and not unanswered_open:
                assert m.post_chat_source is not None
                if restored.closed_at is not None:
                    self.closed_at[ru] = (m.post_chat_source, restored.closed_at)
                self._arm_post_chat(step, ru, m)  # overdue: due now, checked at once
        self.restored = self.pending.restore(step, {ru: self.marker(ru) for ru in rt.favorites})

    def on_logout(self, step: Step) -> None:
        self.pending.end(step)  # the service's runtime state ends with the session
        self.restored.clear()
        self.locks.drop()
        self.reads.clear()
        self.closed_at.clear()
        self.processed_reads.clear()
        self.six_h_after.clear()
        self.six_h_hold.clear()
        self.awaiting_sync.clear()
        self._decoded.clear()
        self.six_hour_pass.clear()

    # inputs -----------------------------------------------------------------------------------
    def on_timer(self, step: Step, key: tuple, payload: Any) -> None:
        if key[1] == "post_chat":
            self._post_chat_due(step, key[2])
            self._flush_soon(step)
        elif key[1] == "flush":
            self._flush(step)

    def _post_chat_due(self, step: Step, ru: str) -> None:
        rt = self.tu
        if not rt.inbox_synced:
            self.awaiting_sync.add(ru)  # checked when the login's check chat has answered
            return
        self.awaiting_sync.discard(ru)
        m = self.marker(ru)
        known = self.closed_at.get(ru)
        closed = known[1] if known is not None and known[0] == m.post_chat_source else None
        closed = src.post_chat_closed_at(rt.rng, rt.tu, ru, m, closed)
        trigger = src.post_chat_trigger(m, step.now, closed)
        if trigger is not None:
            self.locks.offer(ru, trigger)

    def on_event(self, step: Step, event: ev.DomainEvent) -> None:
        rt = self.tu
        match event:
            case ev.MailOut():
                self.six_h_after[event.ru] = max(self.six_h_after.get(event.ru, 0.0), event.at + src.SIX_HOURS_S)
                if event.ru in rt.favorites:
                    m = self.marker(event.ru)
                    known = self.closed_at.get(event.ru)
                    closed = src.post_chat_closed_at(
                        rt.rng, rt.tu, event.ru, m,
                        known[1] if known and known[0] == m.post_chat_source else None)
                    self._write(step, src.on_tu_mailed(rt.tu, event.ru, m, event.at, closed)[1])
            case ev.MailRead():
                trigger = src.read_trigger(rt.client.has_read_stats, event.event_key, event.at)
                if trigger is not None:
                    self._offer(step, event.ru, trigger)
            case ev.Notification():
                trigger = src.notification_trigger(rt.project, event.kind, rt.limit(event.ru, "chat"),
                                                   event.at)
                if trigger is not None:
                    self.locks.offer(event.ru, trigger)
        self._flush_soon(step)

    def on_task_created(self, step: Step, task: Task) -> None:
        if task.type is TaskType.UNANSWERED_MESSAGE and task.ru in self.tu.favorites:
            # DESIGN §12.2: a new Unanswered message cancels the timer; its close sets a new one
            self._write(step, src.on_unanswered_created(self.tu.tu, task.ru, self.marker(task.ru))[1])

    def on_task_closed(self, step: Step, task: Task) -> None:
        rt, ru = self.tu, task.ru
        if (task.type is not TaskType.UNANSWERED_MESSAGE or task.reason is not CloseReason.ANSWERED
                or task.closed_at is None or ru not in rt.favorites):
            return
        m, change = src.on_unanswered_answered(rt.rng, rt.tu, ru, self.marker(ru), task.task_id,
                                               task.closed_at)
        self._write(step, change)
        self.closed_at[ru] = (task.task_id, task.closed_at)
        self._arm_post_chat(step, ru, m)
        closes = [r.closed_at for r in rt.history.get(ru, ())
                  if r.type == UNANSWERED and r.reason == CloseReason.ANSWERED.value
                  and r.closed_at is not None]
        trigger = src.burst_trigger(m, closes, task.task_id, task.closed_at)
        if trigger is not None:
            self._offer(step, ru, trigger)
        self._flush_soon(step)

    def on_favorite_changed(self, step: Step, ru: str, before: Favorite, after: Favorite) -> None:
        if before.mail_limit != after.mail_limit:
            self.six_h_hold.discard(ru)

    def on_online(self, step: Step, came_online: set[str], online: set[str],
                  snapshots: dict, full_pass: bool, *, scheduled: bool = False) -> None:
        rt = self.tu
        self.six_h_hold.difference_update(came_online)
        if not rt.inbox_synced:
            return
        if self.awaiting_sync:  # (mostly empty: no sort on every RU that comes online)
            for ru in sorted(self.awaiting_sync):
                self._post_chat_due(step, ru)
        if self.restored:  # a crash's unchecked burst / read (mostly empty: no sort)
            for ru, triggers in sorted(self.restored.items()):
                for trigger in triggers:
                    self.locks.offer(ru, trigger)
            self.restored.clear()
        if full_pass and scheduled:  # grid passes only: the same instants across a restart
            for ru in sorted(online):
                self.six_hour_pass.judge(self, step, ru)  # (only pairs whose facts changed)
        self._flush_soon(step)

    # the joint check --------------------------------------------------------------------------
    def pair(self, ru: str) -> check.PairState:
        """What the final check needs of pair ``ru`` now."""
        rt = self.tu
        fav = rt.favorites.get(ru)
        last = rt.last_task(ru, MAIL, closed=True)
        return check.PairState(
            ru=ru, favorite=fav, freeloader=fav is not None and rt.client.is_freeloader(fav),
            online=ru in rt.online,
            open_types=frozenset(t.type.value for t in rt.factory.open_of_pair(rt.tu, ru)),
            has_limits=rt.client.has_limits, live_limits=rt.project == "prime",
            mail_limit=rt.limit(ru, "mail"), marker=self.marker(ru),
            last_follow_up_mail_closed_at=None if last is None else last.closed_at,
            processed_reads=frozenset(self.processed_reads.get(ru, ())))

    def _offer(self, step: Step, ru: str, trigger: src.Trigger) -> None:
        """Queue ``trigger`` for the pair's check; a burst / read one is made durable in this step."""
        if self.locks.offer(ru, trigger):
            self.pending.write(step, ru, trigger)

    def _flush_soon(self, step: Step) -> None:
        """Check the queued triggers in a step of their own at this instant, after every input
        and timer due now: the sources of a pair that became ready together (at one instant)
        are checked together, with one read (seed 001 "Якщо одночасно спрацювали кілька
        джерел, mail history читається один раз")."""
        if self.locks.queued:
            self.tu.schedule((self.name, "flush"), step.now)

    def _flush(self, step: Step) -> None:
        """Plan every pair's waiting triggers; one history read per pair that needs one."""
        rt = self.tu
        for ru, batch in self.locks.flush().items():
            p = check.plan(rt.tu, self.pair(ru), batch)
            self._apply(step, ru, p.settled)
            if not p.read:
                self.locks.release(ru)
                continue
            self.seq += 1
            requests = mail.requests(rt.project, ru)
            self.reads[ru] = _Read(self.seq, p, frozenset(m for m, _ in requests))
            for method, params in requests:
                rt.request(step, self.name, method, params, tag="mail", context=(ru, self.seq, method))

    def on_result(self, step: Step, request: Request, result: Any, error: str | None) -> None:
        if request.tag != "mail":
            return
        ru, seq, method = request.context
        read = self.reads.get(ru)
        if read is None or read.seq != seq:
            return  # an older read's late answer (or the pair was dropped): changes nothing
        history: mail.MailHistory | None = None
        if error is None:
            read.answers[method] = result
            if set(read.answers) != read.methods:
                return  # the pair's other answers are still coming
            try:
                history = mail.decode(self.tu.project, read.answers)
            except BadAnswer as exc:
                error = f"bad answer: {exc}"
        if error is not None:
            log.warning("%s %s mail history of %s failed: %s", self.tu.project, self.tu.tu, ru, error)
        del self.reads[ru]
        pair = self.pair(ru)
        live = tuple(t for t in read.plan.live  # the timer was cancelled or replaced meanwhile
                     if t.source != src.POST_CHAT or t.ref == pair.marker.post_chat_source)
        fresh = replace(read.plan, live=live, settled=check.PairDecision(marker=pair.marker))
        if history is None:
            decision = check.failed(pair, fresh, step.now)
        else:
            decision = check.decide(self.tu.rng, self.tu.tu, pair, fresh, history, step.now)
            for note in decision.notes:
                if note.source == src.LAST_MAIL_6H and note.outcome == "refused:tu_mail_recent" \
                        and history.last_tu_at is not None:
                    self.six_h_after[ru] = history.last_tu_at + src.SIX_HOURS_S
        self._apply(step, ru, decision)
        self.locks.release(ru)
        self._flush(step)

    def _apply(self, step: Step, ru: str, d: check.PairDecision) -> None:
        """A decision's facts: marker writes in order, decision-log rows, the candidate."""
        rt = self.tu
        for change in d.changes:
            self._write(step, change)
        for note in d.notes:
            self.pending.settle(step, ru, note.source, note.ref)  # checked, any outcome
            if note.source == src.MAIL_READ and note.outcome != "refused:history_error":
                self.processed_reads.setdefault(ru, set()).add(note.ref)
            if note.source == src.LAST_MAIL_6H and note.outcome in SIX_H_HOLD_OUTCOMES:
                self.six_h_hold.add(ru)  # no mail limit: wait for the RU or the limit
            if note.outcome == "candidate":
                continue  # the Task Factory logs what it made of it
            detail: dict[str, object] = {"ref": note.ref} if note.ref else {}
            outcome = note.outcome
            if outcome == "miss":
                detail["chance"] = src.BURST_CHANCE  # the burst's one keyed roll
            if outcome.startswith("merged:"):
                detail["into"] = outcome.split(":", 1)[1]
                outcome = "refused:merged"
            record_outcome(step, rt, ru, TYPE, note.source, outcome, detail=detail)
        if d.retry_at is not None:
            self.tu.schedule((self.name, "post_chat", ru), d.retry_at)
        c = d.candidate
        if c is not None:
            meta: dict = {"ref": c.ref} if c.ref else {}
            if c.merged:
                meta["merged"] = list(c.merged)
            rt.propose(step, Candidate(TYPE, ru, c.source, meta=meta or None,
                                       online_required=c.online_required))
