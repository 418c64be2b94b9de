"""Loopback receivers of the routing world: a Standard Webhooks endpoint and a fake Telegram Bot
API (scenarios README "Routing world", ``target_fault``; DESIGN §10).

Rules / theory of operation
---------------------------
* One HTTP server on 127.0.0.1 (a free port, a daemon thread) serves every ``webhook`` and
  ``telegram`` target of a scenario:

  - ``POST /hooks/{target}`` — a webhook.  Every request is verified with the
    ``standardwebhooks`` library (``Webhook(secret).verify``: the headers, the HMAC over
    ``id.timestamp.body``, the timestamp within 5 min of the real clock); a bad or missing
    signature answers **401** and is recorded ``verified: false``.  A verified request is
    recorded with its ``webhook-id``; a repeated id is counted as a duplicate (what a receiver
    that dedups on ``webhook-id`` does) and answered 200 again.
  - ``POST /bot{token}/sendMessage`` ``{"chat_id", "text"}`` and ``/bot{token}/getMe`` — the Bot
    API subset the sidecar uses.  An unknown token → 401, a wrong ``chat_id`` → 400 ("chat not
    found"), as the real API answers (``{"ok": false, "error_code", "description"}``).

* Each target's secret / bot token is derived from the seed and the target name; a scenario
  never names one (:meth:`Receivers.target_config` gives the sidecar's configuration for a
  target: URL, secret or bot token, chat id).
* Faults per target (:meth:`Receivers.set_fault`, scenario ``target_fault``): ``down`` — the
  connection is dropped without an answer; ``up`` — every fault cleared; ``error_rate p`` — 500
  when the keyed draw over ``(seed, target, request#)`` is below p; ``latency s`` — sleep
  ``min(s, 2)`` real seconds; ``terminal`` — 400 to everything; ``probe_fail`` — only the
  warm-up probes fail (a webhook ``ping`` event, Telegram ``getMe``) with 500; ``rate_limit s``
  (README revision 2) — 429 with the channel's retry-after: Telegram's
  ``parameters.retry_after = s`` in the body, a webhook's ``Retry-After: ⌈s⌉`` header; ``hang``
  — the connection is accepted and never answered until ``up`` (or another answer mode) is set
  or the receivers stop; then it is dropped without an answer (the sidecar's total timeout ends
  its side first).
* Records: ``webhook.received`` lines ``{"at", "event", "target", "webhook_id", "verified"}``
  and ``telegram.received`` lines ``{"at", "event", "target", "chat_id", "text"}`` at the
  sidecar's virtual instant of the call (its ``Sidecar-Virtual-At`` header: the delivery pass's
  instant, so a call made inside a ``platform.events`` frame is recorded at its own instant) or,
  without one, the harness's virtual instant (``now_fn``); in arrival order
  (:meth:`Receivers.records`).
"""
from __future__ import annotations

import base64
import hashlib
import json
import math
import re
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler
from typing import Any, Callable

from standardwebhooks.webhooks import Webhook

from electron_stub import keyed
from electron_stub.loopback import LoopbackServer
from electron_stub.stack_server import virtual_at
from sidecar.stack.virtual_at import VIRTUAL_AT_HEADER

MAX_LATENCY_S = 2.0
#: target ``config`` keys a scenario may set and the harness passes on to the sidecar
TUNABLE = ("timeout_s",)
FAULTS = ("down", "up", "error_rate", "latency", "terminal", "probe_fail", "rate_limit", "hang")
#: faults that decide the answer: setting one replaces the others (``latency`` adds to any)
ANSWER_MODES = ("down", "error_rate", "terminal", "probe_fail", "rate_limit", "hang")
#: how often (real seconds) a hanging handler looks whether its hang was lifted
HANG_POLL_S = 0.05
_HOOK = re.compile(r"^/hooks/([^/]+)$")
_BOT = re.compile(r"^/bot([^/]+)/(sendMessage|getMe)$")


def _derive(seed: int, *key: str) -> bytes:
    return hashlib.blake2b("\x1f".join((str(seed), *key)).encode(), digest_size=24).digest()


