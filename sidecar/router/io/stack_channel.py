"""The ``stack`` channel: Stack's writes, single and batched, and Stack's probe (DESIGN §9
"Batch writes", §10 "Channels and targets"); the other channels are in :mod:`.channels`.

Rules / theory of operation
---------------------------
* ``stack`` (DESIGN §9 "Batch writes"): a Stack delivery row carries its write: ``method``,
  ``path``, ``idem_key`` and the body in ``message``.  :meth:`StackChannel.send` makes the single call (``Idempotency-Key`` header);
  :meth:`StackChannel.send_batch` sends up to :data:`~sidecar.stack.client.MAX_BATCH` rows as one
  ``POST /v1/batch`` and returns one outcome per row, in order.
  Batching is used only when Stack advertised it: startup data ``"capabilities": ["batch"]``
  (:meth:`note_startup`; the runtime hands every startup answer in).  Without it the pump sends
  pairs' heads one by one — the old outbox's behaviour.
  Per-write results of a batch: 2xx delivered; 424 (Failed Dependency: Stack did not try it
  because an earlier write of its pair failed in this batch) → ``held`` (not an attempt; it
  waits behind its head); anything else classified like a single answer.  A write Stack refuses
  (a 4xx other than 408/409/429) fails: one ERROR line names its key, method, path and status
  on either path (single or batched), and the row keeps Stack's status and body.  A batch request that
  fails as a whole (connection, timeout, 5xx) fails every write retryably (a 429: every write
  flooded — Stack paced by its ``Retry-After`` seconds, no failure); any other whole
  failure (a 4xx on the batch itself) is retryable too and logged loudly: no write is lost for a
  protocol mismatch, and Stack's contract says a batch never fails for one write's fault.
  **Sender health** sees one attempt per HTTP request, not per write (the pump reports it,
  :func:`~.attempt.request_outcome`): a batch that fails as a whole is ONE retryable failure
  of ``stack``; an answered batch counts as delivered if any write was acknowledged, else as
  one failure if any write answered 5xx/408; 4xx writes and 424 (``held``) never count —
  DESIGN §9 "a write's failure fails only that write", not the sender.
  Counters ``requests_single`` / ``requests_batch`` / ``writes_batched`` feed the report
  (Stack HTTP requests with and without batching).  Probe: ``GET /v1/health``.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import msgspec

from sidecar.stack.errors import StackError, StackUnavailable

from sidecar.router.attempt import DELIVERED, FLOOD_STATUS, Outcome, classify_status, held, retryable
from sidecar.router.io.channels import Channel, retry_after_header
from sidecar.router.model import Delivery

if TYPE_CHECKING:
    from sidecar.stack.client import StackClient

log = logging.getLogger("sidecar.router.io.stack_channel")
_encode = msgspec.json.Encoder().encode


HELD_STATUS = 424
CONFLICT_STATUS = 409  # Stack: the key is in use by a concurrent request — retried, not refused


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

    def _stamp(self, now: float) -> dict[str, float]:
        """The client's ``at`` keyword when stamping (module rules), else nothing."""
        return {"at": now} if self.stamp_at else {}

    @staticmethod
    def _outcome_of(status: int, detail: str) -> Outcome:
        """Stack's answer → outcome: as any HTTP answer, except 409 (Conflict: the key is being
        written by a concurrent request) is retryable — the write was not refused."""
        if status == CONFLICT_STATUS:
            return retryable(f"HTTP {status}" + (f": {detail[:200]}" if detail else ""), status)
        return classify_status(status, detail)

    @classmethod
    def _outcome(cls, exc: StackError, now: float) -> Outcome:
        """A failed Stack call → outcome.  A 429 paces Stack by its ``Retry-After`` in either
        form (seconds, or an HTTP-date read against ``now``, unix seconds); unreadable or absent
        → the flood ladder's step (DESIGN §10)."""
        if exc.status is None:
            return retryable(exc.short())
        if exc.status == FLOOD_STATUS:
            wait = exc.retry_after if exc.retry_after is not None else retry_after_header(exc.retry_after_header, now)
            return classify_status(exc.status, exc.detail or "", wait)
        return cls._outcome_of(exc.status, exc.detail or "")

    @staticmethod
    def _refused(row: Delivery, out: Outcome, how: str) -> None:
        """One ERROR line per refused write, single or batched: key, method, path, status."""
        log.error("STACK REFUSED write %s (%s %s) with HTTP %s%s: %s — the write failed (%s);"
                  " the pair's later writes go on", row.idem_key, row.method, row.path, out.status,
                  " in a batch" if how == "batch" else "", out.error, row.pair)

    async def send(self, row: Delivery, now: float) -> Outcome:
        if row.method is None or row.path is None or row.idem_key is None:
            return classify_status(400, "a stack delivery without its write")
        self.requests_single += 1
        try:
            await self.client.send(row.method, row.path, bytes(row.message), row.idem_key, **self._stamp(now))
        except StackError as exc:
            out = self._outcome(exc, now)
            if out.kind == "terminal":
                self._refused(row, out, "single")  # loud: only a fix on either side helps
            return out
        return DELIVERED

    async def send_batch(self, rows: list[Delivery], now: float) -> list[Outcome]:
        """One ``POST /v1/batch`` for ``rows`` (1..500, pairs' runs in order)."""
        from sidecar.stack.client import MAX_BATCH, BatchWrite  # loaded with the app's client

        if not 0 < len(rows) <= MAX_BATCH:
            raise ValueError(f"a batch holds 1..{MAX_BATCH} rows, not {len(rows)}")
        writes = [BatchWrite(r.idem_key or "", r.method or "", r.path or "", bytes(r.message))
                  for r in rows]
        self.requests_batch += 1
        self.writes_batched += len(rows)
        try:
            results = await self.client.batch(writes, **self._stamp(now))
        except StackUnavailable as exc:
            if exc.status == FLOOD_STATUS:  # the whole batch paced: every write flooded, none an attempt
                return [self._outcome(exc, now)] * len(rows)
            return [retryable(exc.short(), exc.status)] * len(rows)
        except StackError as exc:
            log.error("STACK REFUSED a batch of %d writes with HTTP %s: %s — every write kept and "
                      "retried", len(rows), exc.status, exc.detail or exc)
            return [retryable(exc.short(), exc.status)] * len(rows)
        out: list[Outcome] = []
        for row, r in zip(rows, results):
            if r.status == HELD_STATUS:
                out.append(held("held: an earlier write of the pair failed in the same batch"))
                continue
            detail = "" if r.body is None else _encode(r.body).decode(errors="replace")[:200]
            o = self._outcome_of(r.status, detail)
            if o.kind == "terminal":
                self._refused(row, o, "batch")  # the same line as a single write's
            out.append(o)
        return out

    async def probe(self, now: float) -> Outcome:
        try:
            await self.client.health(**self._stamp(now))
        except StackError as exc:
            return self._outcome(exc, now)
        return DELIVERED

    async def close(self) -> None:
        pass  # the client belongs to the app (startup reads use it too)
