"""Store test helpers: a Stack write as the router queues it (a pending ``stack`` delivery row,
DESIGN §10) — the one op whose insert is idempotent by key, like every Stack write."""
from __future__ import annotations

from sidecar.router.model import Delivery
from sidecar.router.ops import PutDelivery


def stack_row(key: str, pair: str = "tu1/ru1", at: float = 0.0, body: bytes = b"{}") -> PutDelivery:
    """A pending ``stack`` delivery of write ``key`` (a second one with the key is ignored)."""
    return PutDelivery(Delivery(
        id=f"d-{key}", event_id=f"e-{key}", event_at=at, source="tasks", subject="task",
        action="created", priority="normal", rule=None, channel="stack", target="stack",
        status="pending", message=body, next_attempt_at=at, pair=pair, idem_key=key,
        method="POST", path=f"/x/{key}"))


STACK_KEYS = "SELECT idem_key FROM deliveries WHERE channel = 'stack' ORDER BY seq"
