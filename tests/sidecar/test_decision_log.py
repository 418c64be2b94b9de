"""The decision log's memory (DESIGN §13): a refusal re-checked every pass is logged once per
change, and telling a repeat early (before its detail is built) writes exactly what the full path
writes — nothing for a repeat, the same row and Stack candidate write otherwise."""
from __future__ import annotations

from sidecar.domain.tasks import TaskType
from sidecar.runtime.decisions import DecisionLog, record_outcome
from sidecar.runtime.step import Step
from sidecar.store.ops import PutDecision

TU, RU = "tu-1", "ru-1"


class Rt:
    """The :class:`~sidecar.runtime.decisions.Recorder` a service hands in; counts look-ups."""

    def __init__(self, blocking: TaskType | None = TaskType.UNANSWERED_MAIL) -> None:
        self.tu = TU
        self.decisions = DecisionLog()
        self.blocking = blocking
        self.lookups = 0

    def blocking_type(self, ru: str, type_: TaskType) -> TaskType | None:
        self.lookups += 1
        return self.blocking


def logged(rt: Rt, at: float, outcome: str, source: str = "last_mail_6h",
           type_: TaskType = TaskType.FOLLOW_UP_MAIL, **kw) -> tuple[bool, Step]:
    step = Step(now=at)
    return record_outcome(step, rt, RU, type_, source, outcome, **kw), step


def rows(step: Step) -> list[tuple[str, str, dict]]:
    return [(op.source, op.outcome, op.detail) for op in step.ops if isinstance(op, PutDecision)]


def test_a_repeated_refusal_writes_nothing_and_looks_nothing_up():
    rt = Rt()
    ok, first = logged(rt, 10.0, "refused:stronger_task_open")
    assert ok and rows(first) == [("last_mail_6h", "refused:stronger_task_open",
                                   {"open_type": "unanswered_mail"})]
    assert len(first.events) == 1 and rt.lookups == 1  # the Stack candidate write
    for at in (10.0, 25.0, 40.0):  # every later pass, and the same instant again
        ok, again = logged(rt, at, "stronger_task_open")
        assert not ok and again.ops == [] and again.events == []
    assert rt.lookups == 1 and rt.decisions.logged == 1


def test_a_refusal_is_logged_again_after_another_outcome_and_per_source_and_type():
    rt = Rt()
    assert logged(rt, 10.0, "offline")[0]
    assert logged(rt, 20.0, "refused:white")[0]
    assert logged(rt, 30.0, "offline")[0]  # changed back: logged again
    assert logged(rt, 30.0, "offline", source="post_chat")[0]  # another source
    assert logged(rt, 30.0, "offline", type_=TaskType.FOLLOW_UP_MESSAGE)[0]  # another type
    assert not logged(rt, 40.0, "offline")[0]
    assert rt.decisions.logged == 5


def test_other_outcomes_repeat_only_at_the_same_instant():
    rt = Rt()
    assert logged(rt, 10.0, "miss", source="chain")[0]
    assert not logged(rt, 10.0, "miss", source="chain")[0]  # one fact reported twice in one step
    assert logged(rt, 11.0, "miss", source="chain")[0]
    assert logged(rt, 12.0, "created", source="chain", task_id="t-1")[0]
    assert logged(rt, 13.0, "created", source="chain", task_id="t-2")[0]


def test_repeated_agrees_with_admit():
    log = DecisionLog()
    key = (TU, RU, "follow_up_mail", "last_mail_6h")
    assert not log.repeated(key, "refused:offline", 1.0)
    log.last[key] = ("refused:offline", 1.0)
    assert log.repeated(key, "refused:offline", 5.0)
    assert not log.repeated(key, "refused:white", 5.0)
    log.last[key] = ("miss", 1.0)
    assert log.repeated(key, "miss", 1.0) and not log.repeated(key, "miss", 2.0)
