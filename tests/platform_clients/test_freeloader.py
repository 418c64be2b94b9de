"""Seed 003 "Фрілоадери" (criteria from the Plan decision), read by Follow-up mail's final check
(seed 001 "не freeloader"): Golden — a "bonus" favorite whose spend total is 0; Chathouse — pays
only with bonuses; Prime — fewer than 11 paid actions."""
from __future__ import annotations

import pytest

from platform_clients import client_for
from sidecar.domain.favorites import Favorite


@pytest.mark.parametrize("project,attrs,freeloader", [
    ("golden", {"spend_total_usd": 0.0}, True),
    ("golden", {"spend_total_usd": 0.01}, False),
    ("golden", {"spend_total_usd": 400.0, "paid_with_bonuses_only": True, "paid_actions": 0}, False),
    ("chathouse", {"paid_with_bonuses_only": True, "spend_total_usd": 400.0, "paid_actions": 40}, True),
    ("chathouse", {"paid_with_bonuses_only": False, "spend_total_usd": 0.0, "paid_actions": 0}, False),
    ("prime", {"paid_actions": 10, "spend_total_usd": 400.0}, True),
    ("prime", {"paid_actions": 11, "spend_total_usd": 0.0, "paid_with_bonuses_only": True}, False),
])
def test_each_platform_applies_its_own_freeloader_rule_only(project, attrs, freeloader):
    assert client_for(project).is_freeloader(Favorite(ru="ru-1", **attrs)) is freeloader
