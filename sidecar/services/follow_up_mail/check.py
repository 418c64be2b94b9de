"""One lock per TU+RU: the joint check of every ready source (seed 001 "Спільна фінальна
перевірка", "Запити"; DESIGN §8).

Rules / theory of operation
---------------------------
* :func:`plan` takes the triggers ready for one pair and settles those that fail without the
  platform (source pre-conditions, favorite, block, open mail task, limit); it returns the
  remaining ones and whether **one** mail-history read is needed for all of them together.
* :func:`decide` takes the answer of that one read and returns a :class:`PairDecision`: at most
  one :class:`MailCandidate` (the first passing source in :data:`~.sources.PRIORITY`), one
  note per trigger for the decision log (``created``/``candidate``, ``refused:<reason>``,
  ``miss``, ``merged:<source>``), and the marker changes of a successful check
  (``lastReadEventKey`` and ``lastBurstSourceTaskId`` move whether or not a task was made; the
  post-chat timer is consumed).
* :func:`failed` is the answer to an API error: notes ``refused:history_error``, **no** marker
  change (seed 001: "Помилка API маркер не пересуває"); a post-chat timer is retried after
  :data:`RETRY_S`.
* Final check (seed 001; freeloader rules seed 003 "Фрілоадери" via the platform client's
  ``is_freeloader``): favorite, active, not white, not freeloader, no block either way;
  online (except post_chat); no Unanswered mail and no open Follow-up mail
  (``stronger_task_open``); a mail limit on Chathouse/Prime (unknown counts as absent,
  ``limit_unknown``; Golden needs none; Chathouse from the dialog snapshot before any read,
  Prime from the live ``chat_restriction`` answer read with the history); the TU has not mailed since the source event
  (``tu_mailed_since``).  The Task Factory still applies its own table when the candidate arrives.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Iterable

from platform_clients.mail import Letter, MailHistory
from sidecar.core.rng import KeyedRandom
from sidecar.domain.favorites import Favorite, standing_refusal
from sidecar.services.follow_up_mail import marker as mk
from sidecar.services.follow_up_mail import sources as src

RETRY_S = 60.0  # a post-chat timer whose history read failed is tried again this much later
MAIL_TYPES = frozenset({"unanswered_mail", "follow_up_mail"})  # DESIGN §6 mail strength row
__all__ = ["Letter", "MailHistory", "PairState", "MailCandidate", "Note", "PairDecision", "Plan",
           "eligibility", "refusal", "limit_refusal", "plan", "decide", "failed"]


@dataclass(frozen=True, slots=True)
class PairState:
    """What the service knows of one pair at the check (the runtime fills it from its state).

    ``favorite``: Stack's favorite row (``active``, ``is_white``, ``blocked_by_tu``,
    ``blocked_by_ru``) or None; ``freeloader``: the project client's verdict; ``open_types``: the
    pair's open task types; ``mail_limit``: Chathouse from the dialog snapshot, None = unknown."""

    ru: str
    favorite: Favorite | None
    freeloader: bool
    online: bool
    open_types: frozenset[str] = frozenset()
    has_limits: bool = False
    live_limits: bool = False  # Prime: the limit is read live with the history (list values may be cached)
    mail_limit: int | None = None
    marker: mk.MailMarker = field(default_factory=mk.MailMarker)
    last_follow_up_mail_closed_at: float | None = None
    processed_reads: frozenset[str] = frozenset()  # read event keys already processed in this run


@dataclass(frozen=True, slots=True)
class MailCandidate:
    """The one candidate of a joint check, for the Task Factory (``follow_up_mail``)."""

    ru: str
    source: str  # sources.PRIORITY name
    ref: str  # source task id / statistics event key / ""
    online_required: bool  # False: post_chat (the task may be made for an offline RU)
    merged: tuple[str, ...] = ()  # other sources this check also satisfied


@dataclass(frozen=True, slots=True)
class Note:
    """One decision-log row (DESIGN §13): ``outcome`` ``candidate`` | ``refused:<reason>`` |
    ``miss`` | ``merged:<source>``."""

    ru: str
    source: str
    ref: str
    outcome: str


@dataclass(slots=True)
class PairDecision:
    candidate: MailCandidate | None = None
    notes: list[Note] = field(default_factory=list)
    changes: list[mk.MarkerChange] = field(default_factory=list)
    marker: mk.MailMarker = field(default_factory=mk.MailMarker)
    retry_at: float | None = None  # re-check the post-chat timer then (after an API error)


def eligibility(pair: PairState, online_required: bool) -> str | None:
    """The part of the final check that needs no platform read; None = pass."""
    return refusal(pair.favorite, pair.freeloader, pair.online,
                   not MAIL_TYPES.isdisjoint(pair.open_types), online_required)


def refusal(favorite: Favorite | None, freeloader: bool, online: bool, mail_task_open: bool,
            online_required: bool) -> str | None:
    """:func:`eligibility` from the few facts it reads, for a caller with no other use for a
    whole :class:`PairState` (the 6 h source re-checks every online pair on every full RU Online
    pass).  ``mail_task_open``: an Unanswered mail or a Follow-up mail of the pair is open."""
    why = standing_refusal(favorite)
    if why is not None:
        return why
    assert favorite is not None  # refused above
    if freeloader:
        return "freeloader"
    if favorite.blocked:
        return "blocked"
    if online_required and not online:
        return "offline"
    if mail_task_open:
        return "stronger_task_open"
    return None