class Receivers:
    """The loopback receivers.  ``targets``: name → channel (``webhook`` | ``telegram``);
    ``config``: name → the scenario's target config (``chat_id``)."""

    def __init__(self, seed: int = 0, now_fn: Callable[[], float | None] = lambda: None) -> None:
        self.seed, self.now_fn = seed, now_fn
        self.lock = threading.Lock()
        self.channels: dict[str, str] = {}
        self.chat_ids: dict[str, str] = {}
        self.tuning: dict[str, dict[str, Any]] = {}
        self.faults: dict[str, dict[str, Any]] = {}
        self.hanging: dict[str, int] = {}  # target → requests held by ``hang`` right now
        self.requests: dict[str, int] = {}
        self.seen_ids: dict[str, set[str]] = {}
        self.duplicates: dict[str, int] = {}
        self._records: list[dict[str, Any]] = []
        self._httpd: LoopbackServer | None = None

    # ---- world -----------------------------------------------------------------------------

    def add_target(self, name: str, channel: str, config: dict[str, Any] | None = None) -> None:
        if channel not in ("webhook", "telegram"):
            raise ValueError(f"no loopback receiver for channel {channel!r}")
        with self.lock:
            self.channels[name] = channel
            self.chat_ids[name] = str((config or {}).get("chat_id", "-1"))
            # the scenario may tune how the sidecar's sender waits (a ``hang`` scenario's attempt
            # times out in 1 s instead of the default 5 s); where it sends stays the harness's
            self.tuning[name] = {k: (config or {})[k] for k in TUNABLE if k in (config or {})}
            self.faults[name] = {}

    def secret(self, name: str) -> str:
        """The webhook secret of ``name`` (``whsec_`` + base64 of 24 keyed bytes)."""
        return "whsec_" + base64.b64encode(_derive(self.seed, "webhook-secret", name)).decode()

    def bot_token(self, name: str) -> str:
        digest = _derive(self.seed, "bot-token", name)
        return f"{int.from_bytes(digest[:4], 'big')}:{base64.urlsafe_b64encode(digest[4:]).decode().rstrip('=')}"

    def target_config(self, name: str) -> dict[str, Any]:
        """The sidecar's configuration of target ``name`` (goes into ``SIDECAR_ROUTER_TARGETS``)."""
        channel = self.channels[name]
        if channel == "webhook":
            return {"channel": "webhook", "url": f"{self.url}/hooks/{name}", "secret": self.secret(name),
                    **self.tuning[name]}
        return {"channel": "telegram", "base_url": self.url, "bot_token": self.bot_token(name),
                "chat_id": self.chat_ids[name], **self.tuning[name]}

    def set_fault(self, target: str, mode: str, value: float | None = None) -> None:
        if mode not in FAULTS:
            raise ValueError(f"unknown target fault mode {mode!r}")
        with self.lock:
            if target not in self.faults:
                raise KeyError(f"unknown target {target!r}")
            f = self.faults[target]
            if mode in ANSWER_MODES:  # what the receiver answers: the new mode replaces the old
                for m in ANSWER_MODES:  # (``down`` then ``terminal`` = 400s, not still down)
                    f.pop(m, None)
            if mode == "up":
                f.clear()
            elif mode in ("down", "terminal", "probe_fail", "hang"):
                f[mode] = True
            elif mode == "latency":
                f[mode] = min(float(value or 0.0), MAX_LATENCY_S)
            else:
                f[mode] = float(value or 0.0)

    def records(self, event: str | None = None) -> list[dict[str, Any]]:
        with self.lock:
            return [dict(r) for r in self._records if event is None or r["event"] == event]

    # ---- lifecycle -------------------------------------------------------------------------

    def start(self) -> str:
        outer = self

        class Handler(_Handler):
            receivers = outer

        self._httpd = LoopbackServer(Handler, name="receivers").start()
        return self.url

    @property
    def url(self) -> str:
        assert self._httpd is not None, "not started"
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def stop(self) -> None:
        """Off the network: open connections are reset, delayed answers dropped (see loopback)."""
        if self._httpd is not None:
            self._httpd.stop()
            self._httpd = None

    @property
    def clients_gone(self) -> int:
        """Requests whose client (a stopped or killed sidecar) left before the answer."""
        return self._httpd.clients_gone if self._httpd is not None else 0

    # ---- requests (handler threads) --------------------------------------------------------

    def handle(self, path: str, headers: dict[str, str],
               body: bytes) -> tuple[int, Any] | tuple[int, Any, dict[str, str]] | None:
        """One request (``headers`` with lower-case names) → ``(status, JSON object)``, or None
        to drop the connection."""
        at = virtual_at(headers.get(VIRTUAL_AT_HEADER.lower()))
        if m := _HOOK.match(path):
            return self._hook(m.group(1), headers, body, at)
        if m := _BOT.match(path):
            return self._bot(m.group(1), m.group(2), body, at)
        return 404, {"error": f"no route {path}"}

    def _hang(self, target: str) -> None:
        """Hold a request of ``target`` until its ``hang`` is lifted or the receivers stop."""
        with self.lock:
            self.hanging[target] = self.hanging.get(target, 0) + 1
        try:
            while True:
                with self.lock:
                    if not self.faults.get(target, {}).get("hang"):
                        return
                httpd = self._httpd
                if httpd is None or httpd.stopping:
                    return
                httpd.pause(HANG_POLL_S)
        finally:
            with self.lock:
                self.hanging[target] -= 1

    def _fault(self, target: str, probe: bool) -> tuple[int, Any] | tuple[int, Any, dict[str, str]] | None | bool:
        """Apply the target's faults: an answer (``(status, body[, headers])``), None to drop,
        or False for "go on"."""
        with self.lock:
            f = dict(self.faults.get(target, {}))
            n = self.requests[target] = self.requests.get(target, 0) + 1
        if f.get("latency"):
            httpd = self._httpd
            if httpd is not None:
                httpd.pause(f["latency"])  # cut short when the receivers stop
            else:
                time.sleep(f["latency"])
        if f.get("hang"):
            self._hang(target)
            return None  # never answered: dropped once the hang is lifted
        if f.get("down"):
            return None
        if f.get("terminal"):
            return 400, {"ok": False, "error_code": 400, "description": "Bad Request: injected"}
        if probe and f.get("probe_fail"):
            return 500, {"ok": False, "error_code": 500, "description": "probe failed (injected)"}
        if "rate_limit" in f:  # 0 is a fault too: 429 with retry-after 0 (a hot retry, DESIGN §10)
            s = f["rate_limit"]
            if self.channels.get(target) == "webhook":  # RFC 9110: delay-seconds, an integer
                return 429, {"error": "Too Many Requests"}, {"Retry-After": str(math.ceil(s))}
            return 429, {"ok": False, "error_code": 429, "description": "Too Many Requests",
                         "parameters": {"retry_after": int(s) if float(s).is_integer() else s}}
        rate = f.get("error_rate", 0.0)
        if rate > 0 and keyed.chance(self.seed, rate, "receiver-error", target, n):
            return 500, {"ok": False, "error_code": 500, "description": "injected fault"}
        return False

    def _record(self, at: float | None, **rec: Any) -> None:
        with self.lock:
            self._records.append({"at": self.now_fn() if at is None else at, **rec})

    def _hook(self, target: str, headers: dict[str, str], body: bytes,
              at: float | None) -> tuple[int, Any] | None:
        if self.channels.get(target) != "webhook":
            return 404, {"error": f"no webhook target {target!r}"}
        try:  # a probe is a ping event; read it before verifying so faults come first
            probe = json.loads(body or b"null").get("type") == "ping"
        except (ValueError, AttributeError):
            probe = False
        fault = self._fault(target, probe)
        if fault is not False:
            return fault  # type: ignore[return-value]
        try:
            Webhook(self.secret(target)).verify(body, headers)
        except Exception as exc:  # noqa: BLE001 - the library raises several kinds for bad input
            self._record(at, event="webhook.received", target=target,
                         webhook_id=headers.get("webhook-id"), verified=False)
            return 401, {"error": f"signature: {exc}"}
        msg_id = headers.get("webhook-id", "")
        with self.lock:
            seen = self.seen_ids.setdefault(target, set())
            if msg_id in seen:
                self.duplicates[target] = self.duplicates.get(target, 0) + 1
            seen.add(msg_id)
        self._record(at, event="webhook.received", target=target, webhook_id=msg_id, verified=True)
        return 200, {"ok": True}

    def _bot(self, token: str, method: str, body: bytes, at: float | None) -> tuple[int, Any] | None:
        target = next((n for n, c in self.channels.items() if c == "telegram" and self.bot_token(n) == token), None)
        if target is None:
            return 401, {"ok": False, "error_code": 401, "description": "Unauthorized"}
        fault = self._fault(target, method == "getMe")
        if fault is not False:
            return fault  # type: ignore[return-value]
        if method == "getMe":
            return 200, {"ok": True, "result": {"id": 1, "is_bot": True, "username": f"{target}_bot"}}
        try:
            data = json.loads(body or b"null")
            chat_id, text = str(data["chat_id"]), str(data["text"])
        except (ValueError, TypeError, KeyError):
            return 400, {"ok": False, "error_code": 400, "description": "Bad Request: chat_id and text"}
        if chat_id != self.chat_ids[target]:
            return 400, {"ok": False, "error_code": 400, "description": "Bad Request: chat not found"}
        self._record(at, event="telegram.received", target=target, chat_id=chat_id, text=text)
        return 200, {"ok": True, "result": {"message_id": self.requests[target], "text": text}}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    receivers: Receivers

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass

    def do_POST(self) -> None:
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n > 0 else b""
        headers = {k.lower(): v for k, v in self.headers.items()}
        out = self.receivers.handle(self.path.split("?", 1)[0], headers, body)
        if out is None:
            self.close_connection = True
            return
        status, obj = out[0], out[1]
        extra: dict[str, str] = out[2] if len(out) > 2 else {}  # type: ignore[misc]
        payload = json.dumps(obj).encode()
        self.send_response(status)
        for name, value in extra.items():
            self.send_header(name, value)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST
