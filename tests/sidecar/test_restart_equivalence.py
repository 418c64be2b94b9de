"""Crash equivalence at a restart (issue 18 item 6; DESIGN §5): a sidecar killed and restarted
between two RU Online grid slots makes the same tasks at the same instants as one that never
stopped.  Virtual clock, production step executor; :meth:`World.restart` resumes the session.

The 6 h Follow-up mail source (seed 001 "Останній лист TU старший за 6 годин", "Ініціалізація";
DESIGN §8.1): the TU's last letter turns 6 h old just after a grid slot and the sidecar is killed
before the next one.  The sidecar that never stopped makes the mail at the next grid slot; the
restarted one used to make it at its login's pass — the crash instant — because every full pass
judged the source, the login's included.  Then Follow-up message's plain check likewise; the
offline expiry is in ``test_factory.py``."""
from __future__ import annotations

import pytest

from sidecar.services.follow_up_mail import sources as src
from tests.sidecar.world import T0, World, fav

TU, RU = "tu-1", "ru-1"


def six_hour_mails(w: World) -> list[float]:
    return [t.created_at for t in w.d.created("follow_up_mail") if t.source == src.LAST_MAIL_6H]


def run(project: str, crash_after: float | None) -> tuple[list[float], float]:
    """The world of the module docstring; ``crash_after``: s after the letter turns 6 h old at
    which the sidecar is killed and restarted (None: never).  Returns the 6 h mails' instants
    and the grid slot the letter's turning lies behind."""
    w = World(project, TU, 3, follow_up_mail=True)
    w.online.add(RU)
    w.mails[RU] = []
    w.login([fav(RU, project)])
    slot = w.pass_slot(T0 + 1000)  # a grid slot ≥ 1000 s in: passes before it read a recent letter
    turns = slot + 0.25  # the letter turns 6 h old here, after the slot's pass
    w.mails[RU].append({"id": "ml-0", "from": "tu", "at": turns - src.SIX_HOURS_S})
    w.at(10)  # the first grid pass reads it: recent
    assert six_hour_mails(w) == []
    if crash_after is not None:
        w.at_abs(turns + crash_after)
        w = w.restart()  # its login's pass sees the RU online, the letter older than 6 h
    w.at_abs(slot + 3 * 60.0 + 1)
    return six_hour_mails(w), slot


@pytest.mark.parametrize("project", ["golden", "chathouse", "prime"])
def test_a_restart_between_grid_passes_makes_the_6h_mail_at_the_clean_runs_instant(project):
    clean, slot = run(project, None)
    next_slot = clean[0] if clean else None
    assert len(clean) == 1 and slot < next_slot <= slot + 60.0, (clean, slot)  # the next grid pass
    crashed, _ = run(project, crash_after=0.5)
    assert crashed == clean, (project, crashed, clean)


def test_the_login_pass_of_a_fresh_login_judges_no_6h_mail_and_the_first_grid_pass_does():
    """The same rule at any login: the 6 h source judges grid passes only (seed 001: "перевіряється
    з наступного RU Online snapshot"), so the first check is at most one period after the login."""
    w = World("golden", TU, 3, follow_up_mail=True)
    w.online.add(RU)
    w.login([fav(RU)])  # the TU never mailed: older than 6 h (DESIGN §8.1)
    assert six_hour_mails(w) == []
    w.at(16)
    assert six_hour_mails(w) == [w.pass_slot(T0)]


def follow_ups(w: World) -> list[tuple[str, float]]:
    return [(t.source, t.created_at) for t in w.d.created("follow_up_message")]


@pytest.mark.parametrize("project", ["chathouse", "prime"])
def test_a_restart_makes_the_over_60m_follow_up_at_the_next_grid_pass_not_at_its_login(project):
    """Follow-up message's plain check ("over 60 min", DESIGN §7) runs on every RU Online pass.
    The RU comes online (no activity of its own) between two grid slots and the sidecar is killed
    then: the restarted one's login pass sees it online, the one that never stopped only at its
    next grid pass.  A resumed session (its session row outlived the process) judges nothing at
    its login's passes, so both make the task at that grid pass."""
    made = {}
    for crash in (False, True):
        w = World(project, TU, 3)
        w.chat[RU] = [{"id": "a", "from": "tu", "at": T0 - 7200}]  # the TU wrote last, 2 h ago
        w.login([fav(RU, project)])  # the RU is offline
        slot = w.pass_slot(T0 + 600)
        w.at_abs(slot + 0.25)
        assert follow_ups(w) == []
        w.online.add(RU)  # online in the platform's list only
        w.at_abs(slot + 0.5)
        if crash:
            w = w.restart()
            assert follow_ups(w) == []  # not at the crash instant
        w.at_abs(slot + 61.0)
        made[crash] = follow_ups(w)
    assert made[True] == made[False] == [("over_60m", w.pass_slot(slot))], made
