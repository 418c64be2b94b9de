"""JSON-RPC 2.0 envelopes: msgspec Structs, one encoder and one decoder built at import.

Rules / theory of operation
---------------------------
* A frame is one JSON object (text).  :func:`decode` turns it into exactly one of four typed
  messages, or raises an :class:`~bridge.errors.RpcError` — never anything else, whatever the
  input (bytes that are not UTF-8, non-object JSON, numbers out of range, wrong member types,
  absurd nesting):

  ==================  ==========================================  =======================
  message             members                                     meaning
  ==================  ==========================================  =======================
  :class:`Request`    ``id``, ``method``, ``params``?             answer me
  :class:`Notification` ``method``, ``params``?                   no answer
  :class:`Response`   ``id``, ``result``                          answers our request
  :class:`ErrorResponse` ``id``, ``error {code, message, data?}``  answers our request
  ==================  ==========================================  =======================

* Errors: not JSON → :class:`ParseError` (-32700); JSON but not one of the above (array/batch,
  scalar, ``jsonrpc`` not ``"2.0"``, ``method`` not a string, ``params`` neither object nor array,
  ``id`` neither string, 64-bit integer nor null, both or neither of ``result``/``error`` ...) →
  :class:`InvalidRequest` (-32600).  The error carries the frame's ``id`` when it could be read,
  so the answer can be correlated; otherwise ``id`` is ``None`` (sent as ``null``).  A string
  escape ``\\ud800``–``\\udfff`` without its pair is JSON text msgspec cannot take: with the
  frame's id, an :class:`~bridge.errors.InvalidParams` whose ``data.field`` names the member of
  ``params`` as a method's -32602 does (``tu``, ``events[0].data``), or an :class:`InvalidRequest`
  naming the envelope's member (``method``) — not a -32700 "truncated" with id null (brk33).
* Batches are not supported (the bridge never needs them): an array is an ``InvalidRequest``.
* Unknown members are ignored (DESIGN §4).  Absent ``params`` decodes as :data:`msgspec.UNSET`.
* ``decode(frame, raw_params=True)`` leaves a call's ``params`` undecoded, as a
  :class:`msgspec.Raw` slice of the frame (still checked to be an object or array, with the same
  error), so the receiver decodes them **once**, straight into the method's own type (msgspec's
  "decode the envelope with ``Raw``, then the payload" pattern; :mod:`sidecar.protocol.methods`).
* ``id`` may be ``null`` in a request (JSON-RPC discourages it but allows it); the answer then
  carries ``"id": null`` too.
* Encoding: ``params`` / ``result`` may be anything msgspec encodes (Structs, dicts, lists,
  scalars, None).  Encoders raise ``TypeError`` for values msgspec cannot encode; the caller
  decides what that means (the server answers -32603).
"""
from __future__ import annotations

import json
import re
from typing import Annotated, Any, Literal, Union, Final

import msgspec
from msgspec import UNSET, UnsetType

from .errors import InvalidParams, InvalidRequest, ParseError, RpcError

__all__ = [
    "Request",
    "Notification",
    "Response",
    "ErrorResponse",
    "ErrorObject",
    "Message",
    "decode",
    "encode",
    "encode_request",
    "encode_notification",
    "encode_result",
    "encode_error",
    "request_id_of",
    "head_of",
    "JSONRPC",
]

JSONRPC: Final = "2.0"  # the only protocol version accepted and sent

# An id is a string, a signed 64-bit integer, or null (larger integers could not round-trip
# through every peer's JSON library, so they are refused as InvalidRequest).
_Int64 = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]
Id = Union[_Int64, str, None]


class ErrorObject(msgspec.Struct, kw_only=True):
    """The ``error`` member of an error response."""

    code: int  # JSON-RPC error code
    message: str  # one-line description
    data: Any = UNSET  # optional detail; omitted on the wire when UNSET


