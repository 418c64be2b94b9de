"""HTTP client for Stack (DESIGN §9 "Stack contract").

Rules / theory of operation
---------------------------
* One HTTP/1.1 path per sidecar (:mod:`.http11`): for an ``http`` Stack ``h11`` on asyncio streams
  (a quarter of httpx's CPU per request: docs/decisions.md "Stack's HTTP path"), for an ``https``
  one — or a plugged ``transport`` — an ``httpx.AsyncClient``.  Either keeps connections alive (a
  pooled connection is reused by every write of a pump pass; at most ``max_connections``), follows
  no redirects, and allows ``timeout`` seconds for connect, read, write and pool wait each.  TLS
  (httpx only): :func:`tls_context`.  ``Accept`` and ``User-Agent`` go with every request.
* Writes: :meth:`StackClient.send` sends ``body`` as is, with ``Content-Type: application/json``
  and ``Idempotency-Key: <idem_key>`` on every call (Stack answers a repeated key with its first
  answer and changes nothing, so a write resent after a crash or a lost reply is harmless).
* Batches: :meth:`batch` → ``POST /v1/batch`` with ``{"writes": [{"key", "method", "path",
  "body"}]}`` (≤ :data:`MAX_BATCH` writes, each with the semantics of its single call; each
  ``body`` is the write's own JSON bytes, spliced in unchanged) →
  ``[{"key", "status", "body"}]`` in order (DESIGN §9).  Only the request as a whole raises;
  each write's own status is the caller's to classify.
* Reads: :meth:`startup` → ``GET /v1/tus/{tu}/startup`` → the decoded JSON object.
* Every failure is a :mod:`.errors` exception: transport errors, timeouts, 5xx and 429 →
  :class:`StackUnavailable`; other non-2xx → :class:`StackRejected`; both carry the status.
* ``transport`` lets tests plug an ``httpx.MockTransport``/ASGI transport (the httpx path);
  production passes None.
* ``at`` (writes, batches, the health probe; the virtual clock only — the replay's reference
  Stack): the domain instant of the pump pass that sends, as the :data:`~sidecar.stack.virtual_at.VIRTUAL_AT_HEADER`
  header (unix seconds), so a harness records the call at the sidecar's instant, not at
  whatever instant its own driver is at (a ``platform.events`` frame runs
  the sidecar's timers between its events).  Informational: nothing here reads it.
* :meth:`StackClient.close` is shutdown (:mod:`sidecar.app.closing`): a request in flight ends at
  once as :class:`StackUnavailable` (``the client was closed mid-exchange``), one made or queued
  after it as ``the client is closed``, and nothing is sent after it (:mod:`.http11` rules); the
  write it carried stays pending in the outbox for the next run.
* No clock, no sleeping, no retrying here: retries belong to the outbox pump (§10 ladder) — but
  for the one resend of a request whose reused connection turned out stale (:mod:`.http11`).
"""
from __future__ import annotations

import asyncio
import ssl
from typing import Any
from typing import TYPE_CHECKING
from urllib.parse import quote, urlsplit

import msgspec

from .errors import StackError, StackRejected, StackUnavailable
from .http11 import Answer, H11Pool, HttpxPath, PhaseTimeout, TransportFailure
from .virtual_at import at_headers
from .writes import seg  # re-exported: callers quote path segments with it

if TYPE_CHECKING:
    import httpx

_decode = msgspec.json.Decoder().decode


class StackReply(msgspec.Struct, frozen=True, kw_only=True):
    """A 2xx answer: ``status`` and raw ``body`` bytes (JSON, possibly empty)."""

    status: int
    body: bytes = b""
    replayed: bool = False  # Stack said this is the first answer to an earlier, equal key

    def json(self) -> Any:
        """The decoded body (``None`` for an empty one); raises ``msgspec.DecodeError``."""
        return _decode(self.body) if self.body else None


MAX_BATCH = 500  # writes per POST /v1/batch (DESIGN §9)


class BatchWrite(msgspec.Struct, frozen=True):
    """One write of a batch: ``body`` is the JSON body bytes of the single call."""

    key: str
    method: str
    path: str
    body: bytes


class BatchResult(msgspec.Struct, frozen=True):
    key: str
    status: int
    body: Any = None


_KEY_SAFE = "".join(chr(c) for c in range(0x21, 0x7F) if chr(c) != "%")


def header_key(idem_key: str) -> str:
    """The ``Idempotency-Key`` header value of a key: printable ASCII stays as it is, anything
    else (ids outside ASCII, spaces, ``%``) is percent-encoded as UTF-8.  Deterministic, so a
    retried write carries the same header; HTTP headers cannot carry the raw text."""
    return quote(idem_key, safe=_KEY_SAFE)


