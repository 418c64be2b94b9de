"""The ``stack`` channel: the Stack client as a router channel, single writes or ``POST /v1/batch``
(DESIGN §9 "Batch writes", §10 "stack — the Stack client (§9), batching due writes").

Rules / theory of operation
---------------------------
* A Stack delivery row carries its write: ``method``, ``path``, ``idem_key`` and the body in
  ``message``.  :meth:`StackChannel.send` makes the single call (``Idempotency-Key`` header);
  :meth:`StackChannel.send_batch` sends up to :data:`~sidecar.stack.client.MAX_BATCH` rows as one
  ``POST /v1/batch`` and returns one outcome per row, in order.
* Batching is used only when Stack advertised it: startup data ``"capabilities": ["batch"]``
  (:meth:`note_startup`; the runtime hands every startup answer in).  Without it the pump sends
  pairs' heads one by one — the old outbox's behaviour.
* Per-write results of a batch: 2xx delivered; 424 (Failed Dependency: Stack did not try it
  because an earlier write of its pair failed in this batch) → ``held`` (not an attempt; it
  waits behind its head); anything else classified like a single answer.  A batch request that
  fails as a whole (connection, timeout, 5xx, 429) fails every write retryably; any other whole
  failure (a 4xx on the batch itself) is retryable too and logged loudly: no write is lost for a
  protocol mismatch, and Stack's contract says a batch never fails for one write's fault.
* Counters ``requests_single`` / ``requests_batch`` / ``writes_batched`` feed the report
  (Stack HTTP requests with and without batching).  Probe: ``GET /v1/health``.
"""
from __future__ import annotations

import logging
from typing import Any

from sidecar.stack.client import MAX_BATCH, BatchWrite, StackClient
from sidecar.stack.errors import StackError, StackUnavailable

from .channels import Channel
from .model import Delivery
from .policy import DELIVERED, Outcome, classify_status, held, retryable

log = logging.getLogger("sidecar.router.stack")
HELD_STATUS = 424


class StackChannel(Channel):
    kind = "stack"

    def __init__(self, client: StackClient, *, batch: bool = False) -> None:
        super().__init__("stack")
        self.client = client
        self.batch = batch  # Stack advertised POST /v1/batch
        self.requests_single = 0
        self.requests_batch = 0
        self.writes_batched = 0

    def note_startup(self, data: Any) -> None:
        """Learn Stack's capabilities from a startup answer (``"capabilities": ["batch"]``)."""
        caps = data.get("capabilities") if isinstance(data, dict) else None
        if isinstance(caps, list):
            self.batch = "batch" in caps

    @staticmethod
    def _outcome(exc: StackError) -> Outcome:
        if exc.status is None:
            return retryable(exc.short())
        return classify_status(exc.status, exc.detail)

    async def send(self, row: Delivery, now: float) -> Outcome:
        if row.method is None or row.path is None or row.idem_key is None:
            return classify_status(400, "a stack delivery without its write")
        self.requests_single += 1
        try:
            await self.client.send(row.method, row.path, bytes(row.message), row.idem_key)
        except StackError as exc:
            return self._outcome(exc)
        return DELIVERED

    async def send_batch(self, rows: list[Delivery], now: float) -> list[Outcome]:
        """One ``POST /v1/batch`` for ``rows`` (1..500, pairs' runs in order)."""
        if not 0 < len(rows) <= MAX_BATCH:
            raise ValueError(f"a batch holds 1..{MAX_BATCH} rows, not {len(rows)}")
        writes = [BatchWrite(r.idem_key or "", r.method or "", r.path or "", bytes(r.message))
                  for r in rows]
        self.requests_batch += 1
        self.writes_batched += len(rows)
        try:
            results = await self.client.batch(writes)
        except StackUnavailable as exc:
            return [retryable(exc.short(), exc.status)] * len(rows)
        except StackError as exc:
            log.error("STACK REFUSED a batch of %d writes with HTTP %s: %s — every write kept and "
                      "retried", len(rows), exc.status, exc.detail or exc)
            return [retryable(exc.short(), exc.status)] * len(rows)
        out: list[Outcome] = []
        for r in results:
            if r.status == HELD_STATUS:
                out.append(held("held: an earlier write of the pair failed in the same batch"))
            else:
                detail = "" if r.body is None else str(r.body)[:200]
                out.append(classify_status(r.status, detail))
        return out

    async def probe(self, now: float) -> Outcome:
        try:
            await self.client.health()
        except StackError as exc:
            return self._outcome(exc)
        return DELIVERED

    async def close(self) -> None:
        pass  # the client belongs to the app (startup reads use it too)
