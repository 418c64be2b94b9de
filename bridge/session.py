"""One authenticated connection on the server side: send order, writer task, pending requests.

Rules / theory of operation
---------------------------
* A :class:`Session` exists from a successful ``auth`` until the connection ends or a newer
  client replaces it.  It owns a :class:`~bridge.stream.Delivery` (this connection's position in
  the shared outbound stream plus its own responses/requests) and ONE writer task that sends
  whatever the delivery hands out, in that order, awaiting websockets' flow control between
  frames.  Nothing else writes to the socket after auth, so frames never interleave.
* ``pending`` maps the ids of the server's own requests on this connection to futures; the
  server's reader resolves them, :meth:`Session.shutdown` fails the rest with
  :class:`~bridge.errors.NotConnected` (a request never outlives its connection).
* After :meth:`Session.shutdown` the session is inert: :meth:`Session.send` drops frames (answers
  to frames of a replaced connection have nowhere to go).
* :meth:`Session.tell` sends a notification OUTSIDE the stream (no ``seq``, never kept nor
  replayed: the ``log`` records, :mod:`sidecar.app.log_feed`), best effort: it is dropped —
  ``False`` — once the session is closed or while ``room`` bytes already wait for the writer, so
  a client that does not read loses these, never its answers, and is never cut off for them.
* :meth:`Session.on_shutdown` runs a callback once, when the session ends (closed or replaced):
  what was bound to this connection (a log subscription) ends with it.
* :meth:`Session.flush` waits (bounded) until the writer has handed every frame queued so far to
  the socket — how a closing server makes sure its last answers leave before the close frame.
* Draining: websockets stops reading the socket while received frames are not consumed, so a
  connection that is being closed must still be read (:func:`drain`), or the peer's close frame
  is never seen and the closing handshake waits its whole timeout.
* :func:`within` is the closing server's bounded wait (never ``asyncio.wait_for``, which on 3.11
  can swallow the caller's own cancellation).
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

import msgspec
from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed

from . import jsonrpc
from .auth import Hello
from .errors import (CLOSE_UNAUTHORIZED, CLOSE_UNSUPPORTED_PROTOCOL, AnswerTooLarge, InternalError, InvalidParams,
                     InvalidRequest, NotConnected, RpcError, Unauthorized)
from .stream import Delivery, OutboundStream, SeqBeyond

__all__ = ["Session", "drain", "close_and_drain", "close_or_abort", "within"]

log = logging.getLogger("bridge.server")


class _Ack(msgspec.Struct):
    """``stream.ack``'s params: ``seq`` bounded to SQLite's / msgspec's int64."""

    seq: Annotated[int, msgspec.Meta(ge=0, le=2**63 - 1)]


_ack_decoder = msgspec.json.Decoder(_Ack)


def _ack_of(params: Any) -> int:
    """The acked seq of ``params`` (Raw from a raw-params server, else decoded JSON; absent =
    ``{}``); raises msgspec's ValidationError / DecodeError, or RecursionError."""
    if isinstance(params, msgspec.Raw):
        return _ack_decoder.decode(params).seq
    return msgspec.convert({} if params is msgspec.UNSET else params, _Ack).seq


