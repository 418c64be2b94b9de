"""Who may talk to the sidecar: the handshake header checks and the ``auth`` first frame (sans-I/O).

Rules / theory of operation
---------------------------
The sidecar listens on loopback, so the only strangers that can reach it are other local
processes and — the real threat — web pages in the operator's browser (a page may open
``ws://127.0.0.1:N``, and DNS rebinding may make one look same-host).  Three gates, in order:

1. **Origin** (HTTP handshake).  Browsers always send ``Origin``; Electron's main process does
   not.  No ``Origin`` → allowed; an ``Origin`` equal to one of ``allowed_origins`` → allowed;
   anything else, or several ``Origin`` headers → HTTP 403.
2. **Host** (HTTP handshake).  Must name loopback: ``127.0.0.1``, ``localhost`` or ``[::1]``, any
   port, case-insensitive.  Defeats DNS rebinding (the page's Host is its own domain).  Missing
   or repeated → HTTP 403.
3. **Token** (first websocket frame).  The first frame must be the JSON-RPC *request*
   ``auth {token: str, client?: str, version?: str, protocol?: "MAJOR.MINOR", capabilities?: [str]}``
   with the per-launch secret; compared with
   :func:`hmac.compare_digest` over UTF-8 bytes, so the time taken does not reveal how much of a
   guess was right.  Anything else raises :class:`~bridge.errors.Unauthorized` (-32001) carrying
   the frame's id, and the server closes with 4401 after answering.
4. **Size** (until the token matched; DESIGN §3–§4).  A frame before auth is at
   most :func:`auth_frame_cap` bytes — :data:`AUTH_FRAME` (4 KiB), or more for a token so long
   that its own auth frame needs it (a long secret must not lock its owner out).  websockets
   enforces it at the frame's header: a bigger one is closed with 1009 (RFC 6455 "message too
   big", as after auth past ``hard_frame``) before a payload byte is buffered, and never decoded;
   200 strangers each sending 10 MB grew the sidecar by 1.2 GB without it (docs/decisions.md).
   websockets takes a frame's limit when its first byte arrives, so a frame sent before the auth
   answer came back may meet the cap too: a client sends nothing else until that answer.

5. **Protocol** (after the token, so a stranger learns no version; DESIGN §4).  ``protocol``
   is the contract version the client was written for, ``"MAJOR.MINOR"``; its major must be
   this side's (a client of a higher minor is accepted: what it knows more it asks for by
   capability).  Missing means a client older than versioning, taken as ``"1.0"`` (the contract
   it was written against).  Anything else — another major, not ``"D.D"`` — raises
   :class:`~bridge.errors.UnsupportedProtocol` (-32602, ``data {field: "protocol",
   supported: [...]}``) and the server closes with 4426 after answering.  ``capabilities``
   missing (``None``) means "unknown" — an older client, probed as before — not "none".

Nothing in this module does I/O; ``bridge.server`` applies it.
"""
from __future__ import annotations

import hmac
import ipaddress
import re
from collections.abc import Iterable, Sequence
from typing import Any

import msgspec

from . import jsonrpc
from .errors import RpcError, Unauthorized, UnsupportedProtocol

__all__ = ["AUTH_FRAME", "Hello", "auth_frame_cap", "check_protocol", "LOOPBACK_NAMES", "check_handshake", "host_name", "is_loopback_bind", "authenticate"]

LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1"})  # accepted Host names (no port)
# bytes of a frame before auth: an auth frame is ~100 bytes plus the token (43 for 32 random
# bytes in base64) and two short strings; 4 KiB is 20× that and costs nothing per stranger
AUTH_FRAME = 4 << 10


class Hello(msgspec.Struct, kw_only=True):
    """The ``auth`` params.  Unknown members are ignored."""

    token: str  # the per-launch secret
    client: str = ""  # who connects, e.g. "electron" or "harness" (logs only)
    version: str = ""  # the client's version (logs only)
    protocol: Any = "1.0"  # the contract version it speaks, "MAJOR.MINOR" (rule 5; checked by check_protocol)
    capabilities: list[str] | None = None  # what it serves; None: not said (an older client)


