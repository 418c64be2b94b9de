"""The bridge: the local websocket between Electron and the sidecar (DESIGN §3-§4).

JSON-RPC 2.0 over websocket text frames, token auth on the first frame, Origin/Host checks,
request/response correlation in both directions, one ordered worker for inbound calls, and a
resumable, acknowledged outbound notification stream.  It knows nothing of tasks: it deals in
method names and JSON params.  See ``docs/architecture.md`` ("Bridge API").

Modules: ``errors`` (exception tree, codes), ``jsonrpc`` (envelope codec), ``stream`` (resumable
stream, sans-I/O), ``auth`` (handshake and token rules, sans-I/O), ``server`` (BridgeServer:
accept, read, close), ``worker`` (its one ordered worker), ``client`` (BridgeClient),
``lifecycle`` (wait_for_shutdown).

``BridgeClient`` is imported on first use: the sidecar serves and never dials, and the
websockets client side is ~8 ms of its start.
"""
from typing import TYPE_CHECKING, Any

from .errors import (
    CLOSE_AUTH_TIMEOUT,
    CLOSE_FORBIDDEN_ORIGIN,
    CLOSE_GOING_AWAY,
    CLOSE_REPLACED,
    CLOSE_TOO_BIG,
    CLOSE_UNAUTHORIZED,
    AnswerTooLarge,
    BridgeError,
    CutShort,
    InternalError,
    InvalidParams,
    InvalidRequest,
    MethodNotFound,
    NotConnected,
    ParseError,
    RemoteError,
    RequestTimeout,
    RpcError,
    ShuttingDown,
    Unauthorized,
)
from .lifecycle import wait_for_shutdown
from .server import PROTOCOL, BridgeServer
from .stream import OutboundStream
from .worker import Handler

if TYPE_CHECKING:
    from .client import BridgeClient


def __getattr__(name: str) -> Any:
    if name == "BridgeClient":
        from .client import BridgeClient
        return BridgeClient
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = [
    "BridgeServer",
    "BridgeClient",
    "Handler",
    "PROTOCOL",
    "OutboundStream",
    "wait_for_shutdown",
    "BridgeError",
    "AnswerTooLarge",
    "RpcError",
    "ParseError",
    "InvalidRequest",
    "MethodNotFound",
    "InvalidParams",
    "InternalError",
    "ShuttingDown",
    "CutShort",
    "Unauthorized",
    "RemoteError",
    "RequestTimeout",
    "NotConnected",
    "CLOSE_GOING_AWAY",
    "CLOSE_TOO_BIG",
    "CLOSE_UNAUTHORIZED",
    "CLOSE_FORBIDDEN_ORIGIN",
    "CLOSE_AUTH_TIMEOUT",
    "CLOSE_REPLACED",
]