class StackClient:
    """Client for the Stack base URL ``base_url`` (e.g. ``http://127.0.0.1:8080``)."""

    def __init__(self, base_url: str, *, timeout: float = 5.0, total_timeout: float | None = None,
                 transport: httpx.AsyncBaseTransport | None = None,
                 max_connections: int = 16) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout  # seconds per phase (connect, read, write, pool)
        # seconds for a whole request: a Stack that trickles bytes never trips a per-read timeout
        self.total_timeout = total_timeout if total_timeout is not None else 2 * timeout
        headers = {"Accept": "application/json", "User-Agent": "operator-sidecar"}
        self._http: H11Pool | HttpxPath
        if transport is None and urlsplit(self.base_url).scheme.lower() == "http":
            self._http = H11Pool(self.base_url, timeout=timeout, max_connections=max_connections,
                                 headers=headers)
        else:  # https (TLS stays with httpx) or a test's plugged transport
            self._http = HttpxPath(self.base_url, timeout=timeout, max_connections=max_connections,
                                   headers=headers, verify=tls_context(self.base_url), transport=transport)

    async def send(self, method: str, path: str, body: bytes, idem_key: str, *,
                   at: float | None = None) -> StackReply:
        """Send one write.  ``path`` starts with ``/``; ``body`` is the JSON body; ``at`` the
        virtual instant stamp (module rules).

        Returns :class:`StackReply` for 2xx; raises :class:`StackUnavailable` or
        :class:`StackRejected` (status recorded) otherwise.
        """
        if not idem_key:
            raise ValueError("every Stack write needs an idempotency key")
        headers = {"Content-Type": "application/json", "Idempotency-Key": header_key(idem_key),
                   **at_headers(at)}
        resp = await self._request(method, path, body, headers)
        return StackReply(status=resp.status, body=resp.body,
                          replayed=resp.headers.get("idempotent-replayed", "") == "true")

    async def batch(self, writes: list[BatchWrite], *, at: float | None = None) -> list[BatchResult]:
        """``POST /v1/batch`` (``at``: the virtual instant stamp, module rules); returns one
        result per write, in order.  Raises ``ValueError`` for
        an empty or oversized batch, the :mod:`.errors` tree when the request as a whole failed,
        and :class:`StackUnavailable` for an answer that does not list every write in order."""
        if not writes or len(writes) > MAX_BATCH:
            raise ValueError(f"a batch holds 1..{MAX_BATCH} writes, not {len(writes)}")
        if any(not w.key for w in writes):
            raise ValueError("every Stack write needs an idempotency key")
        # each body is already JSON (the write's own, encoded once when it was queued): it is
        # spliced in as it is, not decoded and encoded again
        items = [{"key": w.key, "method": w.method, "path": w.path,
                  "body": msgspec.Raw(w.body) if w.body else None} for w in writes]
        resp = await self._request("POST", "/v1/batch", msgspec.json.encode({"writes": items}),
                                   {"Content-Type": "application/json", **at_headers(at)})
        try:
            results = msgspec.json.decode(resp.body, type=dict[str, list[BatchResult]])["results"]
        except (msgspec.DecodeError, msgspec.ValidationError, KeyError) as exc:
            raise StackUnavailable(f"POST /v1/batch: undecodable reply: {exc}", status=resp.status,
                                   method="POST", path="/v1/batch", detail=_excerpt(resp)) from exc
        if [r.key for r in results] != [w.key for w in writes]:
            raise StackUnavailable("POST /v1/batch: the results do not match the writes",
                                   status=resp.status, method="POST", path="/v1/batch",
                                   detail=_excerpt(resp))
        return results

    async def health(self, *, at: float | None = None) -> None:
        """``GET /v1/health`` (the Stack sender's probe, DESIGN §10; ``at``: module rules);
        raises the :mod:`.errors` tree when Stack does not answer 2xx."""
        await self._request("GET", "/v1/health", None, at_headers(at))

    async def startup(self, tu: str) -> dict:
        """``GET /v1/tus/{tu}/startup`` → Stack's startup data for ``tu`` (favorites with
        markers, task history).  Raises the :mod:`.errors` tree; an undecodable or non-object
        body is :class:`StackUnavailable` (a broken reply is worth retrying)."""
        path = f"/v1/tus/{seg(tu)}/startup"
        resp = await self._request("GET", path, None, {})
        try:
            data = _decode(resp.body)
        except msgspec.DecodeError as exc:
            raise StackUnavailable(f"GET {path}: undecodable reply: {exc}", status=resp.status,
                                   method="GET", path=path, detail=_excerpt(resp)) from exc
        if not isinstance(data, dict):
            raise StackUnavailable(f"GET {path}: reply is not a JSON object",
                                   status=resp.status, method="GET", path=path,
                                   detail=_excerpt(resp))
        return data

    async def _request(self, method: str, path: str, body: bytes | None, headers: dict[str, str]) -> Answer:
        try:
            async with asyncio.timeout(self.total_timeout):  # no extra task per request
                resp = await self._http.request(method, path, headers, body)
        except TimeoutError as exc:
            raise StackUnavailable(f"{method} {path}: no complete answer within the "
                                   f"{self.total_timeout:g} s deadline", method=method,
                                   path=path) from exc
        except PhaseTimeout as exc:
            raise StackUnavailable(f"{method} {path}: timeout ({exc.phase})",
                                   method=method, path=path) from exc
        except TransportFailure as exc:
            raise StackUnavailable(f"{method} {path}: {exc}", method=method, path=path) from exc
        code = resp.status
        if 200 <= code < 300:
            return resp
        cls: type[StackError] = StackUnavailable if code >= 500 or code == 429 else StackRejected
        ra = resp.headers.get("retry-after", "").strip() if code == 429 else ""
        raise cls(f"{method} {path}: HTTP {code}", status=code, method=method, path=path,
                  detail=_excerpt(resp), retry_after=float(ra) if ra.isascii() and ra.isdigit() else None,
                  retry_after_header=ra or None)

    async def close(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> "StackClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def tls_context(base_url: str) -> ssl.SSLContext | bool:
    """What the client verifies TLS with: for an ``https`` Stack httpx's default (the CA bundle,
    hostname checked); for an ``http`` one a context that trusts no CA at all — this client
    speaks only to the base URL (relative paths, no redirects followed), so it never makes a TLS
    handshake there, and were one ever made it would fail verification.  Loading the CA bundle
    for a client that cannot use it cost ~40 ms of CPU per launch."""
    if urlsplit(base_url).scheme.lower() == "https":
        return True
    return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # CERT_REQUIRED, hostname checked, no CA


def _excerpt(resp: Answer) -> str:
    return resp.body[:200].decode(errors="replace")
