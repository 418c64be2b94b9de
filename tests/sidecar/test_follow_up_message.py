"""Follow-up message service on the virtual clock: seed 003 scenarios 1–10 and seed 004's
removal rules, with exact times derived from the same keyed draws the service uses."""
from __future__ import annotations

import pytest

from sidecar.core.clock import to_iso
from sidecar.core.rng import KeyedRandom
from sidecar.services import chain as ch
from tests.sidecar.world import T0, World, fav

TU, RU = "tu-1", "ru-1"


def answered_unanswered(w: World, at_ru: float, at_tu: float) -> str:
    """RU writes at ``at_ru``, the TU answers at ``at_tu``; returns the Unanswered task id."""
    w.at(at_ru).ru_writes(RU)
    task = w.open_task("unanswered_message", RU)
    w.at(at_tu).tu_writes(RU)
    assert w.open_task("unanswered_message", RU) is None
    return task.task_id


def fu(w: World, source: str = "chain"):
    return [t for t in w.d.created("follow_up_message") if t.source == source]


def seed_where(pred, limit: int = 500) -> int:
    """A deployment seed whose keyed draws satisfy ``pred(rng)`` (to steer hit/miss paths)."""
    for seed in range(limit):
        if pred(KeyedRandom(seed)):
            return seed
    raise AssertionError("no seed found")


def test_scenario_2_chain_starts_at_close_with_keyed_delay():
    w = World()
    w.login([fav(RU)])
    src = answered_unanswered(w, 10, 20)
    delay = ch.delay(w.d.engine.rng, TU, RU, src, 0)
    assert 60 <= delay <= 180
    due = ch.ms(T0 + 20 + delay)
    assert w.markers(RU)[-1] == (f"followUpChat:{TU}:{RU}:{src}:0:set",
                                 {"sourceUnansweredTaskId": src, "step": 0,
                                  "nextCheckAt": to_iso(due)})
    w.at_abs(due - 0.001)
    assert fu(w) == []
    w.at_abs(due)
    [task] = fu(w)
    assert task.created_at == due
    assert task.deadline == task.created_at + 300


def test_scenario_1_and_9_new_unanswered_clears_and_restarts():
    w = World()
    w.login([fav(RU)])
    src = answered_unanswered(w, 10, 20)
    w.at(30).ru_writes(RU)  # mid-chain
    assert w.markers(RU)[-1] == (f"followUpChat:{TU}:{RU}:{src}:0:clear", None)
    task2 = w.open_task("unanswered_message", RU)
    w.at(100).tu_writes(RU)
    d2 = ch.delay(w.d.engine.rng, TU, RU, task2.task_id, 0)
    d_old = ch.delay(w.d.engine.rng, TU, RU, src, 0)
    due = ch.ms(T0 + 100 + d2)
    w.at_abs(due - 0.001)
    assert fu(w) == []  # the old chain's timer was cut
    w.at_abs(due)
    [task] = fu(w)
    assert task.created_at == due
    assert w.markers(RU)[-1][0] == f"followUpChat:{TU}:{RU}:{task2.task_id}:0:set"


def test_scenario_4_close_plans_next_step_from_close_time():
    seed = seed_where(lambda r: True)
    w = World(seed=seed)
    w.login([fav(RU)])
    src = answered_unanswered(w, 10, 20)
    rng = w.d.engine.rng
    d0 = ch.delay(rng, TU, RU, src, 0)
    due0 = ch.ms(T0 + 20 + d0)
    w.at_abs(due0)
    [first] = fu(w)
    closed_at = due0 + 40
    w.at_abs(closed_at).tu_writes(RU)  # the operator answers the Follow-up
    d1 = ch.delay(rng, TU, RU, src, 1)
    due1 = ch.ms(closed_at + d1)
    assert w.markers(RU)[-1][1] == {"sourceUnansweredTaskId": src, "step": 1,
                                    "nextCheckAt": to_iso(due1)}
    w.at_abs(due1)
    [a0, a1] = w.d.attempts()
    assert (a0.step, a0.chance, a0.outcome) == (0, 1.0, "created")
    assert (a1.step, a1.chance) == (1, 0.75)
    assert a1.at == due1


