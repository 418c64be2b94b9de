"""The decision log (DESIGN §13, §9): every candidate with its outcome and reason, chain misses
and removals, each written in the step that decided it, with the Stack candidate write beside it;
pruned after 7 days.  Virtual clock, exact instants."""
from __future__ import annotations

import msgspec
import pytest

from sidecar.runtime.decisions import RETENTION_S, explain, refused
from sidecar.services import chain as ch
from sidecar.store.ops import PruneDecisions, PruneTasks, PutDecision
from tests.sidecar.driver import stack_writes
from tests.sidecar.world import T0, World, fav

TU, RU = "tu-1", "ru-1"


def rows(w: World, ru: str = RU) -> list[tuple[float, str, str, str]]:
    """(seconds from T0, type, source, outcome) of every decision row written for ``ru``."""
    return [(round(op.at - T0, 3), op.task_type, op.source, op.outcome)
            for op in w.d.ops if isinstance(op, PutDecision) and op.ru == ru]


def candidates(w: World, ru: str = RU) -> list[dict]:
    return [msgspec.json.decode(d.message) for d in stack_writes(w.d.ops, "candidates")
            if msgspec.json.decode(d.message)["ru"] == ru]


def chain_to_first_follow_up(w: World) -> tuple[str, float]:
    w.at(10).ru_writes(RU)
    src = w.open_task("unanswered_message", RU).task_id
    w.at(20).tu_writes(RU)
    due = ch.ms(T0 + 20 + ch.delay(w.d.engine.rng, TU, RU, src, 0))
    return src, due


def test_created_tasks_are_logged_with_their_trigger_and_sent_to_stack():
    w = World()
    w.login([fav(RU)])
    _, due = chain_to_first_follow_up(w)
    w.at_abs(due)
    fu = w.open_task("follow_up_message", RU)
    assert rows(w) == [(10.0, "unanswered_message", "socket", "created"),
                       (round(due - T0, 3), "follow_up_message", "chain", "created")]
    sent = candidates(w)
    assert [(c["type"], c["source"], c["outcome"]) for c in sent] == [
        ("unanswered_message", "socket", "created"), ("follow_up_message", "chain", "created")]
    assert sent[1]["task_id"] == fu.task_id and sent[1]["at"] == due


def test_the_decision_and_its_candidate_are_ops_of_the_step_that_decided():
    from sidecar.services.base import Step
    from sidecar.store.ops import PutTask
    w = World()
    w.login([fav(RU)])
    step = Step(now=T0 + 10)
    w.d.engine.platform_event(step, TU, "golden", "receivePrivateMessage", {
        "messageId": "m1", "senderId": RU, "recipientId": TU, "sentAt": T0 + 10, "text": "hi"})
    kinds = [type(op).__name__ for op in step.ops]
    assert "PutTask" in kinds and "PutDecision" in kinds
    # the Stack writes are routing events of the same step (the executor routes them into its commit)
    assert {e.source for e in step.events} == {"candidates", "tasks"}
    assert all(e.write is not None for e in step.events)
    [task] = [op.task for op in step.ops if isinstance(op, PutTask)]
    [dec] = [op for op in step.ops if isinstance(op, PutDecision)]
    assert (dec.task_id, dec.outcome, dec.at) == (task.task_id, "created", T0 + 10)
    assert len(step.events) >= 2  # the task event and the candidate: routed with the commit


