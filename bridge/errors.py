"""The bridge's one exception tree, its JSON-RPC error codes and its websocket close codes.

Rules / theory of operation
---------------------------
* Everything the bridge raises derives from :class:`BridgeError`, so a caller can catch the
  bridge as a whole.
* :class:`RpcError` is "answer this request with a JSON-RPC error object".  The server's handler
  raises it (or a subclass: :class:`MethodNotFound`, :class:`InvalidParams`, ...) and the bridge
  turns it into ``{"error": {"code", "message", "data"}}``.  The codec raises the framing ones
  (:class:`ParseError`, :class:`InvalidRequest`) with the request id when it could be read.
* The other three belong to requests *this* side sent to the peer:
  :class:`RemoteError` (the peer answered with an error object), :class:`RequestTimeout` (no answer
  in time) and :class:`NotConnected` (no authenticated peer, or the connection dropped while the
  request was outstanding).  :class:`RemoteError` is deliberately **not** an :class:`RpcError`: a
  server handler that lets a peer's error escape answers the original caller with ``-32603``
  instead of forwarding the peer's code as if it were its own.  (The client's ``on_request``
  callback may raise :class:`RemoteError` to answer with that exact error object.)
* A handler's own exceptions need not know this module: one with an ``error_object()`` method
  returning ``(code, message, data)`` (:class:`ErrorObject`; the sidecar's ``SidecarError``) is
  answered with that error object — :func:`as_rpc_error` is that mapping, the one place a
  handler's exception becomes an :class:`RpcError`.  :class:`RemoteError` has no such method on
  purpose (see above).
* Close codes live in the private range 4000-4999 and mirror HTTP statuses so that the Electron
  team can read them: 44xx = the connection was refused for who it is or how it behaved.
"""
from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

__all__ = [
    "error_text",
    "ErrorObject",
    "as_rpc_error",
    "BridgeError",
    "RpcError",
    "ParseError",
    "InvalidRequest",
    "MethodNotFound",
    "InvalidParams",
    "InternalError",
    "Unauthorized",
    "UnsupportedProtocol",
    "ShuttingDown",
    "CutShort",
    "RemoteError",
    "RequestTimeout",
    "NotConnected",
    "AnswerTooLarge",
    "PARSE_ERROR",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "INVALID_PARAMS",
    "INTERNAL_ERROR",
    "UNAUTHORIZED",
    "SHUTTING_DOWN",
    "CUT_SHORT",
    "CLOSE_GOING_AWAY",
    "CLOSE_TOO_BIG",
    "CLOSE_UNAUTHORIZED",
    "CLOSE_FORBIDDEN_ORIGIN",
    "CLOSE_AUTH_TIMEOUT",
    "CLOSE_REPLACED",
    "CLOSE_UNSUPPORTED_PROTOCOL",
]

# ---- JSON-RPC 2.0 error codes --------------------------------------------------------------

PARSE_ERROR = -32700  # the frame is not JSON (or not UTF-8, or nested beyond the decoder's depth)
INVALID_REQUEST = -32600  # JSON, but not a JSON-RPC 2.0 request/notification/response object
METHOD_NOT_FOUND = -32601  # the handler does not know the method
INVALID_PARAMS = -32602  # the method is known, its params are not what it takes
INTERNAL_ERROR = -32603  # the handler failed unexpectedly (its message is passed on)
UNAUTHORIZED = -32001  # server-defined range: the first frame was not a valid ``auth``
# the server is stopping and never began this request: nothing of it was done (send it again to
# the next process); apart from -32603 so a client never reads a clean stop as a failed step
SHUTTING_DOWN = -32002
# the server stopped while this request was under way: what it completed is kept and ``data``
# says how far it got (``now`` of an advance, ``taken`` of ``platform.events``)
CUT_SHORT = -32003

# ---- websocket close codes -----------------------------------------------------------------

CLOSE_GOING_AWAY = 1001  # RFC 6455: the server shuts down (BridgeServer.close)
# RFC 6455: a frame over ``hard_frame``, or over ``auth_frame`` (4 KiB) before auth (sent by websockets)
CLOSE_TOO_BIG = 1009
CLOSE_UNAUTHORIZED = 4401  # first frame missing, malformed, not ``auth``, or a wrong token
# Reserved, not sent: a foreign Origin or non-loopback Host is refused during the HTTP handshake
# with status 403, before a websocket exists that could carry a close code.  Kept so that the
# whole code space is written down in one place for the Electron team.
CLOSE_FORBIDDEN_ORIGIN = 4403
CLOSE_AUTH_TIMEOUT = 4408  # no first frame within ``auth_timeout`` seconds
CLOSE_REPLACED = 4409  # a newer connection authenticated; only one client at a time
# the auth's ``protocol`` names a major this side does not speak (HTTP 426 Upgrade Required):
# the client must not reconnect — another launch will not speak it either
CLOSE_UNSUPPORTED_PROTOCOL = 4426


class BridgeError(Exception):
    """Root of every exception the bridge raises."""