def test_scenario_8_misses_advance_at_check_time_and_end_at_three():
    def both_miss(r):
        return True
    w0 = World()
    w0.login([fav(RU)])
    # find a seed where steps 1 and 2 both miss for this exact chain
    for seed in range(400):
        w = World(seed=seed)
        w.login([fav(RU)])
        src = answered_unanswered(w, 10, 20)
        rng = w.d.engine.rng
        if not ch.roll(rng, TU, RU, src, 1)[1] and not ch.roll(rng, TU, RU, src, 2)[1]:
            break
    else:
        pytest.fail("no seed with two misses")
    due0 = ch.ms(T0 + 20 + ch.delay(rng, TU, RU, src, 0))
    w.at_abs(due0)
    [task] = fu(w)
    w.at_abs(due0 + 10).tu_writes(RU)  # closed → step 1 planned from the close
    due1 = ch.ms(due0 + 10 + ch.delay(rng, TU, RU, src, 1))
    w.at_abs(due1)  # miss → step 2 from the check time
    due2 = ch.ms(due1 + ch.delay(rng, TU, RU, src, 2))
    w.at_abs(due2)  # miss → finished
    values = [v for _, v in w.markers(RU)]
    assert [v["step"] for v in values] == [0, 1, 2, 3]
    assert values[2]["nextCheckAt"] == to_iso(due2)
    assert values[3] == {"sourceUnansweredTaskId": src, "step": 3, "nextCheckAt": None}
    assert [a.outcome for a in w.d.attempts()] == ["created", "miss", "miss"]
    w.at(3000)
    assert len(fu(w)) == 1


def test_scenario_5_offline_at_timer_then_online_at_once():
    w = World()
    w.login([fav(RU)])
    src = answered_unanswered(w, 10, 20)
    w.online.discard(RU)
    w.at(25)  # a Golden pass sees the RU gone (15 s period)
    w.at(40)
    d0 = ch.delay(w.d.engine.rng, TU, RU, src, 0)
    w.at_abs(ch.ms(T0 + 20 + d0) + 100)
    assert fu(w) == [] and w.d.attempts() == []
    assert w.markers(RU)[-1][1]["step"] == 0  # nothing changed
    w.online.add(RU)
    w.at_abs(ch.ms(T0 + 20 + d0) + 130)
    [task] = fu(w)
    # detected by the first Golden online pass after the RU came back (15 s grid)
    assert T0 + 20 + d0 + 100 < task.created_at <= T0 + 20 + d0 + 115


def test_scenario_7_offline_past_60_min_hands_over_to_over_60m():
    w = World()
    w.login([fav(RU)])
    answered_unanswered(w, 10, 20)
    w.online.discard(RU)
    w.at(4000)
    assert fu(w) == []
    w.online.add(RU)
    w.at(4020)
    assert fu(w, "chain") == []
    [task] = fu(w, "over_60m")
    assert T0 + 4000 < task.created_at <= T0 + 4015


def test_scenario_10_block_mid_chain_clears_marker_and_closes_task():
    w = World()
    w.login([fav(RU)])
    src = answered_unanswered(w, 10, 20)
    d0 = ch.delay(w.d.engine.rng, TU, RU, src, 0)
    w.at_abs(ch.ms(T0 + 20 + d0))
    [task] = fu(w)
    w.at_abs(ch.ms(T0 + 20 + d0) + 5).d.event(TU, "golden", "userBlocked",
                              {"blockerId": RU, "blockedId": TU, "blocked": True, "at": T0 + 20 + d0 + 5})
    assert [c.reason for c in w.d.closed("follow_up_message")] == ["blocked"]
    assert w.markers(RU)[-1] == (f"followUpChat:{TU}:{RU}:{src}:0:clear", None)
    w.at(5000)
    assert len(fu(w)) == 1


@pytest.mark.parametrize("change", [{"active": False}, {"is_white": True}])
def test_inactive_or_white_removes_chain_and_the_marker_records_where_it_ended(change):
    w = World()
    w.login([fav(RU)])
    src = answered_unanswered(w, 10, 20)
    n = len(w.markers(RU))
    w.at(30).d.favorite(TU, RU, **change)
    w.at(5000)
    assert fu(w) == []
    # not cleared: the record stays, saying the chain ended at step 0 (no next check)
    assert w.markers(RU)[n:] == [(f"followUpChat:{TU}:{RU}:{src}:0:end:set",
                                  {"sourceUnansweredTaskId": src, "step": 0, "nextCheckAt": None})]


