"""Follow-up mail decision core (seed 001; DESIGN §8, §9): marker codec and keys, each source on
exact virtual instants, the final check, and the per-pair lock (one read, ≤ 1 candidate)."""
from __future__ import annotations

from dataclasses import replace

import msgspec
import pytest

from platform_clients.mail import Letter, MailHistory
from sidecar.core.clock import from_iso
from sidecar.core.rng import KeyedRandom
from sidecar.domain.favorites import Favorite
from sidecar.domain.tasks import HistoryRow
from sidecar.services.follow_up_mail import check as ck
from sidecar.services.follow_up_mail import lock as lk
from sidecar.services.follow_up_mail import marker as mk
from sidecar.services.follow_up_mail import sources as src

T0 = from_iso("2026-11-30T08:00:00Z")
TU, RU = "g-tu-1", "g-ru-1"
RNG = KeyedRandom(3)
FAV = Favorite(ru=RU, active=True, is_white=False, blocked_by_tu=False, blocked_by_ru=False)


def pair(**kw) -> ck.PairState:
    base = dict(ru=RU, favorite=FAV, freeloader=False, online=True)
    base.update(kw)
    return ck.PairState(**base)


def run(p: ck.PairState, triggers, history: MailHistory, now: float) -> ck.PairDecision:
    pl = ck.plan(TU, p, triggers)
    return ck.decide(RNG, TU, p, pl, history, now)


# ---- marker and keys ---------------------------------------------------------------------------

def test_marker_round_trip_to_the_millisecond():
    m = mk.MailMarker("u-1", T0 + 700.1234, "u-0", "rd-1")
    v = m.to_value()
    assert v == {"postChatSourceTaskId": "u-1", "postChatDueAt": "2026-11-30T08:11:40.123Z",
                 "lastBurstSourceTaskId": "u-0", "lastReadEventKey": "rd-1"}
    assert mk.decode(v).marker == replace(m, post_chat_due_at=T0 + 700.123)
    assert mk.MailMarker().to_value() is None and mk.decode(None).marker == mk.MailMarker()


def test_marker_decode_keeps_readable_fields_and_names_the_bad_ones():
    d = mk.decode({"postChatSourceTaskId": "u-1", "postChatDueAt": "not a date",
                   "lastReadEventKey": 7, "lastBurstSourceTaskId": "u-0"})
    assert d.marker == mk.MailMarker(last_burst_source="u-0")
    assert set(d.dropped) == {"postChatDueAt", "lastReadEventKey", "postChatSourceTaskId"}  # half a timer
    assert mk.decode([1]).dropped == ("<value>",)


def test_keys_name_field_ref_and_operation_and_never_repeat():
    m, set_ = src.on_unanswered_answered(RNG, TU, RU, mk.MailMarker(), "u-1", T0)
    assert set_.key == f"followUpMail:{TU}:{RU}:postChat:u-1:set"
    m, clear = src.on_unanswered_created(TU, RU, m)
    assert clear is not None and clear.key == f"followUpMail:{TU}:{RU}:postChat:u-1:clear"
    assert clear.value is None
    m, burst = mk.set_burst(TU, RU, m, "u-7")
    m, read = mk.set_read(TU, RU, m, "rd-1")
    assert burst is not None and burst.key.endswith(":burst:u-7:set")
    assert read is not None and read.key == (
        f"followUpMail:{TU}:{RU}:read:rd-1~{mk.body_digest(read.value)}:set")
    assert read.value == {"lastBurstSourceTaskId": "u-7", "lastReadEventKey": "rd-1"}  # whole marker
    assert mk.set_read(TU, RU, m, "rd-1")[1] is None  # unchanged: no write, no second body
    assert len({set_.key, clear.key, burst.key, read.key}) == 4


# ---- post-chat ---------------------------------------------------------------------------------

def test_post_chat_due_in_600_to_1200_s_keyed():
    m, _ = src.on_unanswered_answered(RNG, TU, RU, mk.MailMarker(), "u-1", T0 + 20)
    assert 600 <= m.post_chat_due_at - (T0 + 20) <= 1200
    again, _ = src.on_unanswered_answered(KeyedRandom(3), TU, RU, mk.MailMarker(), "u-1", T0 + 20)
    assert again == m  # another machine draws the same instant
    due = m.post_chat_due_at
    assert src.post_chat_trigger(m, due - 0.001, T0 + 20) is None
    t = src.post_chat_trigger(m, due, T0 + 20)
    assert t == src.Trigger("post_chat", "u-1", T0 + 20, online_required=False)
    assert src.post_chat_closed_at(RNG, TU, RU, m) == pytest.approx(T0 + 20, abs=0.002)


