"""The frozen :class:`~sidecar.domain.favorites.Favorite` (issue 12 "typed state"): a value that
updates by replacement, converted once at the edges (Stack startup rows, store rows), shared —
not copied — by every pass that changes nothing."""
from __future__ import annotations

import re
from pathlib import Path

import msgspec
import pytest

from sidecar.domain.favorites import ATTRIBUTES, Favorite
from sidecar.store.ops import PutFavorite
from tests.sidecar.world import World, fav

ROOT = Path(__file__).resolve().parents[2]
TU, RU, OTHER = "tu-1", "ru-1", "ru-2"


def test_a_favorite_is_frozen_and_updates_make_new_values():
    f = Favorite(ru=RU, active=True, chat_limit=2, markers={"followUpChat": {"step": 1}})
    with pytest.raises(AttributeError):
        f.active = False  # type: ignore[misc]
    g = f.updated({"chat_limit": 0, "active": None, "markers": {"x": 1}})
    assert g is not None and (g.chat_limit, g.active, g.markers) == (0, True, f.markers)
    assert f.chat_limit == 2  # the old value is untouched
    assert f.updated({"chat_limit": 2, "is_white": None}) is None  # nothing changes: no new value
    with pytest.raises(ValueError, match="unknown attribute 'colour'"):
        f.updated({"colour": "red"})


def test_none_means_unknown_like_the_absent_key_it_replaces():
    pair = Favorite(ru=OTHER)  # a non-favorite pair nobody told anything yet
    assert pair.is_active and not pair.blocked and pair.limit("chat") is None
    told = pair.updated({"blocked_by_tu": False})  # "told False" differs from "never told"
    assert told is not None and told.blocked_by_tu is False
    assert not Favorite(ru=RU, active=False).is_active


def test_markers_are_replaced_never_mutated_and_a_clear_is_a_fact():
    f = Favorite(ru=RU)
    g = f.with_marker("followUpChat", {"step": 0})
    h = g.with_marker("followUpChat", None)
    assert f.markers == {} and g.markers == {"followUpChat": {"step": 0}}
    assert h.marker("followUpChat") is None and h.marker_cleared("followUpChat")
    assert not f.marker_cleared("followUpChat")  # never written is not cleared


def test_every_favorite_update_field_is_an_attribute():
    from sidecar.protocol import inbound as p
    wire = {f for f in p.FavoriteUpdate.__struct_fields__ if f not in ("tu", "ru", "project")}
    assert wire <= ATTRIBUTES


def test_the_runtime_holds_favorites_converted_once_and_shares_unchanged_ones():
    w = World(project="prime")
    w.online.update({RU, OTHER})
    w.login([fav(RU, "prime"), fav(OTHER, "prime")])
    rt = w.d.engine.tus[TU]
    assert all(type(f) is Favorite for f in rt.favorites.values())
    assert all(type(op.data) is Favorite for op in w.d.ops if isinstance(op, PutFavorite))
    before = dict(rt.favorites)
    w.at(300)  # several online passes whose rows change nothing
    assert all(rt.favorites[ru] is before[ru] for ru in before), "a pass copied unchanged favorites"
    w.at(310).d.favorite(TU, RU, spend_30d_usd=999.0)
    assert rt.favorites[RU] is not before[RU] and rt.favorites[RU].spend_30d_usd == 999.0
    assert rt.favorites[OTHER] is before[OTHER]  # only the changed one is replaced
    assert before[RU].spend_30d_usd == 50.0  # and the old value never changed under anyone


def test_a_restart_reads_the_stored_favorites_back_as_equal_values():
    w = World(project="chathouse")
    w.login([fav(RU, "chathouse", markers={"followUpChat": None})])
    local = w.local()["local_favorites"]
    assert local == w.d.engine.tus[TU].favorites


DICT_READS = re.compile(r"""\b(fav|after|before|attrs)\s*(\[\s*["']|\.get\(\s*["'])|\.get\(\s*["'](active|is_white|blocked_by_tu|blocked_by_ru|chat_limit|mail_limit|spend_30d_usd|markers)["']""")


def test_the_core_reads_attributes_not_dict_keys():
    """No favorite dict access left in the runtime, the services or the domain."""
    found = []
    for sub in ("runtime", "services", "domain"):
        for path in sorted((ROOT / "sidecar" / sub).rglob("*.py")):
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if DICT_READS.search(line):
                    found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert found == []
    assert DICT_READS.search('x = fav.get("active", True)') and DICT_READS.search('after["chat_limit"]')


def test_a_favorite_encodes_without_unknown_attributes():
    assert msgspec.json.decode(msgspec.json.encode(Favorite(ru=RU, chat_limit=0))) == {
        "ru": RU, "chat_limit": 0}