class Request(msgspec.Struct, kw_only=True):
    """A call that expects an answer with the same ``id``."""

    jsonrpc: Literal["2.0"] = JSONRPC  # protocol tag, always "2.0"
    id: Id  # correlation id chosen by the sender
    method: str  # method name, e.g. "session.login"
    params: Any = UNSET  # object or array; UNSET = absent on the wire


class Notification(msgspec.Struct, kw_only=True):
    """A call without ``id``: no answer, not even an error."""

    jsonrpc: Literal["2.0"] = JSONRPC  # protocol tag
    method: str  # method name, e.g. "task.created"
    params: Any = UNSET  # object or array; UNSET = absent on the wire


class Response(msgspec.Struct, kw_only=True):
    """A successful answer to the request with the same ``id``."""

    jsonrpc: Literal["2.0"] = JSONRPC  # protocol tag
    id: Id  # the request's id
    result: Any  # any JSON value (``null`` included)


class ErrorResponse(msgspec.Struct, kw_only=True):
    """A failed answer to the request with the same ``id`` (``null`` when it was unreadable)."""

    jsonrpc: Literal["2.0"] = JSONRPC  # protocol tag
    id: Id  # the request's id, or None
    error: ErrorObject  # what went wrong


Message = Union[Request, Notification, Response, ErrorResponse]


class _Envelope(msgspec.Struct):
    """Every member any message may have, all optional; :func:`decode` classifies it."""

    jsonrpc: Union[str, UnsetType] = UNSET  # must be "2.0"
    id: Union[Id, UnsetType] = UNSET  # present (maybe null) on requests and responses
    method: Union[str, UnsetType] = UNSET  # present on requests and notifications
    params: Union[dict, list, UnsetType] = UNSET  # by-name or by-position arguments
    result: Any = UNSET  # present on success responses (None = JSON null, still present)
    error: Union[ErrorObject, UnsetType] = UNSET  # present on error responses


class _RawEnvelope(msgspec.Struct):
    """:class:`_Envelope` with ``params`` kept as the frame's undecoded bytes."""

    jsonrpc: Union[str, UnsetType] = UNSET
    id: Union[Id, UnsetType] = UNSET
    method: Union[str, UnsetType] = UNSET
    params: Union[msgspec.Raw, UnsetType] = UNSET  # checked to be an object or array
    result: Any = UNSET
    error: Union[ErrorObject, UnsetType] = UNSET


class _Head(msgspec.Struct):
    """What an oversized frame is, without decoding its payload (:func:`head_of`)."""

    id: Any = None
    method: Any = UNSET
    result: Union[msgspec.Raw, UnsetType] = UNSET
    error: Union[msgspec.Raw, UnsetType] = UNSET


class _IdOnly(msgspec.Struct):
    """Just the ``id`` member; other members are skipped unvalidated (error path only)."""

    id: Any = None  # whatever JSON value the frame's id is


_decoder = msgspec.json.Decoder(_Envelope)  # the one typed decoder
_raw_decoder = msgspec.json.Decoder(_RawEnvelope)  # the same, params left as Raw
_head_decoder = msgspec.json.Decoder(_Head)  # an oversized frame's kind and id, payload skipped
_id_decoder = msgspec.json.Decoder(_IdOnly)  # salvages an id from a frame that failed validation
_encoder = msgspec.json.Encoder()  # the one encoder