class Session:
    """One authenticated connection: its send order, writer task and outstanding requests."""

    def __init__(self, ws: ServerConnection, stream: OutboundStream, hello: Hello,
                 control_limit: int = 32 << 20):
        self.ws = ws  # the websocket
        self._ack_beyond_logged = False  # an ack beyond the last seq was logged (once per connection)
        self.hello = hello  # the client's auth params (client name, version; token unused)
        self.stream = stream  # the shared outbound stream (stream.ack releases it)
        self.delivery = Delivery(stream)  # what to send next, in order
        self.pending: dict[int, asyncio.Future] = {}  # our request id -> future of its answer
        self.closed = False  # set once the connection is done (closed or replaced)
        self._wake = asyncio.Event()  # set when the delivery may have something to send
        self._sent_all = asyncio.Event()  # set while the writer has nothing left to send
        self._writer: asyncio.Task | None = None  # the writer task
        # bytes of answers that may wait for a client that does not read: past this the client
        # is cut off (it may reconnect and resume) instead of the sidecar buffering without bound
        self.control_limit = control_limit
        self._cutoff: asyncio.Task | None = None  # the close of a client that stopped reading
        self._ended: list[Callable[[], None]] | None = []  # on_shutdown callbacks; None once run

    def start(self) -> None:
        """Start the writer task."""
        self._writer = asyncio.create_task(self._write_loop(), name="bridge-writer")

    def send(self, data: bytes, *, first: bool = False) -> None:
        """Queue an encoded control frame (dropped silently once the session is closed)."""
        if self.closed:
            return
        self.delivery.push(data, first=first)
        self._sent_all.clear()
        self._wake.set()
        if self.delivery.control_bytes > self.control_limit and self._cutoff is None:
            log.warning("bridge client is not reading its answers (%d bytes waiting): closing 1008",
                        self.delivery.control_bytes)
            self.closed = True
            # a plain close, not close_and_drain: the server's reader is still in ws.recv() and
            # drains the socket itself; a second recv() raised websockets' ConcurrencyError
            self._cutoff = asyncio.create_task(close_or_abort(self.ws, 1008, "not reading answers"))

    def tell(self, method: str, params: Any, room: int) -> bool:
        """Queue a notification outside the stream (module rules): ``params`` a Struct or a
        mapping (TypeError if not encodable); ``room``: bytes of frames that may already wait
        for the writer.  False, nothing queued, when the session is closed or that full."""
        if self.closed or self.delivery.control_bytes >= room:
            return False
        self.send(jsonrpc.encode_notification(method, params))
        return True

    def on_shutdown(self, fn: Callable[[], None]) -> None:
        """Call ``fn()`` once when this session ends (at once if it has ended)."""
        if self._ended is None:
            fn()
        else:
            self._ended.append(fn)

    def refuse_oversized(self, raw: bytes, cap: int) -> None:
        """A frame over the ``cap`` bytes (:mod:`bridge.server` rules): the client gets -32600
        naming the cap (with a request's id, else null); an answer to one of our pending requests
        also fails that request at once with :class:`AnswerTooLarge` — else it waited its whole
        timeout (breaker 16 F2)."""
        is_answer, msg_id = jsonrpc.head_of(raw)
        if is_answer:
            future = self.pending.get(msg_id)
            if future is not None and not future.done():
                future.set_exception(AnswerTooLarge(len(raw), cap))
        self.send(jsonrpc.encode_error(None if is_answer else msg_id, InvalidRequest(
            f"frame of {len(raw)} bytes exceeds the {cap} bytes cap; nothing of it was handled"
            f" (send smaller frames)")))

    def on_ack(self, msg: Any) -> None:  # a Request or a Notification
        """``stream.ack {seq}``: release the stream up to seq; answer ``{"ok": true}`` if asked.
        ``seq`` is decoded into :class:`_Ack` (an int64 >= 0): anything else — a 5,000-digit
        integer once closed the connection with 1011 — is a -32602 naming
        ``seq`` to a request, a logged warning for a notification, and releases nothing.  So is a
        ``seq`` beyond the last issued (:class:`~bridge.stream.SeqBeyond`; a notification's logged
        once per connection); an old one (below the acked) is harmless: ``{"ok": true}``."""
        is_request = type(msg) is jsonrpc.Request
        try:
            seq = _ack_of(msg.params)
        except (msgspec.ValidationError, msgspec.DecodeError, RecursionError) as exc:
            text = str(exc) if not isinstance(exc, RecursionError) else "nested too deeply"
            if is_request:
                self.send(jsonrpc.encode_error(msg.id, InvalidParams(
                    f"stream.ack takes {{seq: int 0..2^63-1}}: {text}",
                    data={"field": "seq" if "seq" in text else "params"})))
            else:
                log.warning("ignored malformed stream.ack: %s", text)
            return
        try:
            self.stream.ack(seq)
        except SeqBeyond as exc:
            if is_request:
                self.send(jsonrpc.encode_error(msg.id, InvalidParams(f"stream.ack: {exc}", data={"field": "seq"})))
            elif not self._ack_beyond_logged:  # a client acking wrong acks wrong often: one line
                self._ack_beyond_logged = True
                log.warning("ignored stream.ack: %s (further ones of this connection are not logged)", exc)
            return
        if is_request:
            self.send(jsonrpc.encode_result(msg.id, {"ok": True}))

    def fail_frame(self, raw: bytes, exc: Exception) -> None:
        """A frame whose decode or dispatch raised something unexpected (a codec bug, whatever
        its class): logged, and a request readable enough to have an id is answered -32603 —
        the reader reads on; one frame never ends the connection."""
        log.error("frame not handled: %s: %s", type(exc).__name__, exc, exc_info=exc)
        is_answer, msg_id = jsonrpc.head_of(raw)
        if not is_answer and msg_id is not None:
            self.send(jsonrpc.encode_error(msg_id, InternalError(
                f"the frame could not be handled ({type(exc).__name__}); nothing of it was done")))

    def wake(self) -> None:
        """The stream grew: let the writer look."""
        self._sent_all.clear()
        self._wake.set()

    async def flush(self, timeout_s: float) -> bool:
        """Wait at most ``timeout_s`` seconds until every frame queued so far was handed to the
        socket (in order: a close frame sent after this follows them); False if the writer did
        not get there (a client that does not read) or the session is closed."""
        if self.closed or self._writer is None or self._writer.done():
            return False
        try:
            async with asyncio.timeout(max(0.0, timeout_s)):
                await self._sent_all.wait()
        except TimeoutError:
            return False
        return True

    async def _write_loop(self) -> None:
        delivery, wake, ws = self.delivery, self._wake, self.ws
        try:
            while True:
                data = delivery.next()
                if data is None:
                    wake.clear()
                    self._sent_all.set()
                    await wake.wait()
                    continue
                await ws.send(data, text=True)
        except ConnectionClosed:
            pass
        except Exception:  # noqa: BLE001 — a writer bug must not go unnoticed nor hang the client
            log.exception("bridge writer failed; closing the connection")
            await ws.close(1011, "internal error")

    def shutdown(self) -> None:
        """Mark closed, stop the writer, fail every pending request with NotConnected."""
        self.closed = True
        if self._writer is not None:
            self._writer.cancel()
        pending, self.pending = self.pending, {}
        for future in pending.values():
            if not future.done():
                future.set_exception(NotConnected("the connection closed before the answer"))
        ended, self._ended = self._ended or [], None
        for fn in ended:
            try:
                fn()
            except Exception:  # noqa: BLE001 — one callback's bug must not keep the others from running
                log.exception("a callback on the end of a connection raised")