def test_a_refusal_rechecked_every_pass_is_logged_once_until_the_outcome_changes():
    w = World()
    w.login([fav(RU)])
    _, due = chain_to_first_follow_up(w)
    w.at_abs(due - 1)
    w.d.event(TU, "golden", "receivePrivateMessage",  # a rose: a Like task is open at the check
              {"messageId": "rose-1", "senderId": RU, "recipientId": TU, "sentAt": w.d.now, "text": "🌹"})
    assert w.open_task("like", RU) is not None
    w.at_abs(due + 200)  # the online pass re-checks the refused hit every 15 s
    refusals = [r for r in rows(w) if r[2] == "chain"]
    assert refusals == [(round(due - T0, 3), "follow_up_message", "chain", "refused:stronger_task_open")]
    [held] = [op for op in w.d.ops if isinstance(op, PutDecision) and op.outcome == "refused:stronger_task_open"]
    assert held.detail["open_type"] == "like"  # the shift lead reads which task held it back
    like = w.open_task("like", RU)
    w.at_abs(due + 201).tu_writes(RU)  # answers the Like; the due attempt is re-checked at once
    assert w.open_task("like", RU) is None
    assert rows(w)[-1] == (round(due + 201 - T0, 3), "follow_up_message", "chain", "created")
    assert like is not None


def test_chain_miss_and_removal_after_three_attempts_are_logged():
    for seed in range(400):
        w = World(seed=seed)
        w.login([fav(RU)])
        src, due0 = chain_to_first_follow_up(w)
        rng = w.d.engine.rng
        if not ch.roll(rng, TU, RU, src, 1)[1] and not ch.roll(rng, TU, RU, src, 2)[1]:
            break
    else:
        pytest.fail("no seed with two misses")
    w.at_abs(due0)
    w.at_abs(due0 + 10).tu_writes(RU)
    due1 = ch.ms(due0 + 10 + ch.delay(rng, TU, RU, src, 1))
    due2 = ch.ms(due1 + ch.delay(rng, TU, RU, src, 2))
    w.at_abs(due2)
    chain_rows = [r for r in rows(w) if r[2] == "chain"]
    assert chain_rows == [
        (round(due0 - T0, 3), "follow_up_message", "chain", "created"),
        (round(due1 - T0, 3), "follow_up_message", "chain", "miss"),
        (round(due2 - T0, 3), "follow_up_message", "chain", "miss"),
        (round(due2 - T0, 3), "follow_up_message", "chain", "removed:attempts_done")]
    misses = [op for op in w.d.ops if isinstance(op, PutDecision) and op.outcome == "miss"]
    assert [(m.detail["step"], m.detail["chance"]) for m in misses] == [(1, 0.75), (2, 0.5)]
    # a miss is a candidate outcome Stack hears of; a removal is local only
    assert [c["outcome"] for c in candidates(w)].count("miss") == 2
    assert "removed:attempts_done" not in [c["outcome"] for c in candidates(w)]


def test_block_and_new_unanswered_removals_name_their_reason():
    w = World()
    w.login([fav(RU)])
    chain_to_first_follow_up(w)
    w.at(30).ru_writes(RU)  # scenario 9: the RU writes mid-chain
    assert rows(w)[-2:] == [(30.0, "follow_up_message", "chain", "removed:new_unanswered"),
                            (30.0, "unanswered_message", "socket", "created")]
    w.at(40).tu_writes(RU)  # a new chain
    w.at(50).d.favorite(TU, RU, blocked_by_ru=True)
    assert rows(w)[-1] == (50.0, "follow_up_message", "chain", "removed:blocked")


def test_plain_check_refusal_is_logged_with_the_final_check_reason():
    w = World(project="chathouse")
    w.limits[RU] = (0, 1)  # no chat limit
    w.chat[RU] = [{"id": "old", "from": "tu", "at": T0 - 7200, "kind": "message"}]
    w.online.add(RU)
    w.login([fav(RU, "chathouse", chat_limit=0)])
    w.at(120)
    assert (("follow_up_message", "over_60m", "refused:no_chat_limit")
            in [r[1:] for r in rows(w)])
    assert w.d.created("follow_up_message") == []
    assert sum(1 for r in rows(w) if r[2] == "over_60m") == 1  # not once per 60 s pass