def test_manual_send_does_not_advance_but_moves_boundary():
    w = World()
    w.login([fav(RU)])
    src = answered_unanswered(w, 10, 20)
    w.at(40).tu_writes(RU)
    assert [v["step"] for _, v in w.markers(RU)] == [0]
    chain = w.d.engine.tus[TU].by_name["follow_up_message"].pool[RU]
    assert chain.step == 0 and chain.last_tu_at == T0 + 40 and chain.boundary == T0 + 3640


def test_refused_hit_stays_due_and_is_created_when_blocker_closes():
    w = World()
    w.login([fav(RU)])
    src = answered_unanswered(w, 10, 20)
    d0 = ch.delay(w.d.engine.rng, TU, RU, src, 0)
    # a Like arrives before the check and stays open over it
    w.at_abs(ch.ms(T0 + 20 + d0) + -5).d.event(TU, "golden", "receivePrivateMessage",
                              {"messageId": "l", "senderId": RU, "recipientId": TU,
                               "sentAt": T0 + 20 + d0 - 5, "text": "🌹"})
    w.at_abs(ch.ms(T0 + 20 + d0))
    assert fu(w) == []
    assert w.d.attempts()[-1].outcome == "refused:stronger_task_open"
    like = w.open_task("like", RU)
    w.at_abs(ch.ms(T0 + 20 + d0) + 30).d.close(like.task_id, "dismissed")
    [task] = fu(w)
    assert task.created_at == ch.ms(T0 + 20 + d0) + 30
    assert [a.outcome for a in w.d.attempts()] == ["refused:stronger_task_open", "created"]


# restore (seed 003 scenarios 3 and 6) ---------------------------------------------------------

def hist(task_id: str, created: float, closed: float) -> dict:
    return {"task_id": task_id, "type": "unanswered_message", "project": "golden", "tu": TU,
            "ru": RU, "source": "socket", "created_at": T0 + created, "closed_at": T0 + closed,
            "reason": "answered"}


def test_scenario_3_restore_under_180s_uses_the_live_draw():
    w = World()
    w.online.add(RU)
    w.login([fav(RU)], [hist("h-1", -130, -100)])
    d0 = ch.delay(w.d.engine.rng, TU, RU, "h-1", 0)
    w.at(200)
    [task] = fu(w)
    assert task.created_at == max(T0, ch.ms(T0 - 100 + d0))


def test_scenario_3_restore_180s_to_1h_is_due_at_once():
    w = World()
    w.online.add(RU)
    w.login([fav(RU)], [hist("h-1", -930, -900)])
    [task] = fu(w)
    assert task.created_at == pytest.approx(T0, abs=1e-5)


def test_scenario_3_restore_past_1h_goes_to_over_60m():
    w = World()
    w.online.add(RU)
    w.chat[RU] = [{"id": "a", "from": "ru", "at": T0 - 4030}, {"id": "b", "from": "tu", "at": T0 - 4000}]
    w.login([fav(RU)], [hist("h-1", -4030, -4000)])
    assert fu(w, "chain") == []
    [task] = fu(w, "over_60m")
    assert task.created_at == pytest.approx(T0, abs=1e-5)


@pytest.mark.parametrize("next_at,expect", [(-30, 0.0), (50, 50.0)])
def test_scenario_6_marker_next_check_wins(next_at, expect):
    w = World()
    w.online.add(RU)
    marker = {"sourceUnansweredTaskId": "h-1", "step": 0, "nextCheckAt": to_iso(T0 + next_at)}
    w.login([fav(RU, markers={"followUpChat": marker})], [hist("h-1", -150, -120)])
    w.at(100)
    [task] = fu(w)
    assert task.created_at == pytest.approx(T0 + expect, abs=1e-5)


def test_restore_of_finished_chain_never_rebuilds():
    w = World()
    w.online.add(RU)
    marker = {"sourceUnansweredTaskId": "h-1", "step": 3, "nextCheckAt": None}
    w.login([fav(RU, markers={"followUpChat": marker})], [hist("h-1", -300, -200)])
    w.at(1000)
    assert fu(w, "chain") == []


def test_pending_local_marker_wins_over_stack():
    w = World()
    w.online.add(RU)
    stack_marker = {"sourceUnansweredTaskId": "h-1", "step": 0, "nextCheckAt": to_iso(T0 - 10)}
    local = {"sourceUnansweredTaskId": "h-1", "step": 3, "nextCheckAt": None}
    w.login([fav(RU, markers={"followUpChat": stack_marker})], [hist("h-1", -300, -200)],
            pending_markers={(RU, "followUpChat"): local})
    w.at(1000)
    assert fu(w, "chain") == []