def decode(frame: bytes | bytearray | memoryview | str, *, raw_params: bool = False) -> Message:
    """Decode one frame (bytes in UTF-8, or str) into a typed message.

    ``raw_params``: a call's ``params`` stay a :class:`msgspec.Raw` (see the module rules).
    Raises :class:`ParseError`, :class:`InvalidRequest` or (an unpaired surrogate in ``params``)
    :class:`~bridge.errors.InvalidParams`, with ``.id`` set when readable; nothing else, for any input.
    """
    env: _Envelope | _RawEnvelope
    try:
        if raw_params:
            env = _decode_raw(frame)
        else:
            env = _decoder.decode(frame)
    except msgspec.ValidationError as exc:
        raise InvalidRequest(_describe(exc), id=_salvage_id(frame)) from None
    except msgspec.DecodeError as exc:
        raise _unpaired_surrogate(frame) or ParseError(f"parse error: {exc}") from None
    except RecursionError:
        raise ParseError("parse error: nested too deeply") from None
    except (UnicodeError, TypeError, ValueError):
        # A str with lone surrogates, or not text at all.  The message must not quote the
        # input: it is sent back, and a lone surrogate cannot be encoded.
        raise ParseError("parse error: not UTF-8 JSON text") from None
    return _classify(env)


def _decode_raw(frame: bytes | bytearray | memoryview | str) -> _RawEnvelope:
    """:data:`_raw_decoder`, refusing exactly what the typed decoder refuses, with its error:
    on the error path the typed decoder runs again just to raise (params that are not an object
    or array; the first bad member in frame order)."""
    try:
        env = _raw_decoder.decode(frame)
    except msgspec.ValidationError:
        _decoder.decode(frame)
        raise  # the typed decoder accepts it: keep the raw error (not expected: Raw is laxer)
    if isinstance(env.params, msgspec.Raw) and bytes(memoryview(env.params)[:1]) not in b"{[":
        _decoder.decode(frame)  # a scalar: raises
    return env


def _classify(env: _Envelope | _RawEnvelope) -> Message:
    """Map a decoded envelope onto one message type (rules in the module header)."""
    msg_id = None if env.id is UNSET else env.id
    if env.jsonrpc != JSONRPC:
        raise InvalidRequest('"jsonrpc" must be "2.0"', id=msg_id)
    if env.method is not UNSET:
        if env.id is UNSET:
            return Notification(method=env.method, params=env.params)
        return Request(id=env.id, method=env.method, params=env.params)
    if env.id is UNSET:
        raise InvalidRequest('neither a call ("method") nor an answer ("id")')
    has_result = env.result is not UNSET
    has_error = env.error is not UNSET
    if has_result == has_error:
        raise InvalidRequest('an answer needs exactly one of "result" and "error"', id=msg_id)
    if has_error:
        assert isinstance(env.error, ErrorObject)  # has_error: not UNSET
        return ErrorResponse(id=env.id, error=env.error)
    return Response(id=env.id, result=env.result)


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")  # \ud800 … \udfff written as an escape


def _unpaired_surrogate(frame: bytes | bytearray | memoryview | str) -> RpcError | None:
    """The error for a frame that is JSON text but holds a ``\\uD800``–``\\uDFFF`` escape without
    its pair — msgspec refuses it as if the input were truncated (a -32700 with ``id`` null: the
    caller never got its answer, brk33) — naming the first such string's member, with the
    frame's id; None for any other parse error (the stdlib reads the frame only on this path)."""
    try:
        text = frame if isinstance(frame, str) else bytes(frame).decode("utf-8")
        if not _SURROGATE_ESCAPE.search(text):
            return None
        value = json.loads(text)
    except (ValueError, RecursionError):  # UnicodeDecodeError included: not UTF-8 is -32700
        return None
    path = _surrogate_at(value, "")
    if path is None:
        return None
    msg_id = value.get("id") if isinstance(value, dict) else None
    if not (isinstance(msg_id, str) and _surrogate_at(msg_id, "") is None
            or type(msg_id) is int and -(2**63) <= msg_id < 2**63):
        msg_id = None
    path = path.encode("utf-8", "backslashreplace").decode("utf-8")  # no surrogate is sent back
    problem = "a string holds an unpaired UTF-16 surrogate (\\ud800-\\udfff)"
    if path == ".params" or path.startswith((".params.", ".params[")):
        field = path.removeprefix(".params").lstrip(".") or "params"  # as a method's -32602 names it
        return InvalidParams(f"{problem} at `$.{field}` of params", {"field": field}, id=msg_id)
    field = path.lstrip(".") or "(a member name)"
    return InvalidRequest(f"{problem} at `$.{field}`", {"field": field}, id=msg_id)


