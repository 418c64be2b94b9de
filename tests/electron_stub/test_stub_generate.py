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
