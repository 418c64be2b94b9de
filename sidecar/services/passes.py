"""Poll passes: RU Online and the unanswered columns (seed 003 "Зведення проходів").

Rule 1.  Each project's client declares its passes (name, platform method, period).  A pass runs at
         login, on a platform-socket reconnect when the pass says so (``Pass.on_reconnect``: not
         Prime "check mail", seed 003 "сокет є → перевірка тільки при логіні", nor the Prime
         ``active`` scroll), and then every ``period_s`` (``None``: no period).
Rule 2.  RU Online (``purpose == "online"``): Golden's online-RU API every 15 s, the Chathouse/Prime
         online columns every 60 s.  A result **replaces** the online set (an RU's own activity
         marked it online only "until the next pass says otherwise", DESIGN §2) and its dialog rows
         refresh limits and blocks.
Rule 3.  Check chat / likes / check mail: each listed dialog becomes the domain event the services
         already understand (``UnansweredSeen``, ``OpenLimitsSignal``), dispatched like a socket
         event.
Rule 4.  Prime ``open_limits``: criteria ``active``, one page of 15 per 120 s tick, with a stateful
         cursor back to 7 days, then the cursor resets (DESIGN §12.3).  The cursor is durable state.
Rule 5.  A pass its grid timer ran answers ``scheduled`` (request context :data:`SCHEDULED`); the
         login's and a reconnect's do not.  The first scheduled RU Online pass ends a resumed
         session's gap (``TuRuntime.resumed``): what only grid passes judge lands on the same
         instants across a crash.
Rule 6.  A failed request (timeout, platform error) is logged and the pass simply runs again at its
         next period: passes are idempotent reads.
"""
from __future__ import annotations

import logging
import math
from typing import Any

from platform_clients.base import Pass
from sidecar.domain import events as ev
from sidecar.runtime.dispatch import dispatch
from sidecar.services.base import Request, Service, Step

log = logging.getLogger("sidecar.passes")

SEVEN_DAYS = 7 * 86400.0
SCHEDULED = "scheduled"  # request context of a pass run by its grid timer (not login / reconnect)


