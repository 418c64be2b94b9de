"""The demo's scripted pairs land where their TU is logged in, whatever ``--hours`` is: each
scripted expectation's window (from the pair's first line to the ``expect`` line) lies inside one
logged-in session of its TU with no crash in it.  ``generate --preset demo --hours 0.1`` used to
put them at fixed instants (300 s, 600 s, crash + 60 s, re-login + 400 s) — while the TU was
logged out, so a correct sidecar failed 4 of its 6 expectations."""
from __future__ import annotations

import pytest

from electron_stub import generate
from electron_stub import scenario as sc
from electron_stub.cli import main


def _sessions(s: sc.Scenario, tu: str) -> list[tuple[float, float]]:
    out, start = [], None
    for x in s.timeline:
        if isinstance(x, sc.Login) and x.tu == tu and start is None:
            start = x.t
        elif isinstance(x, sc.Logout) and x.tu == tu and start is not None:
            out.append((start, x.t))
            start = None
    if start is not None:
        out.append((start, s.header.duration_s))
    return out


@pytest.mark.parametrize("hours", [0.1, 0.12, 0.2, 0.3, 0.5, 1.0, 2.0])
def test_every_scripted_window_is_inside_a_session_without_a_crash(hours):
    s = sc.parse_lines(generate.dumps(generate.generate("demo", hours=hours)).splitlines(), "gen.jsonl")
    crashes = [x.t for x in s.timeline if isinstance(x, sc.Crash)]
    expects = [x for x in s.timeline if isinstance(x, sc.Expect) and "-ru-x" in (x.ru or "")]
    for e in expects:
        first = min(x.t for x in s.timeline if getattr(x, "ru", None) == e.ru and not isinstance(x, sc.Expect)
                    and x.t <= e.t and x.t >= e.between[0] - 10)
        assert any(a < first and e.t < b for a, b in _sessions(s, e.tu)), (hours, e)
        assert not any(first - 1 <= c <= e.t for c in crashes), (hours, e)


def test_the_one_hour_demo_is_unchanged_where_it_already_fit():
    """The default demo (1 h) keeps its scripted instants: 310 s, 610 s, crash + 60 s."""
    s = sc.parse_lines(generate.dumps(generate.generate("demo")).splitlines(), "gen.jsonl")
    starts = sorted({x.between[0] for x in s.timeline if isinstance(x, sc.Expect)})
    assert 310.0 in starts and 610.0 in starts


def test_a_short_demo_replays_with_every_expectation_met(tmp_path, capsys):
    scen = tmp_path / "d.jsonl"
    assert main(["generate", "--preset", "demo", "--hours", "0.1", "-o", str(scen)]) == 0
    rc = main(["replay", str(scen), "--quiet", "--data-dir", str(tmp_path / "data")])
    out = capsys.readouterr().out
    assert rc == 0, out[-2000:]
