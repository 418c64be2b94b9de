"""The generator: deterministic, valid, realistic mix; the demo's expectations are well placed."""
from __future__ import annotations

from collections import Counter

from electron_stub import generate
from electron_stub import scenario as sc


def parse(lines):
    return sc.parse_lines(generate.dumps(lines).splitlines(), "gen.jsonl")


def test_deterministic_and_seed_sensitive():
    a = generate.dumps(generate.generate("demo"))
    assert a == generate.dumps(generate.generate("demo"))
    assert a != generate.dumps(generate.generate("demo", seed=99))


def test_pairs_are_independent_of_favorite_count():
    small = parse(generate.generate("smoke", favorites=5, hours=0.5))
    big = parse(generate.generate("smoke", favorites=8, hours=0.5))
    pick = lambda s: [generate.dumps([{k: getattr(x, k, None) for k in ("t", "ru")}])  # noqa: E731
                      for x in s.timeline if getattr(x, "ru", "").endswith("-0003")]
    assert pick(small) == pick(big) and pick(small)


def test_demo_shape():
    s = parse(generate.generate("demo"))
    kinds = Counter(type(x).__name__ for x in s.timeline)
    assert s.header.duration_s == 3600 and len([x for x in s.world if isinstance(x, sc.Tu)]) == 3
    assert kinds["Crash"] == 1 and kinds["StackFault"] >= 2 and kinds["Expect"] >= 6
    assert any(isinstance(x, sc.Login) and x.fresh for x in s.timeline)
    for k in ("Message", "Like", "Mail", "Online", "Logout"):
        assert kinds[k] > 0, k
    favs = [x for x in s.world if isinstance(x, sc.Favorite)]
    assert len(favs) == 3 * 33


def test_realistic_mix_in_a_shift():
    s = parse(generate.generate("shift", tus_per_project=1, favorites=60, hours=4))
    kinds = Counter(type(x).__name__ for x in s.timeline)
    for k in ("Message", "Like", "Mail", "MailReadLine", "NotificationLine", "Limits", "SystemLine", "Icebreaker",
              "ChatRequestLine", "EmailLine", "Online", "Crash", "StackFault", "Login", "Logout"):
        assert kinds[k] > 0, k
    assert any(isinstance(x, sc.History) for x in s.world)
    assert kinds["Message"] > kinds["Like"] > 0
    assert all(x.t <= s.header.duration_s for x in s.timeline)


def test_large_preset_is_the_shift_at_60_tus():
    """Issue 11 item 6: ``large`` has 60 TUs (20 per project); the shift's 12 TUs are its first
    four per project with the very same pairs (per-pair seeds), so the two scale cleanly."""
    large = parse(generate.generate("large", hours=0.25, favorites=3))
    shift = parse(generate.generate("shift", hours=0.25, favorites=3))
    tus = [x.tu for x in large.world if isinstance(x, sc.Tu)]
    assert len(tus) == 60 and len(set(tus)) == 60
    assert generate.PRESETS["large"]["favorites"] == generate.PRESETS["shift"]["favorites"]
    shift_tus = {x.tu for x in shift.world if isinstance(x, sc.Tu)}
    same = lambda s: [generate.dumps([{k: getattr(x, k, None) for k in ("t", "kind", "tu", "ru")}])  # noqa: E731
                      for x in s.timeline if getattr(x, "ru", None) and getattr(x, "tu", None) in shift_tus]
    assert same(large) == same(shift) and same(shift)


def test_first_keeps_the_world_and_the_first_seconds_of_the_timeline():
    whole = generate.generate("smoke", hours=1.0, favorites=4)
    part = parse(generate.first(whole, 900))
    assert part.header.duration_s == 900
    assert len(part.world) == len(parse(whole).world)
    kept = [x for x in parse(whole).timeline if x.t <= 900]
    assert len(part.timeline) == len(kept) > 0