def _surrogate_at(value: Any, path: str) -> str | None:
    """The path (``.params.a[1]``) of the first string in ``value`` holding a lone surrogate;
    a bad key is reported as the object holding it.  None when there is none."""
    if isinstance(value, str):
        return path if any("\ud800" <= c <= "\udfff" for c in value) else None
    if isinstance(value, dict):
        for k, v in value.items():
            if _surrogate_at(k, path) is not None:
                return path
            found = _surrogate_at(v, f"{path}.{k}")
            if found is not None:
                return found
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found = _surrogate_at(v, f"{path}[{i}]")
            if found is not None:
                return found
    return None


def _salvage_id(frame: Any) -> Any:
    """The frame's ``id`` if it is an object with a valid id member, else None."""
    try:
        value = _id_decoder.decode(frame).id
    except Exception:  # noqa: BLE001 — best effort only, the caller raises anyway
        return None
    if isinstance(value, str) or (type(value) is int and -(2**63) <= value < 2**63):
        return value
    return None


def _describe(exc: msgspec.ValidationError) -> str:
    """A short InvalidRequest message from msgspec's validation message."""
    text = str(exc)
    if text.startswith("Expected `object`"):
        return "a frame must be one JSON object (batches are not supported): " + text
    return "invalid envelope: " + text


# ---- encoding --------------------------------------------------------------------------------


def encode(message: Message) -> bytes:
    """Encode a message Struct to UTF-8 JSON bytes (raises TypeError for unencodable values)."""
    return _encoder.encode(message)


def encode_request(id: Any, method: str, params: Any = UNSET) -> bytes:
    """``{"jsonrpc":"2.0","id":id,"method":method,"params":params}``; params omitted if UNSET."""
    return _encoder.encode(Request(id=id, method=method, params=params))


def encode_notification(method: str, params: Any = UNSET) -> bytes:
    """``{"jsonrpc":"2.0","method":method,"params":params}``; params omitted if UNSET."""
    return _encoder.encode(Notification(method=method, params=params))


def encode_result(id: Any, result: Any) -> bytes:
    """``{"jsonrpc":"2.0","id":id,"result":result}`` — ``None`` becomes ``"result": null``."""
    return _encoder.encode(Response(id=id, result=result))


def encode_error(id: Any, error: RpcError | ErrorObject) -> bytes:
    """``{"jsonrpc":"2.0","id":id,"error":{...}}``; ``data`` omitted when None/UNSET."""
    if isinstance(error, RpcError):
        data = UNSET if error.data is None else error.data
        error = ErrorObject(code=error.code, message=error.message, data=data)
    return _encoder.encode(ErrorResponse(id=id, error=error))


def request_id_of(raw: bytes) -> Any:
    """The ``id`` of a request frame, so that its error answer can be correlated; None for a
    notification, a response or a frame that does not decode."""
    try:
        msg = decode(raw)
    except RpcError as exc:
        return exc.id
    return msg.id if type(msg) is Request else None


def head_of(raw: bytes) -> tuple[bool, Any]:
    """``(is_answer, id)`` of a frame the bridge will not take whole (over its cap): an answer
    (``result`` or ``error``, no ``method``) fails the request it answers; a request's error
    answer carries its id.  Payloads are skipped, not decoded.  ``(False, None)`` for anything
    that does not read as an object with such members."""
    try:
        head = _head_decoder.decode(raw)
    except Exception:  # noqa: BLE001 — best effort: the frame is refused either way
        return False, None
    msg_id = head.id if isinstance(head.id, str) or type(head.id) is int else None
    if head.method is UNSET and (head.result is not UNSET or head.error is not UNSET):
        return True, msg_id
    return False, msg_id if isinstance(head.method, str) else None
