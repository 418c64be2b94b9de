"""Follow-up Message service (seed 004; seed 003 "Follow-up message"; DESIGN §7).

Rule 1.  One per TU.  Its runtime pool holds every unfinished chain of the TU, online RU or not
         (seed 004 "Runtime-пул"); the chain rules themselves are the pure table in
         :mod:`sidecar.services.chain`.  This module wires them to events, timers and the Task
         Factory.  Timers: ``check`` at a chain's ``nextCheckAt``; ``end`` at its 60-minute
         boundary.  An offline RU at ``check`` changes nothing and re-arms nothing; the overdue
         attempt runs when RU Online next reports the RU (a pass, or the RU's own activity).
Rule 2.  At a due attempt the final check runs **before** the roll (seed 004 "перевірити умови й
         шанс"; DESIGN §7): a refused attempt stays due, spends nothing, and is re-checked on every
         RU Online pass and whenever a chat task of the pair closes, until created, removed or past
         the boundary.  The roll is keyed, so the order changes no outcome, only when a miss is
         spent.  The next step is planned at the chain task's actual close, any reason **except**
         ``logout``: a task left behind by a logout was never acted on (seed 003 "таск можна
         створити, не закрити і вийти"), so the attempt stays due and the next login, on any
         machine, re-runs it with the same keyed roll.  An offline expiry is a close like any other.
Rule 3.  Restore (seed 004 "Ініціалізація") draws the 60-minute boundary from the TU's last message:
         the durable last contact (manual sends included) on this machine; on Golden the chat
         history is read before a restored chain with no known contact is checked; on
         Chathouse/Prime the dialog rows move it.  A marker cleared by a block or a new Unanswered
         is a fact: restore never rebuilds that chain from history.  A crash's restart (``resumed``)
         checks nothing at its login's passes: the first grid pass does, as for a sidecar that never
         stopped.
Rule 4.  Only favorites Stack lists as active get chains or reminders (DESIGN §6).  After the
         boundary: the plain check ("over 60 min") and Chathouse notifications are
         :mod:`sidecar.services.follow_up_plain`'s.  Last contact: Chathouse/Prime from the online
         pass's dialog rows (no extra request); Golden by ``chat_history`` for online RU ids only
         when unknown, then kept current by socket events.  It is durable (service state
         ``contact``): a restarted sidecar judges "over 60 min" exactly as one that never stopped; a
         fresh machine learns it again from the passes / chat history.
Rule 5.  Final check before the Task Factory
         (:func:`~sidecar.services.follow_up_checks.final_check`): a favorite, active, not white,
         online, no block, no stronger (or the same) chat task open for the pair, Chathouse/Prime
         chat limit — an unknown limit counts as absent (``limit_unknown``) and is re-checked when a
         dialog row carries it.  Golden's backup (DESIGN §12.7,
         :mod:`sidecar.services.golden_backup`): the same ``chat_history`` answer raises an
         Unanswered message for an uncovered last RU message — no extra read; it wipes the chain
         like any new Unanswered.
Rule 6.  Every marker change goes through ``TuRuntime.write_marker`` (local row + Stack outbox in
         the step's transaction) with the key ``followUpChat:TU:RU:<src>:<step>:set|clear``.
"""
from __future__ import annotations

import logging
import math
from typing import Any

from sidecar.runtime.decisions import record_outcome
from sidecar.domain import events as ev
from sidecar.domain.favorites import Favorite
from sidecar.domain.tasks import CloseReason, Task, TaskType
from sidecar.runtime.factory import Candidate, Refused
from sidecar.domain.notes import ChainAttempt
from sidecar.services import chain as ch, golden_backup
from sidecar.services.base import Request, Service, Step
from sidecar.services.follow_up_plain import PlainChecks
from sidecar.services.follow_up_checks import STRONGER, Contact, chain_allowed, final_check, no_chain_reason, parse_history
from sidecar.stack.writes import followup_chat_key

log = logging.getLogger("sidecar.follow_up_message")

