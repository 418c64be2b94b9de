"""Channels: thin I/O drivers that send delivery rows and classify the answers (DESIGN §10
"Channels and targets"): ``webhook``, ``telegram``, ``journal`` and ``stack``.

Rules / theory of operation
---------------------------
* A channel sends ``row.message`` — the bytes the router rendered and stored — and returns an
  :class:`~.attempt.Outcome`; it never raises for a failed send, never retries, never sleeps and
  never reads the domain clock.  Retries, TTL and sender health are the gate's (:mod:`.attempt`).
* Classification (:mod:`.attempt`): connection errors, timeouts, 5xx, 408 → retryable; 429 →
  flooded (a webhook's ``Retry-After``, seconds or HTTP date: :func:`retry_after_header`); other
  4xx and a bad target → terminal.  Every error text passes :func:`scrub`, and a log filter on
  httpx/httpcore scrubs their lines (httpx logs request URLs): a secret (webhook secret, bot
  token — which Telegram puts in the URL) never reaches a row, a log or a trace.
* ``webhook``: ``POST url`` with the JSON body, signed per Standard Webhooks by the
  ``standardwebhooks`` library — ``webhook-id`` = the delivery id (stable across retries and
  restarts, so a receiver dedups on it), ``webhook-timestamp`` = now in unix seconds from the
  *signing clock*, ``webhook-signature: v1,<base64 HMAC-SHA256(id.timestamp.body)>``.  The
  signing clock is the wall clock even when the domain runs on virtual time: receivers reject
  timestamps more than 5 min from their own clock (replay protection), so it must be real.
  Probe: a signed ``ping`` event.
* ``telegram``: Bot API ``POST {base_url}/bot<token>/sendMessage {"chat_id", "text"}``; an answer
  ``{"ok": false, "error_code": 429, "parameters": {"retry_after": s}}`` is flood control for ``s``
  seconds; 401/404 (a bad token) are terminal.  Probe: ``getMe``.
* ``journal``: appends one JSON line ``{"delivery_id", "target", "at", **body}`` to a rotating
  file (``logging.handlers.RotatingFileHandler``) and, via :meth:`Channel.ops_after`, a row in
  ``router_journal`` committed with the outcome.  A crash between the two repeats the line on
  retry with the same ``delivery_id`` (readers dedup on it).  Probe: the folder is writable.
* ``stack``: :mod:`.stack_channel` (Stack's writes, single and batched, and its probe).
* **Virtual instant stamp** (virtual clock only, :attr:`Channel.stamp_at`): every HTTP call —
  webhook, Telegram, Stack write, batch and probe — carries the pass's domain instant ``now``
  in the ``Sidecar-Virtual-At`` header (:data:`~sidecar.stack.virtual_at.VIRTUAL_AT_HEADER`), so the
  replay's reference Stack and receivers record each call at the sidecar's instant even when
  it happens inside a ``platform.events`` frame.  Informational only.
"""
from __future__ import annotations

import asyncio
import email.utils
import logging
import logging.handlers
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from sidecar.core.clock import Clock, WallClock
from sidecar.stack.virtual_at import at_headers
from sidecar.store.ops import Op

from sidecar.router.config import Target
from sidecar.router.attempt import DELIVERED, Outcome, classify_exc, classify_status, retryable, terminal
from sidecar.router.model import Delivery
from sidecar.router.ops import PutJournal

if TYPE_CHECKING:
    # Imported where a channel that needs them is made: httpx and standardwebhooks only by an
    # HTTP target, the Stack client by the app when it has a Stack URL — a sidecar with neither
    # starts without them (~45 ms of CPU per launch).  The frozen build lists them
    # (packaging/sidecar.spec).
    import httpx


log = logging.getLogger("sidecar.router.io.channels")
_decode = msgspec.json.Decoder().decode
_encode = msgspec.json.Encoder().encode


def scrub(text: str, secrets: tuple[str, ...]) -> str:
    """``text`` with every secret replaced by ``***``."""
    for s in secrets:
        if s:
            text = text.replace(s, "***")
    return text