def test_post_chat_created_for_an_offline_ru_and_consumed():
    m, _ = src.on_unanswered_answered(RNG, TU, RU, mk.MailMarker(), "u-1", T0 + 20)
    p = pair(online=False, marker=m)
    t = src.post_chat_trigger(m, m.post_chat_due_at + 3600, T0 + 20)  # overdue at restore: at once
    d = run(p, [t], MailHistory((Letter("ml-0", "tu", T0 - 3600),)), m.post_chat_due_at + 3600)
    assert d.candidate == ck.MailCandidate(RU, "post_chat", "u-1", False)
    assert d.marker.post_chat_source is None and d.changes[0].key.endswith("postChat:u-1:clear")


def test_post_chat_dropped_when_the_tu_mailed_after_the_source():
    m, _ = src.on_unanswered_answered(RNG, TU, RU, mk.MailMarker(), "u-1", T0 + 20)
    t = src.post_chat_trigger(m, m.post_chat_due_at, T0 + 20)
    d = run(pair(marker=m), [t], MailHistory((Letter("ml-1", "tu", T0 + 300),)), m.post_chat_due_at)
    assert d.candidate is None and d.notes[-1].outcome == "refused:tu_mailed_since"
    assert d.marker.post_chat_source is None and d.changes[0].reason == "tu_mailed_since"
    # the socket's MailOut drops it at once, before the due instant
    assert src.on_tu_mailed(TU, RU, m, T0 + 300, T0 + 20)[0].post_chat_source is None
    assert src.on_tu_mailed(TU, RU, m, T0 + 10, T0 + 20)[1] is None  # before the close: kept


def test_new_unanswered_cancels_and_its_close_sets_a_new_timer():
    m, _ = src.on_unanswered_answered(RNG, TU, RU, mk.MailMarker(), "u-1", T0)
    m, c = src.on_unanswered_created(TU, RU, m)
    assert c is not None and not m.post_chat_pending
    m, s = src.on_unanswered_answered(RNG, TU, RU, m, "u-2", T0 + 500)
    assert m.post_chat_source == "u-2" and 1100 <= m.post_chat_due_at - T0 <= 1700


def test_post_chat_history_error_moves_nothing_and_retries():
    m, _ = src.on_unanswered_answered(RNG, TU, RU, mk.MailMarker(), "u-1", T0)
    p = pair(marker=m)
    now = m.post_chat_due_at
    d = ck.failed(p, ck.plan(TU, p, [src.post_chat_trigger(m, now, T0)]), now)
    assert d.changes == [] and d.marker == m and d.retry_at == now + ck.RETRY_S
    assert d.notes[0].outcome == "refused:history_error"


# ---- mail read -------------------------------------------------------------------------------

def test_read_source_absent_on_prime():
    assert src.read_trigger(False, "rd-1", T0) is None
    assert src.read_trigger(True, "rd-1", T0) == src.Trigger("mail_read", "rd-1", T0)


@pytest.mark.parametrize("marker,open_types,closed_at,history,outcome", [
    (mk.MailMarker(), frozenset(), None, (), "candidate"),
    (mk.MailMarker(last_read_event_key="rd-1"), frozenset(), None, (), "refused:read_already_processed"),
    (mk.MailMarker(), frozenset({"follow_up_mail"}), None, (), "refused:stronger_task_open"),
    (mk.MailMarker(), frozenset(), T0 + 100, (), "refused:follow_up_mail_after_read"),
    (mk.MailMarker(), frozenset(), T0 + 99.999, (), "candidate"),
    (mk.MailMarker(), frozenset(), None, (Letter("ml-1", "tu", T0 + 100.001),), "refused:tu_mailed_since"),
    (mk.MailMarker(), frozenset(), None, (Letter("ml-1", "ru", T0 + 120),), "candidate"),
])
def test_read_four_new_event_conditions(marker, open_types, closed_at, history, outcome):
    p = pair(marker=marker, open_types=open_types, last_follow_up_mail_closed_at=closed_at)
    d = run(p, [src.Trigger("mail_read", "rd-1", T0 + 100)], MailHistory(history), T0 + 101)
    assert d.notes[-1].outcome == outcome
    # a successful check moves the key whether or not a task was made
    assert d.marker.last_read_event_key == "rd-1"


def test_read_event_processed_in_this_run_is_not_processed_again():
    p = pair(marker=mk.MailMarker(last_read_event_key="rd-1"), processed_reads=frozenset({"rd-0", "rd-1"}))
    pl = ck.plan(TU, p, [src.Trigger("mail_read", "rd-0", T0)])
    assert not pl.read and pl.settled.notes[0].outcome == "refused:read_already_processed"
    assert pl.settled.changes == []