def test_chathouse_notification_creates_without_chain_state():
    w = World(project="chathouse")
    w.chat[RU] = [{"id": "a", "from": "tu", "at": T0 - 600}]
    w.login([fav(RU, "chathouse")])
    w.at(10).d.event(TU, "chathouse", "new_notification",
                     {"type": "ONLINE_NOW", "userId": RU, "at": T0 + 10})
    [task] = fu(w, "notification")
    assert task.created_at == pytest.approx(T0 + 10, abs=1e-5)
    assert w.markers(RU) == []
    w.at(11).d.event(TU, "chathouse", "new_notification",
                     {"type": "RECENT_PURCHASE", "userId": RU, "at": T0 + 11})
    assert len(fu(w, "notification")) == 1  # the dialog is being worked: nothing


def test_chathouse_notification_needs_chat_limit():
    w = World(project="chathouse")
    w.login([fav(RU, "chathouse", chat_limit=0)])
    w.limits[RU] = (0, 1)
    w.at(10).d.event(TU, "chathouse", "new_notification",
                     {"type": "ONLINE_NOW", "userId": RU, "at": T0 + 10})
    assert fu(w, "notification") == []


def test_rus_own_message_wipes_an_overdue_chain_before_online_reminds():
    """The RU's message marks it online; the overdue attempt must not fire for that message —
    the new Unanswered message wipes the chain first (seed 003 scenario 1)."""
    w = World()
    w.login([fav(RU)])
    src = answered_unanswered(w, 10, 20)
    w.online.discard(RU)
    w.at(40)
    w.at(400)  # the chain is overdue, RU offline
    assert fu(w) == []
    w.at(401).ru_writes(RU)
    assert fu(w) == []
    assert w.markers(RU)[-1] == (f"followUpChat:{TU}:{RU}:{src}:0:clear", None)


def test_contact_is_durable_so_a_restart_judges_over_60m_alike():
    from sidecar.store.ops import PutState
    w = World(project="chathouse")
    w.chat[RU] = [{"id": "a", "from": "tu", "at": T0 - 7200}]
    w.online.add(RU)
    w.login([fav(RU, "chathouse")])  # the login pass sees the row: contact known and stored
    stored = {op.key: op.value for op in w.d.ops if isinstance(op, PutState) and op.scope == "contact"}
    assert stored == {RU: ["tu", T0 - 7200, T0 - 7200]}
    # a restarted sidecar whose first news of the RU is its notification (no pass row yet)
    w2 = World(project="chathouse")
    w2.login([fav(RU, "chathouse")], local_state={"contact": stored})
    w2.online.add(RU)
    w2.at(10).d.event(TU, "chathouse", "new_notification", {"type": "ONLINE_NOW", "userId": RU, "at": T0 + 10})
    assert [t.source for t in w2.d.created("follow_up_message")] == ["notification"]


def test_login_check_chat_runs_before_a_due_chain_is_checked():
    """An RU who wrote while the TU was logged out: the login's check chat raises the new
    Unanswered message (wiping the chain) before the online pass could remind (seed 003
    scenario 1 at login)."""
    w = World(project="chathouse")
    base = w.answer
    w.d.answer = lambda tu, method, params: (
        {"dialogs": [{"userId": RU, "dialogId": "d1", "isOnline": True,
                      "lastMessage": {"from": "ru", "at": T0 - 20, "type": "message"}}]}
        if method == "scroll_new" else base(tu, method, params))
    w.online.add(RU)
    marker = {"sourceUnansweredTaskId": "h-1", "step": 0, "nextCheckAt": to_iso(T0 - 60)}
    hist = {"task_id": "h-1", "type": "unanswered_message", "project": "chathouse", "tu": TU, "ru": RU,
            "source": "socket", "created_at": T0 - 400, "closed_at": T0 - 300, "reason": "answered"}
    w.login([fav(RU, "chathouse", markers={"followUpChat": marker})], [hist])
    assert [t.type for t in w.d.created()] == ["unanswered_message"]
    assert w.markers(RU)[-1] == (f"followUpChat:{TU}:{RU}:h-1:0:clear", None)
    assert [m for _, m, _ in w.d.requests][:2] == ["scroll_new", "scroll_all_online"]