class _Redact(logging.Filter):
    """Scrubs the channels' secrets from the HTTP libraries' own log lines: httpx logs every
    request URL at INFO, and a Bot API URL holds the bot token."""

    def __init__(self) -> None:
        super().__init__()
        self.secrets: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        if self.secrets:
            msg = record.getMessage()
            clean = scrub(msg, tuple(self.secrets))
            if clean != msg:
                record.msg, record.args = clean, ()
        return True


_REDACT = _Redact()
for _name in ("httpx", "httpcore", "httpcore.connection", "httpcore.http11", "httpcore.proxy"):
    logging.getLogger(_name).addFilter(_REDACT)


def protect(*secrets: str) -> None:
    """Register secrets that must never appear in a log line of the HTTP libraries."""
    _REDACT.secrets.update(s for s in secrets if s)


class Channel:
    """Base: one configured target."""

    kind = "channel"

    def __init__(self, name: str) -> None:
        self.name = name  # the target name
        self.stamp_at = False  # virtual clock: each call carries its pass instant (module rules)

    def _at(self, now: float) -> dict[str, str]:
        """The virtual instant header of a call made at ``now``, when stamping."""
        return at_headers(now if self.stamp_at else None)

    async def send(self, row: Delivery, now: float) -> Outcome:  # pragma: no cover - interface
        raise NotImplementedError

    async def probe(self, now: float) -> Outcome:  # pragma: no cover - interface
        raise NotImplementedError

    def ops_after(self, row: Delivery, outcome: Outcome, now: float) -> list[Op]:
        """Store ops to commit with the outcome (the journal's table row)."""
        return []

    async def close(self) -> None:
        pass


class _Http(Channel):
    def __init__(self, name: str, target: Target, transport: httpx.AsyncBaseTransport | None) -> None:
        import httpx

        super().__init__(name)
        self.timeout = target.timeout_s
        self.secrets: tuple[str, ...] = ()
        self._failures = (httpx.TransportError, TimeoutError)  # what _post turns into an outcome
        self._http = httpx.AsyncClient(timeout=httpx.Timeout(target.timeout_s), transport=transport,
                                       follow_redirects=False,
                                       headers={"User-Agent": "operator-sidecar"})

    async def _post(self, url: str, **kw: Any) -> httpx.Response | Outcome:
        try:
            async with asyncio.timeout(2 * self.timeout):  # a trickling receiver is a timeout too
                return await self._http.post(url, **kw)
        except self._failures as exc:
            out = classify_exc(exc)
            return retryable(scrub(out.error or "", self.secrets))

    async def close(self) -> None:
        await self._http.aclose()


