"""The five Follow-up mail sources as pure functions (seed 001 "Джерела"; seed 003 "Follow-up
mail" 1–5; DESIGN §8).

Each source turns (pair state, event, now, keyed rng) into facts: a :class:`Trigger` that asks the
per-pair lock (:mod:`.check`) for a check, marker changes, or a timer instant.  Source names are
the ones the decision log, Stack candidates and the scenarios use.

==============  ===========================================================================
source          ready when (before the mail-history read)
==============  ===========================================================================
last_mail_6h    an RU Online snapshot lists the pair online; no mail task open, no other
                source pending, no ``last_mail_6h`` candidate for the pair in the last 6 h
                (seed 001 "Останній лист TU старший за 6 годин"; DESIGN §8.1 decisions)
mail_read       Golden ``EmailRead``/``OpenAttachFileSatellite``, Chathouse ``inmail_read*``;
                key ≠ ``lastReadEventKey``, no open Follow-up mail, the last closed
                Follow-up mail absent or closed before the event (seed 001 "Лист TU
                прочитано RU"); never on Prime (DESIGN §12.1)
post_chat       ``postChatDueAt`` ≤ now (seed 001 "Післячатовий таймер"), online or not
burst           at an answered Unanswered close: > 5 answered Unanswered closes of the pair in
                the last 600 s and this close ≠ ``lastBurstSourceTaskId`` (seed 001 "Понад 5")
notification    Chathouse ``new_notification`` ONLINE_NOW / RECENT_PURCHASE with no chat limit
                (0 or unknown — unknown counts as absent, DESIGN §6) (seed 003 "Нотифікація")
==============  ===========================================================================
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from sidecar.core.rng import KeyedRandom
from sidecar.domain.tasks import HistoryRow
from sidecar.services.follow_up_mail import marker as mk

LAST_MAIL_6H, MAIL_READ, POST_CHAT, BURST, NOTIFICATION = (
    "last_mail_6h", "mail_read", "post_chat", "burst", "notification")
# the one candidate of a joint check takes the first ready source in this order: post_chat first
# (the only one that may create offline), then the event-driven ones, the periodic scroll last
PRIORITY = (POST_CHAT, MAIL_READ, BURST, NOTIFICATION, LAST_MAIL_6H)
SIX_HOURS_S = 6 * 3600.0  # seed 001: "останній лист від TU старший за 6 год"
POST_CHAT_DELAY_S = (600.0, 1200.0)  # seed 001: "через 600–1200 с"
BURST_WINDOW_S = 600.0  # seed 001: "за останні 10 хв"
BURST_MIN = 5  # seed 001: "більше 5"
BURST_CHANCE = 0.5  # seed 001: "з шансом 50%"
NOTIFICATION_KINDS = frozenset({"ONLINE_NOW", "RECENT_PURCHASE"})


@dataclass(frozen=True, slots=True)
class Trigger:
    """One source asking the per-pair lock for a check.

    ``ref``: the source task id (post_chat, burst), the statistics event key (mail_read), or ``""``;
    ``at``: the source event's instant (unix s) — the final check's "TU has not mailed since";
    ``online_required``: False only for post_chat (seed 003: "можна писати офлайн РЮ")."""

    source: str
    ref: str
    at: float
    online_required: bool = True


# ---- post-chat timer ---------------------------------------------------------------------------

def post_chat_delay(rng: KeyedRandom, tu: str, ru: str, source: str) -> float:
    """U(600, 1200) s after the close of Unanswered ``source``, keyed: every machine and every
    restart draws the same instant."""
    return rng.uniform(*POST_CHAT_DELAY_S, "followUpMail", tu, ru, source, "postChat")


def on_unanswered_created(tu: str, ru: str, m: mk.MailMarker) -> tuple[mk.MailMarker, mk.MarkerChange | None]:
    """A new Unanswered message cancels a pending post-chat timer (DESIGN §12.2)."""
    return mk.clear_post_chat(tu, ru, m, "post_chat_cancelled")


def on_unanswered_answered(rng: KeyedRandom, tu: str, ru: str, m: mk.MailMarker, task_id: str,
                           closed_at: float) -> tuple[mk.MailMarker, mk.MarkerChange]:
    """An Unanswered message closed as answered (at any delay, DESIGN §6) sets the timer to
    close + U(600, 1200) s, replacing any older one."""
    return mk.set_post_chat(tu, ru, m, task_id, closed_at + post_chat_delay(rng, tu, ru, task_id))


def post_chat_closed_at(rng: KeyedRandom, tu: str, ru: str, m: mk.MailMarker,
                        history_closed_at: float | None = None) -> float | None:
    """The source task's close: from task history when known, else re-derived from the marker
    (``due − keyed delay``, exact because the delay is keyed by the source)."""
    if not m.post_chat_pending:
        return None
    if history_closed_at is not None:
        return history_closed_at
    assert m.post_chat_source is not None and m.post_chat_due_at is not None
    return mk.ms(m.post_chat_due_at - post_chat_delay(rng, tu, ru, m.post_chat_source))


def on_tu_mailed(tu: str, ru: str, m: mk.MailMarker, mailed_at: float,
                 source_closed_at: float | None) -> tuple[mk.MailMarker, mk.MarkerChange | None]:
    """The TU sent a letter after the source task closed → the timer is dropped at once
    (seed 003: "рахуємо саме відправку листа, а не мейл-таск")."""
    if source_closed_at is None or mailed_at <= source_closed_at:
        return m, None
    return mk.clear_post_chat(tu, ru, m, "tu_mailed_since")


def post_chat_trigger(m: mk.MailMarker, now: float, closed_at: float | None) -> Trigger | None:
    """The timer's trigger when due (overdue at restore included: checked at once, seed 001
    "Ініціалізація"); None when no timer or not yet due."""
    if not m.post_chat_pending or m.post_chat_due_at is None or now < m.post_chat_due_at:
        return None
    assert m.post_chat_source is not None
    return Trigger(POST_CHAT, m.post_chat_source,
                   closed_at if closed_at is not None else m.post_chat_due_at, online_required=False)


# ---- RU read the TU's mail --------------------------------------------------------------------

def read_trigger(has_read_stats: bool, event_key: str, at: float) -> Trigger | None:
    """A read statistics event; None on a project without read statistics (Prime) or without a key."""
    if not has_read_stats or not event_key:
        return None
    return Trigger(MAIL_READ, event_key, at)


def read_refusal(m: mk.MailMarker, trigger: Trigger, follow_up_mail_open: bool,
                 last_follow_up_mail_closed_at: float | None) -> str | None:
    """Seed 001's first three "new event" conditions (the fourth, "TU has sent no mail since the
    event", needs the history and is the final check's ``tu_mailed_since``)."""
    if trigger.ref == m.last_read_event_key:
        return "read_already_processed"
    if follow_up_mail_open:
        return "stronger_task_open"
    if last_follow_up_mail_closed_at is not None and last_follow_up_mail_closed_at >= trigger.at:
        return "follow_up_mail_after_read"
    return None