def test_requests_chathouse_reads_no_history_golden_reads_online_ids_only():
    """DESIGN §7 "Requests": Chathouse/Prime use the online pass's dialog rows; Golden reads chat
    history for online RU ids only, once per unknown dialog."""
    ch_w = World(project="chathouse")
    ch_w.online.update({RU, "ru-2"})
    ch_w.login([fav(RU, "chathouse"), fav("ru-2", "chathouse"), fav("ru-3", "chathouse")])
    ch_w.at(600)
    methods = {m for _, m, _ in ch_w.d.requests}
    assert methods == {"scroll_all_online", "scroll_new"}

    g = World()
    g.online.update({RU, "ru-2"})
    g.login([fav(RU), fav("ru-2"), fav("ru-3"), fav("ru-4", is_white=True)])
    g.at(600)
    history = [p for _, m, p in g.d.requests if m == "chat_history"]
    assert history == [{"ru_ids": [RU, "ru-2"]}]  # online, chain-eligible, asked once


# issue 6 item 2 -- the chain's edge cases (DESIGN §7) -----------------------------------------

def chain_up(w: World, at_ru: float = 10, at_tu: float = 20) -> tuple[str, float]:
    """RU online, writes, the TU answers; returns (source, the first attempt's instant)."""
    w.online.add(RU)
    src = answered_unanswered(w, at_ru, at_tu)
    return src, ch.ms(T0 + at_tu + ch.delay(w.d.engine.rng, TU, RU, src, 0))


def test_logout_close_keeps_the_attempt_and_the_next_login_reruns_it_with_the_same_roll():
    w = World()
    w.login([fav(RU)])
    src, due = chain_up(w)
    w.at_abs(due)
    [first] = fu(w)
    w.at_abs(due + 50).d.logout(TU)
    assert [(c.type, c.reason) for c in w.d.closed("follow_up_message")] == [("follow_up_message", "logout")]
    assert [v["step"] for _, v in w.markers(RU)] == [0]  # the logout spent nothing
    # the next login on another machine: Stack holds the marker and the history rows
    stack_fav = fav(RU, markers={"followUpChat": w.markers(RU)[-1][1]})
    history = list(w.d.engine.tus[TU].history[RU]) if TU in w.d.engine.tus else None
    assert history is None  # logged out
    rows = [{"task_id": t.task_id, "type": t.type, "ru": RU, "source": t.source,
             "created_at": t.created_at, "closed_at": due + 50 if t.type == "follow_up_message" else T0 + 20,
             "reason": "logout" if t.type == "follow_up_message" else "answered"}
            for t in w.d.created()]
    w2 = World(seed=w.d.engine.rng.seed)
    w2.online.add(RU)
    w2.at_abs(due + 100)
    w2.login([stack_fav], rows)
    [again] = fu(w2)
    assert again.created_at == due + 100 and again.task_id != first.task_id
    assert [(a.step, a.outcome) for a in w2.d.attempts()] == [(0, "created")]
    assert w2.markers(RU) == []  # the marker was right already: nothing rewritten


def test_logout_close_is_not_counted_when_restoring_from_history_without_a_marker():
    rows = [hist("h-1", -130, -100),
            {"task_id": "f-1", "type": "follow_up_message", "ru": RU, "source": "chain",
             "created_at": T0 - 20, "closed_at": T0 - 10, "reason": "logout"}]
    w = World()
    w.online.add(RU)
    w.login([fav(RU)], rows)
    chain = w.d.engine.tus[TU].by_name["follow_up_message"].pool[RU]
    assert chain.step == 0 and chain.next_check_at == ch.ms(T0 - 100 + ch.delay(w.d.engine.rng, TU, RU, "h-1", 0))
    w.at(200)
    assert [t.source for t in fu(w)] == ["chain"]
    assert [(a.step, a.outcome) for a in w.d.attempts()] == [(0, "created")]