class WebhookChannel(_Http):
    kind = "webhook"

    def __init__(self, name: str, target: Target, *, signing_clock: Clock | None = None,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        from standardwebhooks.webhooks import Webhook

        super().__init__(name, target, transport)
        assert target.url is not None
        self.url = target.url
        secret = target.read_secret()
        self.secrets = (secret, secret.removeprefix("whsec_"))
        protect(*self.secrets)
        self._wh = Webhook(secret)
        self.clock = signing_clock or WallClock()

    def headers(self, msg_id: str, body: bytes) -> dict[str, str]:
        """The Standard Webhooks headers for ``body`` signed now (signing clock)."""
        ts = int(self.clock.now())
        sig = self._wh.sign(msg_id, datetime.fromtimestamp(ts, tz=timezone.utc), body.decode())
        return {"webhook-id": msg_id, "webhook-timestamp": str(ts), "webhook-signature": sig,
                "Content-Type": "application/json"}

    async def _signed(self, msg_id: str, body: bytes, now: float) -> Outcome:
        resp = await self._post(self.url, content=body, headers={**self.headers(msg_id, body), **self._at(now)})
        if isinstance(resp, Outcome):
            return resp
        return classify_status(resp.status_code, scrub(resp.text[:200], self.secrets),
                               retry_after_header(resp.headers.get("Retry-After"), now))

    async def send(self, row: Delivery, now: float) -> Outcome:
        return await self._signed(row.id, row.message, now)

    async def probe(self, now: float) -> Outcome:
        msg_id = f"ping-{self.name}-{int(now)}"
        body = _encode({"type": "ping", "timestamp": int(now), "data": {"target": self.name}})
        return await self._signed(msg_id, body, now)


def retry_after_header(value: str | None, now: float) -> float | None:
    """An HTTP ``Retry-After`` (RFC 9110 §10.2.3: delay-seconds or an HTTP-date) → seconds from
    ``now`` (unix seconds; a date in the past → 0), or None when absent or unreadable (a 429
    then waits the ladder's next step, DESIGN §10)."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    if text.isdigit():
        return float(text)
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # an HTTP-date is GMT
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, when.timestamp() - now)


class TelegramChannel(_Http):
    kind = "telegram"

    def __init__(self, name: str, target: Target, *,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        super().__init__(name, target, transport)
        token = target.read_secret()
        self.secrets = (token,)
        protect(token)
        self.chat_id = target.chat_id
        self._base = f"{target.base_url.rstrip('/')}/bot{token}"

    async def _call(self, method: str, payload: dict[str, Any] | None, now: float) -> Outcome:
        resp = await self._post(f"{self._base}/{method}", json=payload or {}, headers=self._at(now))
        if isinstance(resp, Outcome):
            return resp
        try:
            data = _decode(resp.content) if resp.content else {}
        except msgspec.DecodeError:
            data = {}
        if not isinstance(data, dict):
            data = {}
        if 200 <= resp.status_code < 300 and data.get("ok") is True:
            return DELIVERED
        status = resp.status_code if resp.status_code >= 300 else int(data.get("error_code") or 502)
        detail = scrub(str(data.get("description") or resp.text[:200]), self.secrets)
        params = data.get("parameters")
        ra = params.get("retry_after") if isinstance(params, dict) else None
        retry_after = ra if isinstance(ra, (int, float)) and not isinstance(ra, bool) else None
        if status in (401, 404):
            return terminal(f"bad target: HTTP {status}: {detail}", status)
        return classify_status(status, detail, None if retry_after is None else float(retry_after))

    async def send(self, row: Delivery, now: float) -> Outcome:
        return await self._call("sendMessage", {"chat_id": self.chat_id,
                                                "text": row.message.decode(errors="replace")}, now)

    async def probe(self, now: float) -> Outcome:
        return await self._call("getMe", None, now)


class _Rotating(logging.handlers.RotatingFileHandler):
    """A rotating file whose write errors are raised (the stdlib prints them and goes on)."""

    def handleError(self, record: logging.LogRecord) -> None:
        raise  # noqa: PLE0704 - called from emit()'s except block: re-raise its exception


class JournalChannel(Channel):
    kind = "journal"

    def __init__(self, name: str, target: Target, data_dir: Path) -> None:
        super().__init__(name)
        self.path = target.path or Path(data_dir) / "journal" / f"{name}.jsonl"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._handler = _Rotating(
            self.path, maxBytes=target.max_bytes, backupCount=target.backups, encoding="utf-8",
            delay=True)
        self._handler.setFormatter(logging.Formatter("%(message)s"))

    def line(self, row: Delivery, now: float) -> str:
        body = _decode(row.message) if row.message else {}
        return _encode({"delivery_id": row.id, "target": self.name, "at": now,
                        **(body if isinstance(body, dict) else {"body": body})}).decode()

    async def send(self, row: Delivery, now: float) -> Outcome:
        try:
            rec = logging.makeLogRecord({"msg": self.line(row, now), "levelno": logging.INFO})
            self._handler.emit(rec)
            self._handler.flush()
        except (OSError, msgspec.DecodeError) as exc:
            return retryable(f"journal: {type(exc).__name__}: {exc}")
        return DELIVERED

    def ops_after(self, row: Delivery, outcome: Outcome, now: float) -> list[Op]:
        if not outcome.ok:
            return []
        return [PutJournal(row.id, self.name, now, self.line(row, now))]

    async def probe(self, now: float) -> Outcome:
        folder = self.path.parent
        if folder.is_dir() and folder.exists():
            return DELIVERED
        return terminal(f"journal folder {folder} is missing")

    async def close(self) -> None:
        self._handler.close()


def build_channel(name: str, target: Target, *, data_dir: Path, signing_clock: Clock | None = None,
                  transport: httpx.AsyncBaseTransport | None = None) -> Channel:
    """The channel driver of a configured target."""
    if target.channel == "webhook":
        return WebhookChannel(name, target, signing_clock=signing_clock, transport=transport)
    if target.channel == "telegram":
        return TelegramChannel(name, target, transport=transport)
    return JournalChannel(name, target, data_dir)