def test_login_prunes_decisions_and_closed_tasks_past_seven_days():
    w = World()
    w.login([fav(RU)])
    prune = [op for op in w.d.ops if isinstance(op, (PruneDecisions, PruneTasks))]
    assert prune == [PruneDecisions(before=T0 - RETENTION_S), PruneTasks(closed_before=T0 - RETENTION_S)]
    w.at(86400)  # and once a day while the TU stays logged in
    prune = [op for op in w.d.ops if isinstance(op, PruneDecisions)]
    assert prune[-1] == PruneDecisions(before=T0 + 86400 - RETENTION_S)
    w.d.logout(TU)
    assert len(w.d.engine.scheduler) == 0  # the daily timer goes with the last TU


@pytest.mark.parametrize("reason, outcome, detail", [
    ("offline", "refused:offline", {}),
    ("open", "refused:stronger_task_open", {}),
    ("stronger_task:like", "refused:stronger_task_open", {"open_type": "like"}),
    ("refused:no_chat_limit", "refused:no_chat_limit", {}),
])
def test_refusal_reasons_use_the_design_names(reason, outcome, detail):
    assert refused(reason) == (outcome, detail)


def test_explain_reads_like_a_sentence():
    base = {"type": "follow_up_message", "source": "chain", "task_id": None}
    assert explain({**base, "outcome": "refused:offline", "detail": {}}) == \
        "follow_up_message (chain) refused: the customer was offline"
    assert explain({**base, "outcome": "miss", "detail": {"step": 1, "chance": 0.75}}) == \
        "follow_up_message (chain) attempt 2 of 3: the roll missed (75% chance)"
    assert explain({**base, "outcome": "removed:past_60m", "detail": {}}).startswith(
        "follow_up_message (chain) chain removed: 60 minutes passed")
    assert explain({**base, "outcome": "refused:something_new", "detail": {}}).endswith("something new")


def test_an_attempt_due_while_the_ru_is_offline_is_logged_as_refused_offline_once():
    w = World()
    w.login([fav(RU)])
    _, due = chain_to_first_follow_up(w)
    w.online.discard(RU)
    w.at_abs(due + 300)  # online passes every 15 s keep saying offline
    assert [r for r in rows(w) if r[2] == "chain"] == [
        (round(due - T0, 3), "follow_up_message", "chain", "refused:offline")]
    w.online.add(RU)
    w.at_abs(due + 320)  # back online: the due attempt runs at the next pass
    assert rows(w)[-1][2:] == ("chain", "created")


def test_an_answered_unanswered_of_a_non_favorite_says_why_no_chain_started():
    w = World()
    w.login([fav("ru-2", is_white=True)])
    for ru in (RU, "ru-2"):
        w.at(10).ru_writes(ru)
        w.at(20).tu_writes(ru)
    assert rows(w, RU)[-1] == (20.0, "follow_up_message", "chain", "refused:not_favorite")
    assert rows(w, "ru-2")[-1] == (20.0, "follow_up_message", "chain", "refused:white")
    assert w.d.created("follow_up_message") == []


def test_open_limits_refused_for_an_unknown_limit_is_logged_once_then_created():
    """DESIGN §6 "unknown counts as absent": the Open Limits refusal ``limit_unknown`` reaches the
    decision log (and Stack) once, not at every check chat, and the task made when a row finally
    carries the limit is logged as created."""
    other = "ru-9"
    w = World(project="chathouse")
    w.limits[other] = (None, None)
    w.new_rows[other] = {"userId": other, "dialogId": None, "lastMessage": None, "chatLimit": None}
    w.login([])
    slot = w.d.engine.tus[TU].due_of(("passes", "check_chat"))
    w.at_abs(slot)  # a second check chat: still unknown, not logged again
    assert rows(w, other) == [(0.0, "open_limits", "scroll_new", "refused:limit_unknown")]
    assert [c["outcome"] for c in candidates(w, other)] == ["refused:limit_unknown"]
    w.new_rows[other]["chatLimit"] = 2
    slot = w.d.engine.tus[TU].due_of(("passes", "check_chat"))
    w.at_abs(slot)
    assert rows(w, other)[1:] == [(round(slot - T0, 3), "open_limits", "scroll_new", "created")]
