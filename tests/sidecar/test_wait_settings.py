"""The sidecar's wall-clock waits (settings ``*_timeout_s``) have a floor: :data:`sidecar.config.MIN_WAIT_S`."""
from __future__ import annotations

import pytest

from sidecar.config import Settings


@pytest.mark.parametrize("field", ["stack_startup_timeout_s", "stack_timeout_s", "request_timeout_s",
                                   "handshake_timeout_s"])
def test_a_wait_shorter_than_a_hundredth_of_a_second_is_refused(field):
    """A wait of 1e-9 s (or a denormal 1e-320) was taken and every request it guards failed at
    once: a wall-clock wait under 10 ms is no wait on any machine (the breaker at stop 33)."""
    for bad in (1e-320, 1e-9, 0.009):
        with pytest.raises(ValueError):
            Settings(token="t", **{field: bad})
    assert getattr(Settings(token="t", **{field: 0.01}), field) == 0.01