def test_final_check_runs_before_the_roll_so_a_refused_attempt_spends_no_miss():
    # a seed where step 1 (75 %) misses for this chain
    for seed in range(400):
        w = World(seed=seed)
        w.login([fav(RU)])
        src, due0 = chain_up(w)
        if not ch.roll(w.d.engine.rng, TU, RU, src, 1)[1]:
            break
    else:
        pytest.fail("no seed with a step-1 miss")
    rng = w.d.engine.rng
    w.at_abs(due0)
    w.at_abs(due0 + 10).tu_writes(RU)  # the Follow-up answered: step 1 planned from here
    due1 = ch.ms(due0 + 10 + ch.delay(rng, TU, RU, src, 1))
    w.at_abs(due1 - 5).d.event(TU, "golden", "receivePrivateMessage",
                               {"messageId": "l", "senderId": RU, "recipientId": TU,
                                "sentAt": due1 - 5, "text": "🌹"})  # a Like stays open over the check
    w.at_abs(due1)
    assert w.d.attempts()[-1].outcome == "refused:stronger_task_open"
    assert [v["step"] for _, v in w.markers(RU)] == [0, 1]  # nothing spent
    like = w.open_task("like", RU)
    w.at_abs(due1 + 40).d.close(like.task_id, "dismissed")  # now the conditions hold: roll → miss
    assert w.d.attempts()[-1].outcome == "miss"
    key, value = w.markers(RU)[-1]
    assert key == f"followUpChat:{TU}:{RU}:{src}:2:set"
    assert value["nextCheckAt"] == to_iso(ch.ms(due1 + 40 + ch.delay(rng, TU, RU, src, 2)))


def test_offline_expiry_is_a_close_that_plans_the_next_step():
    w = World()
    w.login([fav(RU)])
    src, due = chain_up(w)
    w.at_abs(due)
    [task] = fu(w)
    w.online.discard(RU)
    slot = w.d.engine.tus[TU].due_of(("passes", "online"))
    w.at_abs(slot)
    [c] = w.d.closed("follow_up_message")
    assert (c.reason, c.closed_at) == ("expired", slot)
    key, value = w.markers(RU)[-1]
    assert key == f"followUpChat:{TU}:{RU}:{src}:1:set"
    assert value["nextCheckAt"] == to_iso(ch.ms(slot + ch.delay(w.d.engine.rng, TU, RU, src, 1)))


def test_restore_draws_the_60_min_boundary_from_the_durable_last_contact():
    w = World()
    w.login([fav(RU)])
    src, due = chain_up(w)
    w.online.discard(RU)  # the RU leaves before the first attempt: the chain waits
    w.at(1000).tu_writes(RU)  # a manual send: the boundary moves to 1000 + 3600
    w.at(3700)
    live = w.d.engine.tus[TU].by_name["follow_up_message"].pool[RU]
    assert live.boundary == T0 + 4600
    w2 = w.restart()  # crash: restore from SQLite (contact) and the marker
    restored = w2.d.engine.tus[TU].by_name["follow_up_message"].pool.get(RU)
    assert restored is not None and restored.boundary == T0 + 4600
    w2.online.add(RU)
    w2.at(3800)
    assert [t.source for t in fu(w2)] == ["chain"]


def test_golden_restore_on_a_fresh_machine_reads_chat_history_before_checking():
    """A fresh machine has no contact record: on Golden the chat history (manual sends included)
    draws the boundary before the restored chain is checked."""
    rows = [hist("h-1", -3000, -2900)]
    w = World()
    w.chat[RU] = [{"id": "a", "from": "ru", "at": T0 - 3000},
                  {"id": "b", "from": "tu", "at": T0 - 2900},
                  {"id": "c", "from": "tu", "at": T0 - 200}]  # manual send, no task
    w.online.add(RU)
    w.at(800)  # 3700 s after the close, 1000 s after the TU's last message
    w.login([fav(RU)], rows)
    assert ("tu-1", "chat_history", {"ru_ids": [RU]}) in w.d.requests
    assert [t.source for t in fu(w)] == ["chain"]  # the chain lives: boundary at -200 + 3600


def test_a_chain_cleared_by_a_block_is_never_rebuilt_from_history():
    w = World()
    w.login([fav(RU)])
    src, due = chain_up(w)
    w.at(40).d.favorite(TU, RU, blocked_by_ru=True)
    assert w.markers(RU)[-1] == (f"followUpChat:{TU}:{RU}:{src}:0:clear", None)
    w.at(50).d.favorite(TU, RU, blocked_by_ru=False)
    # another machine logs in: Stack holds the cleared marker (null) and the answered Unanswered
    stack_fav = fav(RU, markers={"followUpChat": None})
    rows = [{"task_id": src, "type": "unanswered_message", "ru": RU, "source": "socket",
             "created_at": T0 + 10, "closed_at": T0 + 20, "reason": "answered"}]
    w2 = World(seed=w.d.engine.rng.seed)
    w2.online.add(RU)
    w2.at(60)
    w2.login([stack_fav], rows)
    w2.at(3000)
    assert fu(w2) == [] and w2.markers(RU) == []
    # and the crashed-and-restarted same machine agrees (local pending clear)
    w3 = w.restart()
    w3.at(3000)
    assert fu(w3) == [] and w3.markers(RU) == []