# ---- burst ------------------------------------------------------------------------------------

def burst_count(answered_closes: Iterable[float], at: float) -> int:
    """Answered Unanswered closes of the pair in the 600 s ending at ``at`` (``at − 600 < t ≤ at``)."""
    return sum(1 for t in answered_closes if at - BURST_WINDOW_S < t <= at)


def burst_trigger(m: mk.MailMarker, answered_closes: Iterable[float], task_id: str,
                  closed_at: float) -> Trigger | None:
    """At an answered close (``answered_closes`` includes it): a trigger when the count is > 5 and
    the close is not already processed (``lastBurstSourceTaskId``)."""
    if m.last_burst_source == task_id or burst_count(answered_closes, closed_at) <= BURST_MIN:
        return None
    return Trigger(BURST, task_id, closed_at)


def burst_roll(rng: KeyedRandom, tu: str, ru: str, task_id: str) -> bool:
    """The one 50 % roll of close ``task_id``: keyed, so a restart re-derives it, never re-rolls."""
    return rng.chance(BURST_CHANCE, "followUpMail", tu, ru, task_id, "burst")


# ---- Chathouse notification ---------------------------------------------------------------------

def notification_trigger(project: str, kind: str, chat_limit: int | None, at: float,
                         ref: str = "") -> Trigger | None:
    """Chathouse ONLINE_NOW / RECENT_PURCHASE while the chat has no limit (0 or unknown); the
    mail limit is the final check's."""
    if project != "chathouse" or kind not in NOTIFICATION_KINDS:
        return None
    if chat_limit is not None and chat_limit > 0:
        return None  # the chat is open: Follow-up message's notification, not mail
    return Trigger(NOTIFICATION, ref or f"{kind}@{mk.ms(at)}", at)


