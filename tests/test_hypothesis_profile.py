"""No hypothesis test of the suite has a wall-clock deadline (brk33): at load 22 on the shared
2-core machine ``tests/app/test_task_views.py`` failed with "Test took 284.85ms, which exceeds the
deadline of 200.00ms" (hypothesis' default) — an outcome that depended on the machine's load.
Most modules already said ``deadline=None`` test by test; ``tests/conftest.py`` now says it once."""
from __future__ import annotations

from hypothesis import given, settings, strategies as st


def test_the_suites_profile_has_no_deadline():
    assert settings().deadline is None


@given(st.integers())
def test_a_test_without_its_own_settings_has_no_deadline(n: int):
    assert settings().deadline is None
