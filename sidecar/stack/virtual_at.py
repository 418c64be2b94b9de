"""The virtual instant of an outbound HTTP call (frames run past the sidecar's timers).

On the virtual clock every HTTP call the sidecar makes (Stack writes, batches and probes,
webhooks, Telegram) carries the instant of the delivery pass that sends it, so the harness's
reference Stack and receivers record it there rather than at the driver's own stop.  The wall
clock sends no stamp.  Kept apart from :mod:`sidecar.stack.client` so the router's channels can
stamp calls without importing httpx at start-up (the sidecar loads httpx only for an HTTP target).
"""
from __future__ import annotations

#: the header's name; its value is the pass instant as ``repr(float)`` (unix seconds, UTC)
VIRTUAL_AT_HEADER = "Sidecar-Virtual-At"


def at_headers(at: float | None) -> dict[str, str]:
    """``{VIRTUAL_AT_HEADER: repr(at)}``, or ``{}`` for None (the wall clock sends no stamp)."""
    return {} if at is None else {VIRTUAL_AT_HEADER: repr(float(at))}