def test_no_idempotency_key_is_ever_reused_for_a_different_body():
    """Every Stack write a busy, shift-like run produces — chains, misses, refusals, blocks,
    logouts and re-logins, crashes — maps one key to one body."""
    import random

    import msgspec
    from tests.sidecar.driver import stack_writes
    rus = [f"ru-{i}" for i in range(6)]
    seen: dict[str, bytes] = {}
    total = 0
    for seed in range(6):
        pick = random.Random(seed)
        w = World(seed=seed)
        w.online.update(rus)
        w.login([fav(ru) for ru in rus])
        t = 0.0
        for _ in range(220):
            t += pick.uniform(5, 90)
            ru = pick.choice(rus)
            act = pick.random()
            w.at(t)
            if act < 0.3:
                w.ru_writes(ru)
            elif act < 0.6:
                w.tu_writes(ru)
            elif act < 0.68:
                w.online.symmetric_difference_update({ru})
            elif act < 0.72:
                w.d.favorite(TU, ru, blocked_by_ru=True)
            elif act < 0.76:
                w.d.favorite(TU, ru, blocked_by_ru=False)
            elif act < 0.79:
                w.d.logout(TU)
                w.d.login(TU, "golden", startup=w.startup, **w.local())
            elif act < 0.82:
                ops_before = list(w.d.ops)
                w = w.restart()
                w.d.ops[:0] = ops_before  # one history of writes across the crash
        for d in stack_writes(w.d.ops):  # every Stack write: the router's stack deliveries
            total += 1
            body = msgspec.json.encode(msgspec.json.decode(d.message))
            prev = seen.setdefault(f"{seed}|{d.idem_key}", body)
            assert prev == body, (d.idem_key, prev, body)
    assert total > 1000


def test_a_chain_ended_by_the_60_min_boundary_is_not_revived_by_later_tu_messages_at_restore():
    """Found by the shift's crash-equivalence check: the live chain ended at its boundary; later
    TU messages (an over-60-min reminder answered, a manual send) move the durable last contact,
    and a restore must not read them as a live chain's boundary."""
    w = World()
    w.login([fav(RU)])
    src = answered_unanswered(w, 10, 20)
    w.online.discard(RU)  # gone before the first attempt: the chain waits ...
    w.at(3620)  # ... until its boundary (the TU's last message at 20 + 3600)
    assert w.markers(RU)[-1] == (f"followUpChat:{TU}:{RU}:{src}:0:end:set",
                                 {"sourceUnansweredTaskId": src, "step": 0, "nextCheckAt": None})
    w.at(3700).tu_writes(RU)  # a manual send after the chain ended
    w.online.add(RU)
    w2 = w.restart()
    w2.at(4500)
    assert fu(w2, "chain") == [] and fu(w, "chain") == []
    assert w2.d.engine.tus[TU].by_name["follow_up_message"].pool == {}


@pytest.mark.parametrize("project", ["golden", "chathouse"])
def test_a_pass_judges_favorites_and_chains_only_never_a_stranger(project, monkeypatch):
    """Issue 24 lever 3: an online RU that is no favorite and has no chain is judged by none of
    the pass's checks (the plain check's first condition is an active favorite, seed 004 "Після
    60 хв"), so the pass does not look at it at all — while a favorite is still checked at each
    pass and its over-60-min task still comes."""
    from sidecar.services.follow_up_message import FollowUpMessageService

    w = World(project)
    for i in range(5):
        w.online.add(f"stranger-{i}")
        w.chat[f"stranger-{i}"] = [{"id": f"s{i}", "from": "tu", "at": T0 - 7200.0}]
    w.chat[RU] = [{"id": "m0", "from": "tu", "at": T0 - 7200.0}]
    w.online.add(RU)
    judged: list[str] = []
    plain = FollowUpMessageService._plain_check
    monkeypatch.setattr(FollowUpMessageService, "_plain_check",
                        lambda self, step, ru: judged.append(ru) or plain(self, step, ru))
    w.login([fav(RU, project)])
    w.at(300)
    assert judged and set(judged) == {RU}
    [task] = fu(w, "over_60m")
    assert task.ru == RU