# ---- last TU mail older than 6 h ----------------------------------------------------------------

def six_hour_trigger(now: float, mail_task_open: bool, other_pending: bool,
                     last_6h_candidate_at: float | None) -> Trigger | None:
    """From an RU Online snapshot listing the pair online.  ``last_6h_candidate_at``: the pair's
    last ``last_mail_6h`` candidate (created, unix s), from task history — at most one per 6 h."""
    if mail_task_open or other_pending:
        return None
    if last_6h_candidate_at is not None and now - last_6h_candidate_at < SIX_HOURS_S:
        return None
    return Trigger(LAST_MAIL_6H, "", now)


def six_hour_refusal(last_tu_mail_at: float | None, now: float) -> str | None:
    """After the history read: the TU's last letter must be older than 6 h; never mailed counts
    as older (DESIGN §8.1 decision)."""
    if last_tu_mail_at is not None and now - last_tu_mail_at <= SIX_HOURS_S:
        return "tu_mail_recent"
    return None


# ---- restore (seed 001 "Ініціалізація") ----------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Restored:
    """A pair's post-chat timer after login: ``marker`` (maybe re-derived), the ``change`` to
    write when it was re-derived from task history, and ``closed_at`` of its source task."""

    marker: mk.MailMarker
    change: mk.MarkerChange | None
    closed_at: float | None


def restore_post_chat(rng: KeyedRandom, tu: str, ru: str, value: object, *,
                      last_unanswered: HistoryRow | None, unanswered_open: bool,
                      post_chat_mail_sources: Iterable[str], marker_cleared: bool) -> Restored:
    """Rebuild the post-chat timer at login.

    ``value``: the effective marker (Stack startup data < unsent outbox < local row, DESIGN §9);
    ``last_unanswered``: the pair's newest closed Unanswered message history row (``task_id``,
    ``closed_at``, ``reason``); ``unanswered_open``: a newer Unanswered is open (its close sets the
    timer); ``post_chat_mail_sources``: the refs of the pair's ``post_chat`` Follow-up mail tasks in
    history; ``marker_cleared``: the runtime knows this marker was written and cleared (a cleared
    timer is a fact: never rebuilt from history).

    The marker wins.  Without one, a close that history shows answered and that no post-chat mail
    followed re-derives the timer with the same keyed delay as live (another operator's fresh
    machine after the close reached Stack and the marker did not).  The caller checks a timer
    with ``postChatDueAt`` ≤ now at once (:func:`post_chat_trigger`).  Burst and read state is
    only the marker's: never re-rolled, never re-processed."""
    m = mk.decode(value).marker
    if unanswered_open:
        return Restored(m, None, None)  # the timer belongs to the open one's close
    closed = last_unanswered.closed_at if last_unanswered else None
    if m.post_chat_pending:
        same = last_unanswered is not None and last_unanswered.task_id == m.post_chat_source
        return Restored(m, None, post_chat_closed_at(rng, tu, ru, m, closed if same else None))
    if (value is not None or marker_cleared or last_unanswered is None
            or last_unanswered.reason != "answered" or closed is None
            or last_unanswered.task_id in set(post_chat_mail_sources)):
        return Restored(m, None, None)
    new, change = on_unanswered_answered(rng, tu, ru, m, last_unanswered.task_id, float(closed))
    return Restored(new, change, float(closed))
