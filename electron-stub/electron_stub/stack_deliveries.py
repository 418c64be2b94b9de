"""The reference Stack's handed-over deliveries (DESIGN §9 "Handed-over deliveries"): our
proposal to Stack, which the reference Stack implements.

Rules / theory of operation
---------------------------
* ``PUT /v1/tus/{tu}/deliveries/{id}`` body: the handed-over delivery (``{"id", "event_id",
  "event_at", "source", "subject", "action", "priority", "rule", "channel", "target",
  "message_b64", "attempts", "next_attempt_at", "expires_at", "last_error", "tu", "ru"}``;
  ``sidecar.router.handover.HandedOver``) — stored under ``(tu, id)``, replacing an earlier
  handover of the same delivery → ``{"ok": true, "tu", "id"}``.  A body whose ``id`` is not the
  path's, whose ``tu`` is not the path's or without ``channel`` / ``target`` / ``message_b64``
  → 400.
* ``DELETE /v1/tus/{tu}/deliveries/{id}`` (body ``{}``) → ``{"ok": true, "tu", "id",
  "deleted": <whether Stack held it>}``: a delivery reached a terminal outcome on some machine.
  Deleting one Stack does not hold is no error (both machines may release it).
* Startup data lists the TU's held deliveries as ``"deliveries"``, oldest ``event_at`` first
  (the key only when Stack holds some: absent = none).
* Idempotency, faults and batching are the server's, as for every write
  (:mod:`electron_stub.stack_server`); every acknowledged write is recorded (``kind``
  ``delivery``, ``op`` ``put`` | ``delete``).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from electron_stub.stack_http import copied, dump

if TYPE_CHECKING:
    from electron_stub.stack_server import StackServer

ROUTE = r"^/v1/tus/([^/]+)/deliveries/([^/]+)$"


def put(stack: "StackServer", tu: str, delivery_id: str, data: dict, key: str) -> tuple[int, bytes]:
    """(lock held) Hold a handed-over delivery (module rules)."""
    missing = [k for k in ("channel", "target", "message_b64") if not isinstance(data.get(k), str)]
    if missing or data.get("id") != delivery_id or data.get("tu") != tu:
        return 400, dump({"error": "delivery body needs id and tu matching the path, channel,"
                                   " target, message_b64"})
    stack.deliveries.setdefault(tu, {})[delivery_id] = copied(data)
    stack._record(kind="delivery", op="put", tu=tu, ru=data.get("ru"), id=delivery_id, key=key)
    return 200, dump({"ok": True, "tu": tu, "id": delivery_id})


def delete(stack: "StackServer", tu: str, delivery_id: str, data: dict, key: str) -> tuple[int, bytes]:
    """(lock held) Release a handed-over delivery (module rules)."""
    held = stack.deliveries.get(tu, {}).pop(delivery_id, None) is not None
    stack._record(kind="delivery", op="delete", tu=tu, id=delivery_id, deleted=held, key=key)
    return 200, dump({"ok": True, "tu": tu, "id": delivery_id, "deleted": held})


def listed(stack: "StackServer", tu: str) -> list[dict[str, Any]]:
    """(lock held) The TU's held deliveries for its startup data, oldest first."""
    rows = stack.deliveries.get(tu, {}).values()
    return copied(sorted(rows, key=lambda d: (d.get("event_at") or 0, d["id"])))