MARKER = "followUpChat"
CONTACT = "contact"  # durable service-state scope: ru -> [last_from, last_at, last_tu_at]


class FollowUpMessageService(PlainChecks, Service):
    name = "follow_up_message"

    def __init__(self, tu) -> None:
        super().__init__(tu)
        self.pool: dict[str, ch.Chain] = {}  # ru -> live chain
        self.contact: dict[str, Contact] = {}  # ru -> last chat contact, when known
        self.history_wanted: set[str] = set()  # Golden: RUs whose chat history is being read
        self.last_outcome: dict[str, tuple] = {}  # ru -> (source, step, outcome) last reported
        self.unsure: set[str] = set()  # Golden: restored chains whose boundary awaits the chat history

    # restore ----------------------------------------------------------------------------------
    def on_login(self, step: Step) -> None:
        """Seed 004 "Ініціалізація": rebuild every unfinished chain from history and markers."""
        rt = self.tu
        for ru, value in rt.local_state.get(CONTACT, {}).items():
            if isinstance(value, list) and len(value) == 3:
                self.contact[ru] = Contact(*value)
        for ru, fav in rt.favorites.items():
            if not chain_allowed(fav):
                continue
            if rt.factory.open_for(rt.tu, ru, TaskType.UNANSWERED_MESSAGE) is not None:
                continue  # a newer Unanswered is open: its close starts the chain
            if rt.marker_cleared(ru, MARKER):
                continue  # removed by a block or a new Unanswered: never rebuilt (DESIGN §7)
            last_u = rt.last_task(ru, TaskType.UNANSWERED_MESSAGE.value, closed=True)
            if last_u is None:
                continue
            newer_open = rt.last_task(ru, TaskType.UNANSWERED_MESSAGE.value)
            if newer_open is not None and newer_open.closed_at is None:
                continue
            follow_ups = [r for r in rt.history.get(ru, ())
                          if r.type == TaskType.FOLLOW_UP_MESSAGE.value and r.source == "chain"
                          and last_u.closed_at is not None and r.created_at >= last_u.closed_at]
            marker_value = rt.marker(ru, MARKER)
            contact = self.contact.get(ru)
            # Golden with no contact record (a fresh machine): the chat history, read when the RU
            # is online, draws the boundary; until then the chain waits in the pool unchecked
            unsure = rt.project == "golden" and contact is None
            chain = ch.restore(rt.rng, rt.tu, ru, last_unanswered=last_u, follow_ups=follow_ups,
                               marker_value=marker_value, now=-math.inf if unsure else step.now,
                               last_tu_at=contact.last_tu_at if contact else None)
            if chain is None:
                continue
            if unsure:
                self.unsure.add(ru)
            parsed = ch.parse_marker(marker_value)
            if parsed is None or parsed[0] != chain.source:
                self._write(step, ru, chain)  # same key as live: idempotent on Stack
            self._arm(step, ru, chain)

    def on_logout(self, step: Step) -> None:
        self.pool.clear()
        self.contact.clear()
        self.unsure.clear()

    # timers -----------------------------------------------------------------------------------
    def on_timer(self, step: Step, key: tuple, payload: Any) -> None:
        what, ru = key[1], key[2]
        if what == "check":
            self._check(step, ru)
        elif what == "end":
            chain = self.pool.get(ru)
            if ru in self.unsure:
                return  # the boundary is not known yet: the chat history decides
            if chain is not None and step.now >= chain.boundary and not chain.waiting_task:
                self._remove(step, ru, clear_marker=False, why="past_60m", ended=True)
                self._plain_check(step, ru)

    # events -----------------------------------------------------------------------------------
    def on_event(self, step: Step, event: ev.DomainEvent) -> None:
        match event:
            case ev.ChatIn() | ev.LikeIn():
                self._contact(step, event.ru, "ru", event.at)
            case ev.ChatOut():
                self._contact(step, event.ru, "tu", event.at)
                chain = self.pool.get(event.ru)
                if chain is not None:  # a manual send moves only the 60-minute boundary
                    self._arm(step, event.ru, ch.tu_wrote(chain, event.at))
            case ev.Notification():
                if event.kind in ("ONLINE_NOW", "RECENT_PURCHASE"):
                    self._notification(step, event.ru)

    def on_task_created(self, step: Step, task: Task) -> None:
        if task.type is TaskType.UNANSWERED_MESSAGE:
            # seed 003 scenario 1: a new Unanswered message wipes the chain state
            self._remove(step, task.ru, clear_marker=True, why="new_unanswered")

    def on_task_closed(self, step: Step, task: Task) -> None:
        rt, ru = self.tu, task.ru
        closed_at = task.closed_at
        if closed_at is None:  # the factory reports a task only once it is closed
            raise ValueError(f"task {task.task_id} reported closed without closed_at")
        if task.type is TaskType.UNANSWERED_MESSAGE:
            if task.reason is CloseReason.ANSWERED:
                self._contact(step, ru, "tu", closed_at)
                if chain_allowed(rt.favorites.get(ru)):
                    started = ch.start(rt.rng, rt.tu, ru, task.task_id, closed_at)
                    self._write(step, ru, started)
                    self._arm(step, ru, started)
                else:  # the shift lead's "why no reminder?": say why no chain started
                    record_outcome(step, rt, ru, TaskType.FOLLOW_UP_MESSAGE, "chain",
                                   no_chain_reason(rt.favorites.get(ru)),
                                   detail={"source_task": task.task_id})
            return
        if task.type is TaskType.FOLLOW_UP_MESSAGE:
            if task.reason is CloseReason.ANSWERED:
                self._contact(step, ru, "tu", closed_at)
            chain = self.pool.get(ru)
            if task.reason is CloseReason.LOGOUT:
                return  # never acted on: the attempt stays due for the next login (module rules)
            if chain is not None and chain.task_id == task.task_id:
                # seed 004: the next step is planned only at the actual close, any reason
                if task.reason is CloseReason.ANSWERED:
                    chain = ch.tu_wrote(chain, closed_at)
                self._advance(step, ru, chain, closed_at)
                return
        if task.type in STRONGER and task.reason is not CloseReason.LOGOUT:
            self._check(step, ru)  # a refused attempt may be unblocked by this close

    def on_favorite_changed(self, step: Step, ru: str, before: Favorite, after: Favorite) -> None:
        if after.blocked:
            # seed 003 scenario 10: a block removes the chain and its state
            self._remove(step, ru, clear_marker=True, why="blocked")
        elif not after.is_active or after.is_white:
            self._remove(step, ru, clear_marker=False, ended=True,
                         why="white" if after.is_white else "inactive")

    def on_online(self, step: Step, came_online: set[str], online: set[str],
                  snapshots: dict, full_pass: bool, *, scheduled: bool = False) -> None:
        for ru, snap in snapshots.items():
            self._set_contact(step, ru, Contact(snap.last_from, snap.last_at, snap.last_tu_at))
        if not self.tu.inbox_synced:
            return  # the login's check chat may still turn up a new Unanswered message
        if self.tu.resumed and full_pass and not scheduled:
            return  # a crash's restart: checked at the next grid pass, as if it never stopped
        if not full_pass and came_online.isdisjoint(self.pool) and came_online.isdisjoint(self.tu.favorites):
            return  # no chain and no favorite (the plain check's first condition): nothing to judge
        candidates = online if full_pass else came_online
        # an RU that is no favorite and has no chain is judged by nothing below (the plain
        # check's first condition is an active favorite): a pass looks only at the others
        # (the same checks in the same order, without a call per stranger)
        candidates = (candidates & self.tu.favorites.keys()) | (candidates & self.pool.keys())
        unknown: list[str] = []
        for ru in sorted(candidates):
            if ru in self.pool:
                if self.tu.project == "golden" and ru not in self.contact:
                    unknown.append(ru)  # restored chain: learn the boundary before the check
                else:
                    self._check(step, ru)
            elif self.tu.project == "golden" and ru not in self.contact:
                if self._plain_prefilter(ru):
                    unknown.append(ru)
            else:
                self._plain_check(step, ru)
        unknown = [ru for ru in unknown if ru not in self.history_wanted]
        if unknown:
            self.history_wanted.update(unknown)
            self.tu.request(step, self.name, "chat_history", {"ru_ids": unknown}, tag="history",
                            context=unknown)

    def on_result(self, step: Step, request: Request, result: Any, error: str | None) -> None:
        if request.tag != "history":
            return
        asked: list[str] = request.context
        self.history_wanted.difference_update(asked)
        self.unsure.difference_update(asked)
        if error is not None:
            log.warning("%s chat_history failed: %s", self.tu.tu, error)
            for ru in asked:  # a chain is not held hostage to a failed read
                self._check(step, ru)
            return
        for ru, contact in parse_history(result, set(asked)).items():
            self._set_contact(step, ru, contact)
        for ru, at in golden_backup.last_ru_messages(self.tu, result, set(asked)).items():
            golden_backup.back_up(step, self.tu, ru, at)  # the same read (DESIGN §12.7)
        for ru in asked:
            if ru in self.tu.online:
                if ru in self.pool:
                    self._check(step, ru)
                else:
                    self._plain_check(step, ru)

    # chain ------------------------------------------------------------------------------------
    def _check(self, step: Step, ru: str) -> None:
        """The attempt at ``nextCheckAt`` (or later, when it was overdue)."""
        rt = self.tu
        chain = self.pool.get(ru)
        if chain is None or chain.waiting_task or step.now < chain.next_check_at:
            return
        if not rt.inbox_synced:
            return  # re-checked when the login's check chat answers
        if step.now >= chain.boundary:
            if ru in self.unsure:
                return  # the chat history may still move the boundary
            self._remove(step, ru, clear_marker=False, why="past_60m", ended=True)
            self._plain_check(step, ru)
            return
        if ru not in rt.online:  # seed 003 scenario 5: no change, no re-arming; online → at once
            record_outcome(step, rt, ru, TaskType.FOLLOW_UP_MESSAGE, "chain", "offline",
                           detail={"step": chain.step})
            return
        chance = ch.CHANCES[chain.step]
        reason = final_check(self.tu, ru)  # first the conditions, then the chance (seed 004)
        if reason is not None:
            self._attempt(step, ru, chain, chance, False, f"refused:{reason}")
            return
        chance, hit = ch.roll(rt.rng, rt.tu, ru, chain.source, chain.step)
        if not hit:
            self._attempt(step, ru, chain, chance, False, "miss")
            self._advance(step, ru, chain, step.now)
            return
        made = rt.propose(step, Candidate(TaskType.FOLLOW_UP_MESSAGE, ru, "chain",
                                                      meta={"step": chain.step}))
        if isinstance(made, Refused):
            self._attempt(step, ru, chain, chance, True, f"refused:{made.reason}")
            return
        self._attempt(step, ru, chain, chance, True, "created")
        self.pool[ru] = ch.with_task(chain, made.task_id)

    def _advance(self, step: Step, ru: str, chain: ch.Chain, at: float) -> None:
        nxt = ch.advance(self.tu.rng, self.tu.tu, ru, chain, at)
        if nxt is None:  # three attempts done: the marker records the end (DESIGN §7)
            if self.pool.pop(ru, None) is not None:
                record_outcome(step, self.tu, ru, TaskType.FOLLOW_UP_MESSAGE, "chain",
                               "removed:attempts_done", detail={"source_task": chain.source})
            self.tu.cancel((self.name, "check", ru))
            self.tu.cancel((self.name, "end", ru))
            self.tu.write_marker(step, ru, MARKER, ch.finished_marker(chain.source),
                                 followup_chat_key(self.tu.tu, ru, chain.source, ch.MAX_STEPS))
            return
        self._write(step, ru, nxt)
        self._arm(step, ru, nxt)

    def _arm(self, step: Step, ru: str, chain: ch.Chain) -> None:
        self.pool[ru] = chain
        if chain.next_check_at > step.now:
            self.tu.schedule((self.name, "check", ru), chain.next_check_at)
        else:
            self.tu.cancel((self.name, "check", ru))
            if ru in self.tu.online:
                self.tu.schedule((self.name, "check", ru), step.now)
        self.tu.schedule((self.name, "end", ru), max(chain.boundary, step.now))

    def _remove(self, step: Step, ru: str, *, clear_marker: bool, why: str,
                ended: bool = False) -> None:
        """Drop the pair's chain.  ``clear_marker``: a new Unanswered or a block (the marker is
        cleared, a fact); ``ended``: the boundary or the favorite's attributes ended it (the
        marker records the step it reached, :func:`~sidecar.services.chain.ended_marker`).
        ``why`` goes to the decision log (DESIGN §13) when a chain was live."""
        chain = self.pool.pop(ru, None)
        if chain is not None:
            record_outcome(step, self.tu, ru, TaskType.FOLLOW_UP_MESSAGE, "chain", f"removed:{why}",
                           detail={"source_task": chain.source, "step": chain.step})
            # a pair's check / end timers are armed only with its chain in the pool (_arm), and
            # every removal but logout's (whose timers the runtime drops) cancels both: with no
            # chain there is nothing to cancel (every new Unanswered message comes here)
            self.tu.cancel((self.name, "check", ru))
            self.tu.cancel((self.name, "end", ru))
        if ended and chain is not None and not clear_marker:
            self.tu.write_marker(step, ru, MARKER, ch.ended_marker(chain),
                                 followup_chat_key(self.tu.tu, ru, chain.source, f"{chain.step}:end"))
        if clear_marker and ru in self.tu.favorites:  # markers exist only on favorites
            parsed = ch.parse_marker(self.tu.marker(ru, MARKER))
            if parsed is not None:
                src, n, _ = parsed
                self.tu.write_marker(step, ru, MARKER, None,
                                     followup_chat_key(self.tu.tu, ru, src, n, "clear"))

    def _write(self, step: Step, ru: str, chain: ch.Chain) -> None:
        self.tu.write_marker(step, ru, MARKER, ch.marker(chain),
                             followup_chat_key(self.tu.tu, ru, chain.source, chain.step))

    def _attempt(self, step: Step, ru: str, chain: ch.Chain, chance: float, hit: bool,
                 outcome: str) -> None:
        key = (chain.source, chain.step, outcome)
        if outcome.startswith("refused") and self.last_outcome.get(ru) == key:
            return  # the same refusal re-checked on every pass is reported once
        self.last_outcome[ru] = key
        # the decision log (DESIGN §13); a factory refusal is already there, logged once
        record_outcome(step, self.tu, ru, TaskType.FOLLOW_UP_MESSAGE, "chain", outcome,
                       task_id=chain.task_id, detail={"step": chain.step, "chance": chance})
        step.notify("chain.attempt", ChainAttempt(tu=self.tu.tu, ru=ru, step=chain.step,
                                                  chance=chance, hit=hit, outcome=outcome,
                                                  at=step.now))

    def _contact(self, step: Step, ru: str, who: str, at: float | None) -> None:
        """A chat message either way at ``at``."""
        if at is None:
            return
        c = self.contact.get(ru)
        if c is not None and c.last_at is not None and at < c.last_at:
            return
        last_tu = at if who == "tu" else (c.last_tu_at if c else None)
        if who == "ru" and c is None and self.tu.project == "golden":
            return  # an unknown Golden dialog stays unknown until its history is read
        self._set_contact(step, ru, Contact(who, at, last_tu))

    def _set_contact(self, step: Step, ru: str, c: Contact) -> None:
        old = self.contact.get(ru)
        if old is not None and old == c:
            return
        self.contact[ru] = c
        self.unsure.discard(ru)
        self.tu.put_state(step, CONTACT, ru, [c.last_from, c.last_at, c.last_tu_at])
        chain = self.pool.get(ru)
        if chain is not None and c.last_tu_at is not None and c.last_tu_at > chain.last_tu_at:
            self._arm(step, ru, ch.tu_wrote(chain, c.last_tu_at))  # the boundary moves
