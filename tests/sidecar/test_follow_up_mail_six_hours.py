"""The 6 h source judged again only for pairs whose facts changed (issue 24 lever 3; seed 001
"Останній лист TU старший за 6 годин", DESIGN §13's decision log): a pair refused for its
favorite value alone is not judged again while that value and the log's last word stand, and
what the log holds is exactly what judging every pair on every pass writes."""
from __future__ import annotations

import pytest

from sidecar.services.follow_up_mail import check
from sidecar.services.follow_up_mail.service import FollowUpMailService
from sidecar.store.ops import PutDecision
from tests.sidecar.world import World, fav

TU, RU = "tu-1", "ru-1"


def world(project: str = "golden", **fav_kw) -> World:
    w = World(project, TU, 3, follow_up_mail=True)
    w.online.add(RU)
    w.online.add("ru-stranger")  # online, never a favorite
    w.login([fav(RU, project, **fav_kw)])
    return w


def six_h(w: World) -> list[tuple[str, str]]:
    return [(op.ru, op.outcome) for op in w.d.ops if isinstance(op, PutDecision)
            and op.task_type == "follow_up_mail" and op.source == "last_mail_6h"]


def service(w: World) -> FollowUpMailService:
    svc = w.d.engine.tus[TU].services.named("follow_up_mail")
    assert isinstance(svc, FollowUpMailService)
    return svc


class _Forgetful(dict):
    """A memo that never remembers: every pass judges every pair (the reference behaviour)."""

    def get(self, key, default=None):  # type: ignore[override]
        return default


def test_an_unchanged_refused_pair_is_not_judged_again(monkeypatch):
    w = world(is_white=True)
    w.at(60)  # the first grid passes: both pairs refused, each logged once
    calls = []
    real = check.refusal
    monkeypatch.setattr(check, "refusal", lambda *a: calls.append(a) or real(*a))
    w.at(60, 600)  # 40 passes that change nothing
    assert calls == []
    assert sorted(six_h(w)) == [(RU, "refused:white"), ("ru-stranger", "refused:not_favorite")]


def test_a_new_favorite_value_is_judged_again_and_each_change_of_refusal_is_logged():
    w = world(is_white=True)
    w.at(60)
    w.d.favorite(TU, RU, is_white=False, active=False)
    w.at(120)
    w.d.favorite(TU, RU, is_white=True, active=True)
    w.at(180)
    assert [o for ru, o in six_h(w) if ru == RU] == ["refused:white", "refused:inactive", "refused:white"]


def test_another_outcome_logged_for_the_source_meanwhile_logs_the_refusal_again():
    w = world(is_white=True)
    w.at(60)
    log = w.d.engine.tus[TU].decisions
    key = (TU, RU, "follow_up_mail", "last_mail_6h")
    log.last[key] = ("refused:tu_mail_recent", w.d.now)  # the log's last word is no longer "white"
    w.at(120)
    assert [o for ru, o in six_h(w) if ru == RU] == ["refused:white", "refused:white"]


def test_a_new_session_judges_and_logs_again():
    w = world(is_white=True)
    w.at(60)
    w.d.logout(TU)
    w.login([fav(RU, "golden", is_white=True)])
    w.at(120)
    assert [o for ru, o in six_h(w) if ru == RU] == ["refused:white", "refused:white"]


@pytest.mark.parametrize("project", ["golden", "chathouse", "prime"])
def test_the_log_and_every_op_are_those_of_judging_every_pair_on_every_pass(project):
    """The same story twice — the favorite's value moving through every refusal and back to
    eligible, a mail task opening and closing, a logout — once with the memo, once judging every
    pair on every pass: the same ops in the same order."""
    runs = []
    for forgetful in (False, True):
        w = world(project, is_white=True)
        if forgetful:
            service(w).six_hour_pass.refused = _Forgetful()
        w.at(60)
        for i, change in enumerate([{"is_white": False, "active": False}, {"active": True},
                                    {"paid_actions": 0, "spend_total_usd": 0.0,
                                     "paid_with_bonuses_only": True},
                                    {"paid_actions": 40, "spend_total_usd": 400.0,
                                     "paid_with_bonuses_only": False, "is_white": True},
                                    {"is_white": False}]):
            w.d.favorite(TU, RU, **change)
            w.at(60, 300.0 * (i + 1))
        for task in w.d.created("follow_up_mail"):
            w.d.close(task.task_id)
        w.at(60, 7200)
        w.d.logout(TU)
        w.login([fav(RU, project, is_white=True)])
        w.at(60, 7500)
        runs.append(list(w.d.ops))
    assert runs[0] == runs[1]
    assert any(isinstance(op, PutDecision) and op.source == "last_mail_6h" for op in runs[0])