def limit_refusal(pair: PairState, history: MailHistory | None) -> str | None:
    """Chathouse/Prime need a mail limit (live from the read when it carried one)."""
    if not pair.has_limits:
        return None
    limit = history.mail_limit if history is not None and history.mail_limit is not None else pair.mail_limit
    if limit is None:
        return "limit_unknown"
    return "no_mail_limit" if limit <= 0 else None


def _pre(pair: PairState, t: src.Trigger) -> str | None:
    if t.source == src.MAIL_READ:
        if t.ref in pair.processed_reads:
            return "read_already_processed"  # a re-sent statistics snapshot (marker.set_read)
        reason = src.read_refusal(pair.marker, t, "follow_up_mail" in pair.open_types,
                                  pair.last_follow_up_mail_closed_at)
        if reason is not None:
            return reason
    if t.source == src.BURST and pair.marker.last_burst_source == t.ref:
        return "burst_already_processed"
    return eligibility(pair, t.online_required)


@dataclass(frozen=True, slots=True)
class Plan:
    """``live``: triggers that need the history; ``settled``: the others, already decided;
    ``read``: True when one mail-history read must be made (and is shared by all ``live``)."""

    live: tuple[src.Trigger, ...]
    settled: PairDecision
    read: bool


def plan(tu: str, pair: PairState, triggers: Iterable[src.Trigger]) -> Plan:
    """Settle what fails without the platform.  A settled trigger still counts as a successful
    check (no API was involved): its read key / burst close is recorded."""
    live: list[src.Trigger] = []
    d = PairDecision(marker=pair.marker)
    seen: set[tuple[str, str]] = set()
    for t in triggers:
        if (t.source, t.ref) in seen:
            continue  # the same trigger twice in one lock is one check
        seen.add((t.source, t.ref))
        reason = _pre(pair, t)
        if reason is None and not pair.live_limits:
            reason = limit_refusal(pair, None)  # Chathouse: the snapshot's limit decides, no read
        if reason is None:
            live.append(t)
            continue
        d.notes.append(Note(pair.ru, t.source, t.ref, f"refused:{reason}"))
        if not reason.endswith("already_processed"):  # a repeat is not a new check: no marker move
            _record(tu, pair, d, t)
    return Plan(tuple(live), d, bool(live))


def _record(tu: str, pair: PairState, d: PairDecision, t: src.Trigger, why: str = "") -> None:
    """The marker effects of a successfully checked trigger — none for a pair with no favorite:
    the marker is a field of Stack's favorite row (DESIGN §9, seed 001 "Маркер"), so an RU that
    is no favorite (a stranger reading the TU's letter; every RU while a slow Stack startup has
    listed no favorites yet) is refused ``not_favorite`` and nothing is recorded (writing it
    failed the step: ``TuRuntime.write_marker`` refuses a marker of a non-favorite)."""
    if pair.favorite is None:
        return
    ru = pair.ru
    change: mk.MarkerChange | None = None
    if t.source == src.MAIL_READ:
        d.marker, change = mk.set_read(tu, ru, d.marker, t.ref)
    elif t.source == src.BURST:
        d.marker, change = mk.set_burst(tu, ru, d.marker, t.ref)
    elif t.source == src.POST_CHAT and d.marker.post_chat_source == t.ref:
        d.marker, change = mk.clear_post_chat(tu, ru, d.marker, why or "post_chat_checked")
    if change is not None:
        d.changes.append(change)


def decide(rng: KeyedRandom, tu: str, pair: PairState, p: Plan, history: MailHistory,
           now: float) -> PairDecision:
    """The joint check after the one history read; at most one candidate.  Pure: the plan is not
    changed, so the same plan and answer always give the same decision."""
    d = _copy(p.settled)
    passing: list[src.Trigger] = []
    limit = limit_refusal(pair, history)
    for t in sorted(p.live, key=lambda t: src.PRIORITY.index(t.source)):
        reason: str | None
        if t.source == src.POST_CHAT and history.tu_mailed_after(t.at):
            reason = "tu_mailed_since"  # seed 001: the marker is deleted
        else:
            reason = limit
            if reason is None and t.source == src.LAST_MAIL_6H:
                reason = src.six_hour_refusal(history.last_tu_at, now)
            if reason is None and t.source != src.LAST_MAIL_6H and history.tu_mailed_after(t.at):
                reason = "tu_mailed_since"
        _record(tu, pair, d, t, "tu_mailed_since" if reason == "tu_mailed_since" else "")
        if reason is not None:
            d.notes.append(Note(pair.ru, t.source, t.ref, f"refused:{reason}"))
            continue
        if t.source == src.BURST and not src.burst_roll(rng, tu, pair.ru, t.ref):
            d.notes.append(Note(pair.ru, t.source, t.ref, "miss"))
            continue
        passing.append(t)
    if passing:
        win = passing[0]  # PRIORITY order; an offline pair only has post_chat left (plan)
        d.candidate = MailCandidate(pair.ru, win.source, win.ref, win.online_required,
                                    tuple(t.source for t in passing if t is not win))
        for t in passing:
            d.notes.append(Note(pair.ru, t.source, t.ref,
                                "candidate" if t is win else f"merged:{win.source}"))
    return d


def _copy(d: PairDecision) -> PairDecision:
    return replace(d, notes=list(d.notes), changes=list(d.changes))


def failed(pair: PairState, p: Plan, now: float) -> PairDecision:
    """The history read failed: every live trigger is refused ``history_error``; the marker
    does not move; a post-chat timer is retried after :data:`RETRY_S`."""
    d = _copy(p.settled)
    for t in p.live:
        d.notes.append(Note(pair.ru, t.source, t.ref, "refused:history_error"))
        if t.source == src.POST_CHAT:
            d.retry_at = now + RETRY_S
    return d