async def drain(ws: ServerConnection) -> int:
    """Read and discard frames until the connection is closed; return how many (see header)."""
    discarded = 0
    try:
        while True:
            await ws.recv(decode=False)
            discarded += 1
    except ConnectionClosed:
        return discarded


async def close_or_abort(ws: ServerConnection, code: int, reason: str, timeout_s: float = 2.0) -> None:
    """Close with ``code``/``reason``; a peer that does not read cannot even take the close frame
    (the send waits for buffer room forever), so after ``timeout_s`` the TCP connection is
    aborted.  The server's reader sees the end either way."""
    try:
        async with asyncio.timeout(timeout_s):
            await ws.close(code, reason)
    except TimeoutError:
        log.warning("client did not take the close frame in %.1f s: dropping the connection", timeout_s)
        ws.transport.abort()


async def close_and_drain(ws: ServerConnection, code: int, reason: str) -> None:
    """Close with ``code``/``reason`` while draining whatever the peer still sends."""
    reader = asyncio.create_task(drain(ws))
    try:
        await ws.close(code, reason)
    finally:
        reader.cancel()
        await asyncio.gather(reader, return_exceptions=True)


async def refuse_auth(ws: ServerConnection, exc: RpcError, msg_id: Any) -> None:
    """Answer a refused first frame (``exc``: :class:`Unauthorized` or
    :class:`~bridge.errors.UnsupportedProtocol`) and close with 4401 or 4426."""
    log.warning("refused client %s: %s", ws.remote_address, exc.message)
    await ws.send(jsonrpc.encode_error(msg_id if exc.id is None else exc.id, exc), text=True)
    if isinstance(exc, Unauthorized):
        await close_and_drain(ws, CLOSE_UNAUTHORIZED, "unauthorized")
    else:
        await close_and_drain(ws, CLOSE_UNSUPPORTED_PROTOCOL, "unsupported protocol")


async def within(aw: Awaitable[Any], timeout_s: float) -> bool:
    """Await ``aw`` at most ``timeout_s`` seconds; False (and ``aw`` cancelled, not awaited)
    on timeout.  Never ``asyncio.wait_for``: on 3.11 it can swallow our own cancellation."""
    task = asyncio.ensure_future(aw)
    done, _ = await asyncio.wait({task}, timeout=max(0.0, timeout_s))
    if not done:
        task.cancel()
        return False
    if not task.cancelled():
        task.exception()  # retrieved: gather(return_exceptions=True) / waits do not raise
    return True