def test_read_api_error_does_not_move_the_key():
    p = pair()
    pl = ck.plan(TU, p, [src.Trigger("mail_read", "rd-1", T0)])
    assert pl.read and ck.failed(p, pl, T0).marker.last_read_event_key is None


# ---- burst -----------------------------------------------------------------------------------

def test_burst_needs_more_than_five_closes_in_600_s():
    closes = [T0 + 20 + 50 * i for i in range(6)]  # 20, 70, ..., 270 (scenario m04)
    assert src.burst_trigger(mk.MailMarker(), closes[:5], "u-4", closes[4]) is None
    assert src.burst_trigger(mk.MailMarker(), closes, "u-5", closes[5]) == src.Trigger("burst", "u-5", closes[5])
    assert src.burst_count(closes, closes[0] + 600) == 5  # the close 600 s before is out
    assert src.burst_trigger(mk.MailMarker(last_burst_source="u-5"), closes, "u-5", closes[5]) is None


def test_burst_rolls_once_per_close_and_records_a_miss():
    tids = [f"u-{i}" for i in range(40)]
    hits = {t for t in tids if src.burst_roll(RNG, TU, RU, t)}
    miss = next(t for t in tids if t not in hits)
    hit = next(iter(hits))
    d = run(pair(), [src.Trigger("burst", miss, T0)], MailHistory(), T0)
    assert d.candidate is None and d.notes[-1].outcome == "miss" and d.marker.last_burst_source == miss
    # after a restart the marker says processed: no second roll
    assert src.burst_trigger(d.marker, [T0] * 6, miss, T0) is None
    d = run(pair(), [src.Trigger("burst", hit, T0)], MailHistory(), T0)
    assert d.candidate is not None and d.candidate.source == "burst"


def test_burst_rate_is_half_within_noise():
    """10 000 keyed rolls: binomial sd = 50; 4 sd = 200 keeps a correct 50 % inside with
    probability 1 − 6e-5, and a 47 % or 53 % rule outside."""
    n = sum(src.burst_roll(RNG, TU, f"ru-{i % 100}", f"u-{i}") for i in range(10_000))
    assert abs(n - 5000) <= 200


# ---- notification ---------------------------------------------------------------------------

def test_notification_only_chathouse_and_no_chat_limit():
    assert src.notification_trigger("chathouse", "RECENT_PURCHASE", 0, T0, "n-1") == \
        src.Trigger("notification", "n-1", T0)
    assert src.notification_trigger("chathouse", "ONLINE_NOW", None, T0) is not None  # unknown = absent
    assert src.notification_trigger("chathouse", "ONLINE_NOW", 2, T0) is None
    assert src.notification_trigger("prime", "ONLINE_NOW", 0, T0) is None
    assert src.notification_trigger("chathouse", "OTHER", 0, T0) is None


@pytest.mark.parametrize("limit,outcome", [(1, "candidate"), (0, "refused:no_mail_limit"),
                                           (None, "refused:limit_unknown")])
def test_notification_needs_a_mail_limit(limit, outcome):
    p = pair(has_limits=True, mail_limit=limit)
    pl = ck.plan(TU, p, [src.notification_trigger("chathouse", "RECENT_PURCHASE", 0, T0 + 10)])
    assert pl.read is (outcome == "candidate")  # Chathouse: the snapshot's limit, no read wasted
    d = ck.decide(RNG, TU, p, pl, MailHistory((Letter("ml-0", "tu", T0 - 3600),)), T0 + 10)
    assert d.notes[-1].outcome == outcome


def test_prime_live_limit_from_the_read_wins_over_the_snapshot():
    p = pair(has_limits=True, live_limits=True, mail_limit=0)  # the list value may be cached
    pl = ck.plan(TU, p, [src.Trigger("last_mail_6h", "", T0)])
    assert pl.read
    assert ck.decide(RNG, TU, p, pl, MailHistory((), mail_limit=2), T0).candidate is not None
    pl = ck.plan(TU, p, [src.Trigger("last_mail_6h", "", T0)])
    d = ck.decide(RNG, TU, p, pl, MailHistory((), mail_limit=0), T0)
    assert d.notes[-1].outcome == "refused:no_mail_limit"


# ---- last TU mail older than 6 h ----------------------------------------------------------------