_VERSION = re.compile(r"(\d+)\.(\d+)")


def check_protocol(hello: Hello, supported: str) -> None:
    """Rule 5: accept ``hello.protocol`` if it is ``"MAJOR.MINOR"`` of ``supported``'s major
    (``supported``: this side's ``"MAJOR.MINOR"``); else raise :class:`UnsupportedProtocol`."""
    wanted = _VERSION.fullmatch(hello.protocol) if isinstance(hello.protocol, str) else None
    ours = _VERSION.fullmatch(supported)
    assert ours is not None, supported
    if wanted is None or wanted[1] != ours[1]:
        raise UnsupportedProtocol(
            f"auth: protocol {hello.protocol!r} is not supported; this sidecar speaks {supported}"
            f" (any {ours[1]}.x client)", data={"field": "protocol", "supported": [supported]})


def host_name(host_header: str) -> str:
    """The host part of a ``Host`` header, lower-cased, without port or IPv6 brackets.

    ``"[::1]:8080"`` → ``"::1"``; ``"LocalHost:80"`` → ``"localhost"``; ``"127.0.0.1"`` →
    ``"127.0.0.1"``.  Malformed values come back as something that is not a loopback name.
    """
    value = host_header.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return value
        rest = value[end + 1:]
        if rest and not (rest.startswith(":") and rest[1:].isdigit()):
            return value
        return value[1:end]
    name, sep, port = value.rpartition(":")
    if sep and port.isdigit() and ":" not in name:
        return name
    return value


def check_handshake(
    origins: Sequence[str], hosts: Sequence[str], allowed_origins: Iterable[str]
) -> str | None:
    """Why the opening handshake must be refused (HTTP 403), or None to let it through.

    ``origins`` / ``hosts``: every value of the ``Origin`` / ``Host`` headers (usually 0 or 1).
    """
    if len(origins) > 1:
        return "several Origin headers"
    if origins and origins[0] not in allowed_origins:
        return f"Origin {origins[0]!r} is not allowed"
    if len(hosts) != 1:
        return "exactly one Host header is required"
    if host_name(hosts[0]) not in LOOPBACK_NAMES:
        return f"Host {hosts[0]!r} is not loopback"
    return None


def is_loopback_bind(host: str) -> bool:
    """True if ``host`` is an address or name the server may bind (loopback only)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def auth_frame_cap(wanted: int, token: bytes, hard_frame: int) -> int:
    """Bytes a frame may have before auth: ``wanted``, raised to what an auth frame carrying
    ``token`` (UTF-8) may need — JSON may escape a byte as ``\\u00XX`` (6 bytes), plus 1 KiB for
    the envelope, ``client`` and ``version`` — and never above ``hard_frame``."""
    return min(max(wanted, 6 * len(token) + 1024), hard_frame)


def authenticate(message: jsonrpc.Message | RpcError, token: bytes) -> tuple[jsonrpc.Request, Hello]:
    """Check a connection's first frame; return the auth request and its params.

    ``message`` is what :func:`bridge.jsonrpc.decode` returned or raised for the frame; ``token``
    the expected secret as UTF-8 bytes.  Raises :class:`Unauthorized` (with the frame's id when
    known) for: a framing error, anything but a *request* named ``auth``, params that are not
    ``{token: str, ...}``, or a wrong token.  The messages do not reveal the token.
    """
    if isinstance(message, RpcError):
        raise Unauthorized(f"first frame must be an auth request ({message.message})", id=message.id)
    msg_id = getattr(message, "id", None)
    if not isinstance(message, jsonrpc.Request) or message.method != "auth":
        what = getattr(message, "method", None) or type(message).__name__
        raise Unauthorized(f"first frame must be an auth request, got {what!r}", id=msg_id)
    try:
        hello = msgspec.convert(message.params, Hello)
    except msgspec.ValidationError as exc:
        raise Unauthorized(f"auth params: {exc}", id=msg_id) from None
    if not hmac.compare_digest(hello.token.encode("utf-8", "surrogatepass"), token):
        raise Unauthorized("wrong token", id=msg_id)
    return message, hello