class PassService(Service):
    """Runs every pass of the TU's project and turns results into RU Online state and events."""

    name = "passes"

    def on_login(self, step: Step) -> None:
        """Check chat / mail first: what the RU wrote while the TU was away must become an
        Unanswered task (which wipes that pair's chain) before any reminder is considered."""
        self._cursor = self.tu.local_state.get(self.name, {}).get("open_limits_cursor", 0)
        for p in sorted(self.tu.client.passes, key=lambda p: p.purpose not in INBOX_PURPOSES):
            self._run(step, p)

    def on_reconnect(self, step: Step) -> None:
        for p in self.tu.client.passes:
            if p.on_reconnect:
                self._run(step, p)

    def on_timer(self, step: Step, key: tuple, payload: Any) -> None:
        self._run(step, self.tu.client.pass_named(key[1]), scheduled=True)

    def _run(self, step: Step, p: Pass, scheduled: bool = False) -> None:
        params = dict(p.params)
        if p.purpose == "open_limits":
            params["cursor"] = self.cursor
        # the answer says whether it was a grid pass: the 6 h mail source judges only those
        self.tu.request(step, self.name, p.method, params, tag=p.name,
                        context=SCHEDULED if scheduled else None)
        if p.period_s is not None:
            self.tu.schedule((self.name, p.name), self._next_slot(step.now, p))

    def ahead(self, after: float, until: float) -> list[tuple[float, Pass]]:
        """The grid passes with fixed params this TU will run after ``after`` and at or before
        ``until`` (unix seconds) as ``(at, pass)`` in time order: each armed timer and the slots
        after it on :meth:`_next_slot`'s grid — the very instants the timers will carry.  Prime's
        ``open_limits`` is left out: its cursor is what the previous page answers (rule 4).
        Their answers may be pushed into the frame (:mod:`sidecar.protocol.polls`)."""
        out: list[tuple[float, Pass]] = []
        for p in self.tu.client.passes:
            if p.period_s is None or p.purpose == "open_limits":
                continue
            at = self.tu.due_of((self.name, p.name))
            while at is not None and at <= until:
                if at > after:
                    out.append((at, p))
                nxt = self._next_slot(at, p)
                at = nxt if nxt > at else None  # a float grid that did not move: list no further
        out.sort(key=lambda x: x[0])
        return out

    def _next_slot(self, now: float, p: Pass) -> float:
        """The pass's next instant on a fixed grid (period, keyed offset per TU and pass), so a
        restarted sidecar polls at the same instants as one that never stopped (crash
        equivalence) and the TUs' polls do not all fall on the same second."""
        period = p.period_s
        assert period is not None, p.name  # only periodic passes are armed (on_login)
        offset = self.tu.rng.uniform(0.0, period, "pass", self.tu.tu, p.name)
        return offset + period * (math.floor((now - offset) / period) + 1)

    def _synced(self, step: Step) -> None:
        """The login's check chat is in: reminders held back until now are considered (as after
        a full RU Online pass)."""
        rt = self.tu
        if rt.inbox_synced:
            return
        rt.inbox_synced = True
        rt.services.online(step, set(), rt.online, {}, True)

    @property
    def cursor(self) -> int:
        return getattr(self, "_cursor", 0)  # Prime criteria-active page (durable)

    def on_result(self, step: Step, request: Request, result: Any, error: str | None) -> None:
        if error is not None:
            log.warning("%s %s pass %s failed: %s", self.tu.project, self.tu.tu, request.tag, error)
            if self.tu.client.pass_named(request.tag).purpose == "check_chat":
                self._synced(step)  # never hold reminders hostage to a failed scroll
            return
        p = self.tu.client.pass_named(request.tag)
        rt = self.tu
        if p.purpose == "online":
            online, snaps = rt.client.decode_online(result)
            scheduled = request.context == SCHEDULED
            rt.apply_online_pass(step, online, snaps, scheduled=scheduled)
            rt.resumed = rt.resumed and not scheduled  # the first grid pass ends a crash's gap
        elif p.purpose in ("check_chat", "likes"):
            snaps, _ = rt.client.decode_dialogs(result)
            for snap in snaps:
                rt.snapshots[snap.ru] = snap  # VIP spend of any listed RU
                rt.note_row(step, snap)  # limits and blocks the row carries (DESIGN §6)
                for event in dialog_events(rt.tu, snap, step.now, p.purpose):
                    dispatch(step, rt, event)
            if p.purpose == "check_chat":
                self._synced(step)
        elif p.purpose == "check_mail":
            for mail in rt.client.decode_unanswered_mail(result):
                dispatch(step, rt, ev.UnansweredSeen(
                    tu=rt.tu, ru=mail.ru, at=step.now, channel="mail", kind="message",
                    last_at=mail.at, source="check_mail"))
        elif p.purpose == "open_limits":
            snaps, next_cursor = rt.client.decode_dialogs(result)
            oldest = min((s.last_at for s in snaps if s.last_at is not None), default=None)
            if next_cursor is None or (oldest is not None and oldest < step.now - SEVEN_DAYS):
                next_cursor = 0
            self._cursor = next_cursor
            rt.put_state(step, self.name, "open_limits_cursor", next_cursor)
            for snap in snaps:
                rt.snapshots[snap.ru] = snap
                if snap.last_from == "system" and snap.last_at is not None:
                    # the row goes along: the Open Limits condition reads blocks from it
                    dispatch(step, rt, ev.OpenLimitsSignal(
                        tu=rt.tu, ru=snap.ru, at=snap.last_at, reason="system",
                        source="scroll_active", needs_live_limits=True, row=snap))


INBOX_PURPOSES = ("check_chat", "check_mail", "likes")


def dialog_events(tu: str, snap: ev.DialogSnapshot, now: float, purpose: str) -> list[ev.DomainEvent]:
    """What one row of an unanswered column / all-dialogs list means for the services."""
    out: list[ev.DomainEvent] = []
    source = "check_chat" if purpose == "check_chat" else "scroll_all"
    if snap.last_from == "ru" and snap.last_at is not None:
        if snap.last_kind == "like":
            out.append(ev.UnansweredSeen(tu=tu, ru=snap.ru, at=now, channel="chat", kind="like",
                                         last_at=snap.last_at, source=source))
        elif snap.last_kind in (None, "message") and purpose == "check_chat":
            out.append(ev.UnansweredSeen(tu=tu, ru=snap.ru, at=now, channel="chat",
                                         kind="message", last_at=snap.last_at, source=source))
    if purpose == "check_chat":
        if snap.unanswered_mail_at is not None:
            out.append(ev.UnansweredSeen(tu=tu, ru=snap.ru, at=now, channel="mail", kind="message",
                                         last_at=snap.unanswered_mail_at, source="check_chat"))
        if snap.dialog_id is None and snap.last_from is None:
            out.append(ev.OpenLimitsSignal(tu=tu, ru=snap.ru, at=now, reason="empty_dialog",
                                           source="scroll_new", row=snap))
        elif snap.mutual_like:
            out.append(ev.OpenLimitsSignal(tu=tu, ru=snap.ru, at=snap.last_at or now,
                                           reason="mutual_like", source="scroll_new", row=snap))
        elif snap.last_kind == "icebreaker":
            out.append(ev.OpenLimitsSignal(tu=tu, ru=snap.ru, at=snap.last_at or now,
                                           reason="icebreaker", source="scroll_new", row=snap))
    return out