def test_six_hours_exact_boundary_and_never_mailed():
    now = T0
    t = src.six_hour_trigger(now, False, False, None)
    older = MailHistory((Letter("ml-0", "tu", now - 21600.001),))
    exact = MailHistory((Letter("ml-0", "tu", now - 21600),))
    assert run(pair(), [t], older, now).candidate is not None
    assert run(pair(), [t], exact, now).notes[-1].outcome == "refused:tu_mail_recent"
    assert run(pair(), [t], MailHistory((Letter("r", "ru", now - 10),)), now).candidate is not None


def test_six_hours_skipped_and_at_most_once_per_6h():
    assert src.six_hour_trigger(T0, True, False, None) is None  # a mail task open
    assert src.six_hour_trigger(T0, False, True, None) is None  # another source pending
    assert src.six_hour_trigger(T0, False, False, T0 - 21599) is None
    assert src.six_hour_trigger(T0, False, False, T0 - 21600) is not None


# ---- final check ---------------------------------------------------------------------------

@pytest.mark.parametrize("change,reason", [
    (dict(favorite=None), "not_favorite"),
    (dict(favorite=msgspec.structs.replace(FAV, active=False)), "inactive"),
    (dict(favorite=msgspec.structs.replace(FAV, is_white=True)), "white"),
    (dict(freeloader=True), "freeloader"),
    (dict(favorite=msgspec.structs.replace(FAV, blocked_by_ru=True)), "blocked"),
    (dict(favorite=msgspec.structs.replace(FAV, blocked_by_tu=True)), "blocked"),
    (dict(online=False), "offline"),
    (dict(open_types=frozenset({"unanswered_mail"})), "stronger_task_open"),
    (dict(open_types=frozenset({"follow_up_mail"})), "stronger_task_open"),
])
def test_final_check_refusals_need_no_read(change, reason):
    p = pair(**change)
    pl = ck.plan(TU, p, [src.Trigger("last_mail_6h", "", T0)])
    assert not pl.read and pl.settled.notes == [ck.Note(RU, "last_mail_6h", "", f"refused:{reason}")]


def test_offline_post_chat_still_refused_for_a_freeloader_and_consumed():
    m, _ = src.on_unanswered_answered(RNG, TU, RU, mk.MailMarker(), "u-1", T0)
    p = pair(online=False, freeloader=True, marker=m)
    pl = ck.plan(TU, p, [src.post_chat_trigger(m, m.post_chat_due_at, T0)])
    assert not pl.read and pl.settled.notes[0].outcome == "refused:freeloader"
    assert pl.settled.marker.post_chat_source is None


# ---- the lock -----------------------------------------------------------------------------------

def test_sources_ready_together_share_one_read_and_make_one_candidate():
    m, _ = src.on_unanswered_answered(RNG, TU, RU, mk.MailMarker(), "u-1", T0)
    now = m.post_chat_due_at
    hit = next(t for t in (f"u-{i}" for i in range(40)) if src.burst_roll(RNG, TU, RU, t))
    triggers = [src.Trigger("last_mail_6h", "", now), src.Trigger("mail_read", "rd-1", now - 5),
                src.post_chat_trigger(m, now, T0), src.Trigger("burst", hit, now - 1),
                src.Trigger("mail_read", "rd-1", now - 5)]
    p = pair(marker=m)
    pl = ck.plan(TU, p, triggers)
    assert pl.read and len(pl.live) == 4  # one read for all four (the duplicate is one)
    d = ck.decide(RNG, TU, p, pl, MailHistory(), now)
    assert ck.decide(RNG, TU, p, pl, MailHistory(), now) == d  # pure: the plan is not consumed
    assert d.candidate is not None and d.candidate.source == "post_chat"
    assert set(d.candidate.merged) == {"mail_read", "burst", "last_mail_6h"}
    assert [n.outcome for n in d.notes].count("candidate") == 1
    assert d.marker == mk.MailMarker(last_burst_source=hit, last_read_event_key="rd-1")
    assert [c.reason for c in d.changes] == ["post_chat_checked", "read_processed", "burst_processed"]


# ---- restore -----------------------------------------------------------------------------------

def _row(task_id, closed_at, reason):
    return HistoryRow(task_id=task_id, type="unanswered_message", ru=RU, created_at=closed_at - 60,
                      closed_at=closed_at, reason=reason)


def _restore(value, **kw):
    args = dict(last_unanswered=_row("u-1", T0, "answered"),
                unanswered_open=False, post_chat_mail_sources=(), marker_cleared=False)
    args.update(kw)
    return src.restore_post_chat(RNG, TU, RU, value, **args)


