"""Stack startup data validation (found by the breaker: a wrongly shaped favorite made a TU
impossible to log in, a string spend broke every later event of that RU)."""
from __future__ import annotations

import msgspec
import pytest

from sidecar.domain.favorites import Favorite
from sidecar.stack.startup import favorite_of, parse_startup

GOOD = {"ru": "r1", "active": True, "spend_30d_usd": 10.0, "markers": {}}


def test_bad_rows_are_skipped_good_ones_kept():
    data = {"favorites": [GOOD, "str", None, {"active": True}, {"ru": "r2", "markers": []},
                          {"ru": "r3", "spend_30d_usd": "lots"}, {"ru": ""}],
            "history": [{"task_id": "h", "type": "unanswered_message", "ru": "r1", "created_at": 1.0},
                        {"task_id": "x", "type": "like"}, 7]}
    s = parse_startup("tu", data)
    assert [f.ru for f in s.favorites] == ["r1"]
    assert [h.task_id for h in s.history] == ["h"]
    assert s.skipped == 8


def test_unusable_answers_mean_local_state():
    for data in (None, [], "x", {"favorites": {"ru": "r"}}, {"history": "no"}):
        assert parse_startup("tu", data) is None
    # no ``favorites`` key is Stack having no list for the TU (DESIGN §9/§12.5 revised, issue 22
    # item 2), not an empty one: None, which the login makes visible
    assert parse_startup("tu", {}).favorites is None


def test_a_startup_row_becomes_one_frozen_favorite_with_stacks_defaults():
    """Converted once at the edge (issue 12): what the row leaves out takes Stack's defaults
    (active, not white, not blocked); the value is frozen."""
    fav = parse_startup("tu", {"favorites": [GOOD]}).favorites[0]
    assert type(fav) is Favorite
    assert fav == Favorite(ru="r1", active=True, is_white=False, spend_30d_usd=10.0,
                           paid_with_bonuses_only=False, blocked_by_tu=False, blocked_by_ru=False,
                           markers={})
    with pytest.raises(AttributeError):
        fav.active = False  # type: ignore[misc]
    with pytest.raises(msgspec.ValidationError):
        favorite_of({"ru": "r", "active": "yes"})
