"""The one injected clock (DESIGN §5).

Rules
-----
* Domain code never reads the wall clock: it receives ``now`` (unix seconds, UTC, float) from the
  runtime, which takes it from one :class:`Clock`.
* ``WallClock`` is production; ``VirtualClock`` is moved only by ``advance_to`` (the harness's
  ``clock.advance_to`` frame); ``ScaledClock`` runs real time ``K`` times faster for live demos.
* Virtual time never goes backwards: ``advance_to`` with an earlier instant is a no-op, so a
  reconnecting harness that repeats its last frame cannot rewind the scheduler.
"""
from __future__ import annotations

import time
from datetime import datetime, timezone


class Clock:
    """Source of ``now`` in unix seconds (UTC).  ``virtual`` tells the runtime whether timers fire
    by themselves (wall/scaled) or only inside ``advance_to`` (virtual)."""

    virtual: bool = False

    def now(self) -> float:  # pragma: no cover - interface
        raise NotImplementedError

    def real_delay(self, seconds: float) -> float:
        """Real seconds to wait for ``seconds`` of clock time (wall/scaled only)."""
        return seconds


class WallClock(Clock):
    """Production clock: the operating system's UTC time."""

    def now(self) -> float:
        return time.time()


class ScaledClock(Clock):
    """Real time running ``scale`` times faster, anchored at ``start`` (unix seconds)."""

    def __init__(self, scale: float, start: float | None = None) -> None:
        if scale <= 0:
            raise ValueError("time scale must be > 0")
        self.scale = scale  # virtual seconds per real second
        self._real0 = time.monotonic()  # real anchor
        self._virt0 = time.time() if start is None else start  # clock time at the anchor

    def now(self) -> float:
        return self._virt0 + (time.monotonic() - self._real0) * self.scale

    def real_delay(self, seconds: float) -> float:
        return seconds / self.scale


class VirtualClock(Clock):
    """Clock moved only by :meth:`advance_to`; ``None`` until the first instant is set."""

    virtual = True

    def __init__(self, start: float | None = None) -> None:
        self._now = start  # unix seconds, or None before the harness set it

    @property
    def is_set(self) -> bool:
        return self._now is not None

    def now(self) -> float:
        if self._now is None:
            raise RuntimeError("virtual clock not set: send clock.advance_to first")
        return self._now

    def advance_to(self, t: float) -> float:
        """Move to ``t`` (unix seconds) if it is later than now; return the resulting now."""
        if self._now is None or t > self._now:
            self._now = t
        return self._now


def to_iso(t: float) -> str:
    """Unix seconds → ISO-8601 UTC with a ``Z`` (the markers' ``nextCheckAt`` format)."""
    dt = datetime.fromtimestamp(t, tz=timezone.utc)
    if dt.microsecond:
        return dt.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return dt.isoformat(timespec="seconds").replace("+00:00", "Z")


def from_iso(s: str) -> float:
    """ISO-8601 (``Z`` or offset) → unix seconds.  Raises ``ValueError`` on a bad string."""
    return datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()
