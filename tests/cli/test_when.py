"""The one time syntax (:mod:`sidecar.cli.when`, issue 23 item 6): instants with or without an
offset (naive = UTC), spans and their combinations back from ``now``, and one-sentence refusals."""
from __future__ import annotations

import pytest

from sidecar.cli.when import parse_span, parse_when

T0 = 1796025600.0  # 2026-11-30T08:00:00Z
NOW = T0 + 86400.0


@pytest.mark.parametrize("text, want", [
    ("2026-11-30T08:00:00Z", T0), ("2026-11-30T08:00:00z", T0), ("2026-11-30T08:00:00", T0),
    ("2026-11-30 08:00", T0), ("2026-11-30T10:00:00+02:00", T0), ("2026-11-30", T0 - 8 * 3600),
    ("90s", NOW - 90), ("15m", NOW - 900), ("2h", NOW - 7200), ("1d", T0), ("1h30m", NOW - 5400),
    ("1d2h30m15s", NOW - 95415), ("1.5h", NOW - 5400), (" 2H ", NOW - 7200),
])
def test_instants_and_spans(text, want):
    assert parse_when(text, NOW) == pytest.approx(want)


@pytest.mark.parametrize("text, words", [
    ("", "empty"), ("yesterday", "neither"), ("1796025600", "neither"), ("-5m", "neither"),
    ("0m", "longer than zero"), ("30m1h", "largest first"), ("1h1h", "largest first"),
    ("5w", "neither"), ("2026-02-30", "neither"),
])
def test_refusals_say_what_is_wrong(text, words):
    with pytest.raises(ValueError, match=words):
        parse_when(text, NOW)


def test_a_span_alone():
    assert parse_span("1h30m") == 5400.0
    with pytest.raises(ValueError):
        parse_span("2026-11-30")
