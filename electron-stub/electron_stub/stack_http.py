"""The reference Stack's HTTP side (module :mod:`electron_stub.stack_server`): the request
handler of its server threads, ``POST /v1/batch`` and the sidecar's virtual instant stamp.

Rules / theory of operation
---------------------------
* :class:`StackHandler` reads one request (body by ``Content-Length``) and hands it to
  ``StackServer.handle``; None from it drops the connection without an answer (``down``).
* :func:`serve_batch`: ``POST /v1/batch`` — every write handled exactly like its single call
  (same idempotency, same keyed ``error_rate`` draw per key) at the batch's instant; a failed
  write fails the later writes of its pair (:func:`pair_of`) in the same batch, answered 424.
* :func:`virtual_at`: the ``Sidecar-Virtual-At`` header a virtual-clock sidecar sends with every
  call (the instant of its delivery pass, unix seconds); the reference Stack and the receivers
  record a call at it, and at the harness's own instant without it (issue 11 item 3).
"""
from __future__ import annotations

import math
import re
import socket
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

import msgspec

if TYPE_CHECKING:
    from electron_stub.stack_server import StackServer


# msgspec, not the stdlib's json: a batch of writes was decoded and encoded ~7 times per write
# here (batch, body, fingerprint, answer), and these server threads share the harness's GIL —
# on a 1-hour shift they took ~2.5 CPU s beside the harness's own ~3 s (docs/decisions.md)
_ENCODE = msgspec.json.Encoder()
_SORTED = msgspec.json.Encoder(order="sorted")
_DECODE = msgspec.json.Decoder()


def dump(obj: Any) -> bytes:
    """Compact JSON (UTF-8, no escaping of non-ASCII)."""
    return _ENCODE.encode(obj)


def load(body: bytes | None) -> Any:
    """JSON text → Python values; empty → None.  msgspec.DecodeError (a ValueError) if it is not JSON."""
    return _DECODE.decode(body or b"null")


def copied(obj: Any) -> Any:
    """A deep copy of JSON values (what a caller may keep and change)."""
    return _DECODE.decode(_ENCODE.encode(obj))


def virtual_at(raw: str | None) -> float | None:
    """The sidecar's virtual instant of a call from its ``Sidecar-Virtual-At`` header value
    (unix seconds), or None (absent or not a finite number: the harness's own instant is used)."""
    try:
        at = float(raw) if raw is not None else None
    except ValueError:
        return None
    return at if at is not None and math.isfinite(at) else None


def serve_batch(stack: "StackServer", body: bytes, at: float | None) -> tuple[int, bytes] | None:
    """``POST /v1/batch`` on the reference Stack ``stack`` (its module rules): each write as its
    single call at the batch's instant ``at``; a failed write fails its pair's later writes (424)."""
    with stack.lock:
        down, latency = stack.mode["down"], stack.mode["latency"]
    if latency > 0:
        stack._pause(latency)
    if down:
        with stack.lock:
            stack.counters["refused"] += 1
        return None
    try:
        writes = load(body)["writes"]
        if not isinstance(writes, list) or not 1 <= len(writes) <= 500:
            raise ValueError("writes must be a list of 1..500")
        for w in writes:
            if not (isinstance(w, dict) and isinstance(w.get("key"), str) and w["key"]
                    and isinstance(w.get("method"), str) and isinstance(w.get("path"), str)):
                raise ValueError("every write needs key, method, path, body")
    except (ValueError, TypeError, KeyError) as exc:
        return stack._bad(400, f"bad batch: {exc}")
    with stack.lock:
        stack.counters["batches"] += 1
        stack.counters["batched_writes"] += len(writes)
    results = []
    failed_pairs: set[str] = set()
    for w in writes:
        wbody = dump(w.get("body"))
        pair = pair_of(w["path"], w.get("body"))
        if pair in failed_pairs:
            results.append({"key": w["key"], "status": 424,
                            "body": {"error": "an earlier write of this pair failed in the batch"}})
            continue
        path = w["path"].split("?", 1)[0]
        status, answer = stack.handle(w["method"], path, {"Idempotency-Key": w["key"]}, wbody,
                                     in_batch=True, at=at) or (502, b"null")
        if not 200 <= status < 300:
            failed_pairs.add(pair)
        # the answer is already compact JSON from dump(): spliced in as is, the bytes that
        # load() then dump() gave back (a decode and an encode less per write, issue 24)
        results.append({"key": w["key"], "status": status, "body": msgspec.Raw(answer)})
    return 200, dump({"results": results})


def pair_of(path: str, body: Any) -> str:
    """The ``tu/ru`` lane of a write: from a marker path, else from the body's ``ru``/``task.ru``."""
    d = re.match(r"^/v1/tus/([^/]+)/deliveries/([^/]+)$", path)
    if d:  # a handed-over delivery is its own lane (sidecar.router.handover.lane)
        return f"{unquote(d.group(1))}/delivery:{unquote(d.group(2))}"
    m = re.match(r"^/v1/tus/([^/]+)/(?:favorites/([^/]+)/)?", path)
    tu = unquote(m.group(1)) if m else ""
    ru = unquote(m.group(2)) if m and m.group(2) else None
    if ru is None and isinstance(body, dict):
        task = body.get("task")
        ru = body.get("ru") or (task.get("ru") if isinstance(task, dict) else None)
    return f"{tu}/{ru}"


class StackHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    stack: "StackServer"  # set by StackServer.start

    def setup(self) -> None:
        super().setup()
        # headers and body are two writes: without this, Nagle + delayed ACK add ~40 ms per answer
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass

    def _serve(self) -> None:
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n > 0 else b""
        out = self.stack.handle(self.command, self.path.split("?", 1)[0], self.headers, body)
        if out is None:  # down: drop the connection without an answer
            self.close_connection = True
            return
        status, payload = out
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_PUT = do_POST = do_DELETE = _serve


def fingerprint(method: str, path: str, body: bytes) -> str:
    """A write's identity for the idempotency check: the body compared as JSON, not as bytes."""
    try:
        canon = _SORTED.encode(load(body)).decode()
    except ValueError:
        canon = repr(body)
    return f"{method} {path} {canon}"