def test_restore_marker_wins_and_overdue_is_checked_at_once():
    live, _ = src.on_unanswered_answered(RNG, TU, RU, mk.MailMarker(), "u-1", T0)
    r = _restore(live.to_value())
    assert r.marker == live and r.change is None and r.closed_at == T0
    assert src.post_chat_trigger(r.marker, T0 + 5000, r.closed_at).source == "post_chat"
    # a marker of another source: its close is re-derived exactly from the keyed delay
    r = _restore(live.to_value(), last_unanswered=_row("u-0", T0 - 9, "answered"))
    assert r.closed_at == pytest.approx(T0, abs=0.002)


def test_restore_from_history_on_a_fresh_machine_uses_the_live_draw():
    live, change = src.on_unanswered_answered(RNG, TU, RU, mk.MailMarker(), "u-1", T0)
    r = _restore(None)
    assert r.marker == live and r.change == change  # same key, same body: idempotent on Stack


@pytest.mark.parametrize("kw", [
    dict(marker_cleared=True),  # consumed or cancelled: a fact, never rebuilt
    dict(post_chat_mail_sources=("u-1",)),  # its mail was made
    dict(unanswered_open=True),  # the open Unanswered's close sets the timer
    dict(last_unanswered=_row("u-1", T0, "dismissed")),
    dict(last_unanswered=None),
])
def test_restore_never_revives_a_finished_timer(kw):
    r = _restore(None, **kw)
    assert not r.marker.post_chat_pending and r.change is None


def test_restore_keeps_burst_and_read_state_without_re_rolling():
    r = _restore({"lastBurstSourceTaskId": "u-9", "lastReadEventKey": "rd-3"})
    assert r.marker == mk.MailMarker(last_burst_source="u-9", last_read_event_key="rd-3")
    assert r.change is None  # the marker exists: the close's timer was consumed before


# ---- the lock -----------------------------------------------------------------------------------

def test_lock_batches_a_pair_and_holds_later_triggers_behind_the_read():
    locks = lk.PairLocks()
    a, b = src.Trigger("mail_read", "rd-1", T0), src.Trigger("burst", "u-6", T0)
    assert locks.offer(RU, a) and locks.offer(RU, b) and not locks.offer(RU, a)
    assert locks.offer("other", src.Trigger("last_mail_6h", "", T0))
    assert locks.pending(RU, "burst") and not locks.pending(RU, "post_chat")
    assert locks.flush() == {RU: (a, b), "other": (src.Trigger("last_mail_6h", "", T0),)}
    assert not locks.offer(RU, a)  # in flight: the same check
    c = src.Trigger("notification", "n-1", T0 + 1)
    assert locks.offer(RU, c) and locks.flush() == {}  # waits for the read in flight
    assert locks.release(RU) and locks.flush() == {RU: (c,)}
    assert not locks.release(RU) and not locks.pending(RU)
    locks.drop()
    assert locks.flush() == {}


# ---- one key, one body ------------------------------------------------------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

OPS = st.lists(st.tuples(st.sampled_from(["close", "new_u", "read", "burst", "tu_mail", "check"]),
                         st.integers(0, 3)), max_size=40)


@settings(max_examples=200, deadline=None)
@given(OPS)
def test_no_idempotency_key_ever_carries_two_bodies(ops):
    """Any order of closes, cancels, reads (keys may repeat), burst closes, TU mails and due
    checks: every key maps to exactly one body (DESIGN §9), and a clear never reuses a set's key."""
    m, seen, n_close, now = mk.MailMarker(), {}, 0, T0
    for op, k in ops:
        now += 100
        change = None
        if op == "close":
            n_close += 1
            m, change = src.on_unanswered_answered(RNG, TU, RU, m, f"u-{n_close}", now)
        elif op == "new_u":
            m, change = src.on_unanswered_created(TU, RU, m)
        elif op == "read":
            m, change = mk.set_read(TU, RU, m, f"rd-{k}")
        elif op == "burst" and n_close:
            m, change = mk.set_burst(TU, RU, m, f"u-{n_close}")
        elif op == "tu_mail":
            m, change = src.on_tu_mailed(TU, RU, m, now, src.post_chat_closed_at(RNG, TU, RU, m))
        elif op == "check" and m.post_chat_pending:
            t = src.post_chat_trigger(m, m.post_chat_due_at, None)
            d = run(pair(marker=m), [t], MailHistory(), m.post_chat_due_at)
            m = d.marker
            for c in d.changes:
                assert seen.setdefault(c.key, c.value) == c.value
        if change is not None:
            assert seen.setdefault(change.key, change.value) == change.value, change.key
    assert all(k.endswith((":set", ":clear")) for k in seen)