class RpcError(BridgeError):
    """A JSON-RPC error object to send back: ``{"code": int, "message": str, "data"?: any}``.

    ``id`` is the id of the request the error answers when it is known (the codec fills it in for
    framing errors whose id it could read); ``None`` otherwise, which is sent as ``"id": null``.
    """

    code: int = INTERNAL_ERROR  # default code of the class; an instance may override it

    def __init__(self, code: int | None = None, message: str = "", data: Any = None, *, id: Any = None):
        if code is not None:
            self.code = code  # JSON-RPC error code (int)
        self.message = message or type(self).__name__  # human-readable, one line
        self.data = data  # optional structured detail (any JSON value); None = omitted on the wire
        self.id = id  # request id this error answers (int | str | None)
        super().__init__(self.message)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code}, message={self.message!r}, data={self.data!r})"


class _FixedCode(RpcError):
    """Base of the standard errors: constructed as ``Cls(message, data=None, id=None)``."""

    def __init__(self, message: str = "", data: Any = None, *, id: Any = None):
        super().__init__(None, message, data, id=id)


class ParseError(_FixedCode):
    """-32700: the frame is not valid JSON text."""

    code = PARSE_ERROR


class InvalidRequest(_FixedCode):
    """-32600: valid JSON but not a JSON-RPC 2.0 object (wrong types, batch, missing fields)."""

    code = INVALID_REQUEST


class MethodNotFound(_FixedCode):
    """-32601: raised by a handler for a method it does not serve."""

    code = METHOD_NOT_FOUND


class InvalidParams(_FixedCode):
    """-32602: raised by a handler when ``params`` does not match the method's shape."""

    code = INVALID_PARAMS


class InternalError(_FixedCode):
    """-32603: the handler failed; also what any unexpected exception is turned into."""

    code = INTERNAL_ERROR


class ShuttingDown(_FixedCode):
    """-32002: the server is stopping; this request was refused before anything of it was done."""

    code = SHUTTING_DOWN


class CutShort(_FixedCode):
    """-32003: the server stopped while this request was under way; what it completed before is
    kept and ``data`` says how far it got (``now``, ``taken``; None when nothing partial)."""

    code = CUT_SHORT


class Unauthorized(_FixedCode):
    """-32001: the first frame was not a valid ``auth`` request (followed by close 4401)."""

    code = UNAUTHORIZED


class UnsupportedProtocol(InvalidParams):
    """-32602 for ``auth``: its ``protocol`` is no ``"MAJOR.MINOR"`` of a major this side
    speaks; ``data`` is ``{"field": "protocol", "supported": [...]}`` (followed by close 4426)."""


class RemoteError(BridgeError):
    """The peer answered one of our requests with a JSON-RPC error object.

    ``code`` (int), ``message`` (str) and ``data`` (any JSON value or None) are the peer's.
    """

    def __init__(self, code: int, message: str, data: Any = None):
        self.code = code  # the peer's error code
        self.message = message  # the peer's message
        self.data = data  # the peer's optional detail
        super().__init__(f"{code}: {message}")


class RequestTimeout(BridgeError, TimeoutError):
    """No response to our request within its timeout (seconds); a late answer is ignored."""


class AnswerTooLarge(BridgeError):
    """The peer's answer to our request was a frame larger than the bridge's ``max_frame``: the
    bridge does not take it (docs/decisions.md "Oversized frames"), and the request fails at once
    instead of waiting its timeout.  ``size`` and ``cap`` are bytes.  Ask for less (one by one)."""

    def __init__(self, size: int, cap: int, request: str = "a request"):
        self.size = size  # bytes of the refused answer frame
        self.cap = cap  # the bridge's max_frame, bytes
        self.request = request  # what was asked ("<method> (id N)")
        super().__init__(f"the answer to {request} was {size} bytes, over the {cap} bytes frame cap")


class NotConnected(BridgeError, ConnectionError):
    """There is no authenticated peer, or the connection closed while our request was pending."""


def error_text(exc: BaseException) -> str:
    """The human message of ``exc`` for a JSON-RPC error.  ``str(KeyError(msg))`` is
    ``repr(msg)`` — quoted, with escapes — so a KeyError carrying one message gives that message
    as it is; stripping the repr's quotes instead also ate the message's own closing quote."""
    if isinstance(exc, KeyError) and len(exc.args) == 1 and isinstance(exc.args[0], str):
        return exc.args[0]
    return str(exc)


@runtime_checkable
class ErrorObject(Protocol):
    """An exception that knows the JSON-RPC error answering the request it ended (module rules)."""

    def error_object(self) -> tuple[int, str, Any]:
        """``(code, message, data)``: the error object's fields (``data`` None: omitted)."""
        ...


# an error object's code → the standard class a caller catches it as (``except InvalidParams``)
_STANDARD: dict[int, type[_FixedCode]] = {
    c.code: c for c in (MethodNotFound, InvalidParams, InternalError, ShuttingDown, CutShort)}


def as_rpc_error(exc: BaseException) -> RpcError | None:
    """The :class:`RpcError` answering a request that ``exc`` ended: an RpcError as it is, an
    :class:`ErrorObject`'s own error object (as :class:`InvalidParams`, :class:`InternalError`,
    :class:`MethodNotFound`, :class:`ShuttingDown` or :class:`CutShort` for their codes), else None (the caller answers -32603)."""
    if isinstance(exc, RpcError):
        return exc
    if not isinstance(exc, ErrorObject):
        return None
    code, message, data = exc.error_object()
    fixed = _STANDARD.get(code)
    return fixed(message, data) if fixed is not None else RpcError(code, message, data)
