"""The claims table shows only what seed 000 states for the recipe given (issue 23 item 5)."""
from __future__ import annotations

from electron_stub.fleet import compute
from electron_stub.fleet_claims import recipes
from sidecar.senders.groups import Group


def _g(**kw) -> Group:
    return Group(id=kw.pop("id", "g"), name="g", priority=kw.pop("priority", 1), **kw)


def test_recipes_are_recognised_from_the_groups_fields():
    assert recipes([]) == ["prod"]
    assert recipes([_g(cooldown_delay_from=15, cooldown_delay_to=45)]) == ["fast"]
    assert recipes([_g(failed_in_row=3, cooldown_delay_from=120, cooldown_delay_to=240)]) == ["long"]
    assert recipes([_g(cooldown_delay_from=3, cooldown_delay_to=8)]) == ["short"]
    assert recipes([_g(cooldown_delay_from=20, cooldown_delay_to=30)]) == []
    day = _g(id="d", priority=2, cooldown_delay_from=15, cooldown_delay_to=45, from_time="08:00", to_time="20:00")
    night = _g(id="n", cooldown_delay_from=120, cooldown_delay_to=240, from_time="20:00", to_time="08:00")
    assert recipes([day, night]) == ["day_night"]  # a windowed 15–45 group is not the always-on recipe


def _claims(*groups: str, share: float | None = None) -> list[dict]:
    return compute(30, 2, list(groups), share, None, 0)["claims"]


def test_the_15_45_figure_belongs_to_its_recipe_only():
    fast = _claims("cooldown_delay_from=15,cooldown_delay_to=45", share=0.5)
    assert any("3–5 h" in c["seed"] for c in fast)
    for other in (_claims("failed_in_row=3,cooldown_delay_from=120,cooldown_delay_to=240"),
                  _claims("cooldown_delay_from=20,cooldown_delay_to=30"), _claims()):
        assert not any("3–5 h" in c["seed"] for c in other)


def test_long_rest_recipe_claims_compare_the_cohort():
    rows = {c["claim"]: c for c in _claims("failed_in_row=3,cooldown_delay_from=120,cooldown_delay_to=240", share=0.5)}
    fits = rows["the warm-up always fits (cohort neutral exits)"]
    assert fits["seed"] == "0" and fits["recipe"] == "0"


def test_no_seed_figure_says_so_and_prod_mix_gets_section_5():
    assert any("states no figure" in c["claim"] for c in _claims("cooldown_delay_from=20,cooldown_delay_to=30"))
    prod = [c for c in _claims() if c["source"] == "seed 000 §5"]
    assert [c["claim"] for c in prod] == ["exits proven", "exits fail-open", "exits neutral"]
