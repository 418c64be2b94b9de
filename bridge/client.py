"""BridgeClient: Electron's end of the bridge, for the stub harness, tests and benchmarks.

Rules / theory of operation
---------------------------
* :meth:`BridgeClient.connect` opens ``ws://127.0.0.1:{port}/`` (optionally with an ``Origin``
  header, to test the server's refusal), starts the reader, and sends ``auth`` as the first frame.
  It returns once the server accepted; a refusal raises :class:`RemoteError` (code -32001), a
  refused handshake raises websockets' ``InvalidStatus`` (HTTP 403).
* One **reader** task decodes every frame (one msgspec decoder, built at import):

  - answers resolve the future of :meth:`call` with the same id;
  - notifications go to ``on_notification(method, params)`` strictly in arrival order (if it
    returns an awaitable, the reader awaits it before reading on — keep it quick).  A ``seq`` in
    params is tracked; frames with ``seq <= seen_seq`` (already seen on an earlier connection)
    are not delivered again.  The highest seq is acknowledged with a ``stream.ack`` notification
    (batched): as soon as it is ``ack_every`` ahead of the last ack, else ``ack_delay`` seconds
    after the first unacked frame; :meth:`ack` acknowledges now and waits for ``{"ok": true}``;
  - requests (``platform.request``) each run in their own task, so a slow answer never blocks
    reading: ``await on_request(method, params)`` → ``result``; raising :class:`RemoteError` or
    :class:`RpcError` answers with that error object; anything else answers -32603; no
    ``on_request`` answers -32601.
* Sends go straight to the websocket (a frame is written whole by the call that sends it, so the
  order of frames is the order of the calls).
* When the connection ends, pending calls fail with :class:`NotConnected`; ``close_code`` and
  ``close_reason`` tell why (e.g. 4409 when a newer client replaced this one).
"""
from __future__ import annotations

import asyncio
import inspect
import itertools
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from msgspec import UNSET
from websockets.asyncio.client import ClientConnection, connect as ws_connect
from websockets.exceptions import ConnectionClosed
from websockets.typing import Origin

# seconds for the opening handshake and for the auth answer, unless the caller says (websockets'
# own default).  A caller on a machine whose load it does not control waits longer: the harness
# (``electron_stub.machine.HARNESS_WAIT_S``) and the test suite (``tests/waits.py``).
OPEN_TIMEOUT_S = 10.0

from . import jsonrpc
from .errors import InternalError, MethodNotFound, NotConnected, RemoteError, RequestTimeout, RpcError

__all__ = ["BridgeClient", "NotificationCallback", "RequestCallback"]

log = logging.getLogger("bridge.client")

NotificationCallback = Callable[[str, Any], Any]  # (method, params) -> None | awaitable
RequestCallback = Callable[[str, Any], Awaitable[Any]]  # async (method, params) -> result


class BridgeClient:
    """A connected, authenticated client.  Build it with :meth:`connect`."""

    def __init__(
        self,
        ws: ClientConnection,
        *,
        on_notification: NotificationCallback | None,
        on_request: RequestCallback | None,
        seen_seq: int,
        ack_every: int,
        ack_delay: float,
    ):
        self._ws = ws  # the websocket
        self._on_notification = on_notification  # notification callback (or None: dropped)
        self._on_request = on_request  # request callback (or None: -32601)
        self._ack_every = ack_every  # ack after this many unacked seq'd frames
        self._ack_delay = ack_delay  # seconds of quiet after which the highest seq is acked
        self.last_seq = seen_seq  # highest stream seq seen (delivered or skipped)
        self.acked_seq = seen_seq  # highest seq we sent a stream.ack for
        self.hello: dict | None = None  # the server's auth answer {"ok", "protocol", "last_seq", "stream_id"}
        self.stream_id: str | None = None  # the server stream our seq numbers refer to
        self.restarted = False  # the server is a new process: re-read state (tasks.list)
        self._auth_id: Any = None  # id of our auth call, answered first
        self._ids = itertools.count(1)  # ids of our calls
        self._pending: dict[Any, asyncio.Future] = {}  # call id -> future of its answer
        self._tasks: set[asyncio.Task] = set()  # request-answering and ack tasks in flight
        self._ack_timer: asyncio.TimerHandle | None = None  # pending quiet-time ack
        self._closed = asyncio.get_running_loop().create_future()  # resolves when reading ends
        self._reader = asyncio.create_task(self._read(), name="bridge-client-reader")  # reader

    @classmethod
    async def connect(
        cls,
        port: int,
        token: str,
        *,
        host: str = "127.0.0.1",
        origin: str | None = None,
        client: str = "harness",
        version: str = "",
        on_notification: NotificationCallback | None = None,
        on_request: RequestCallback | None = None,
        seen_seq: int = 0,
        stream_id: str | None = None,
        ack_every: int = 64,
        ack_delay: float = 0.05,
        max_frame: int = 1 << 20,
        open_timeout: float | None = None,
        tap: Callable[[str, str | bytes], None] | None = None,
    ) -> BridgeClient:
        """Connect and authenticate; return the client (see the module header for errors).
        ``tap(direction, frame)``: called with every frame sent (``"to_sidecar"``) and received
        (``"to_electron"``), the auth included — the harness captures a session's frames with it
        to validate them against ``sidecar schema``.  ``open_timeout``: seconds for the opening
        handshake and again for the ``auth`` answer (None: :data:`OPEN_TIMEOUT_S`)."""
        if open_timeout is None:
            open_timeout = OPEN_TIMEOUT_S
        ws = await ws_connect(
            f"ws://{host}:{port}/",
            origin=None if origin is None else Origin(origin),
            compression=None,
            max_size=max_frame,
            proxy=None,
            open_timeout=open_timeout,
        )
        if tap is not None:
            _tap(ws, tap)
        self = cls(ws, on_notification=on_notification, on_request=on_request,
                   seen_seq=seen_seq, ack_every=ack_every, ack_delay=ack_delay)
        self.stream_id = stream_id
        self._auth_id = 1  # auth is the first call of every connection (ids count from 1)
        try:
            self.hello = await self.call(
                "auth", {"token": token, "client": client, "version": version}, timeout=open_timeout
            )
        except BaseException:
            await self.close()
            raise
        return self

    # ---- calls -----------------------------------------------------------------------------

    async def call(self, method: str, params: Any = None, *, timeout: float | None = None) -> Any:
        """Send a request and return its ``result``.

        Raises :class:`RemoteError` (error answer), :class:`NotConnected` (connection gone),
        :class:`RequestTimeout` (``timeout`` seconds passed; None = no limit).
        """
        if self._closed.done():
            raise NotConnected("the bridge connection is closed")
        call_id = next(self._ids)
        future = self._closed.get_loop().create_future()
        self._pending[call_id] = future
        try:
            await self._ws.send(jsonrpc.encode_request(call_id, method, UNSET if params is None else params),
                                text=True)
            if timeout is None:
                return await future
            try:
                async with asyncio.timeout(timeout):
                    return await future
            except TimeoutError:
                raise RequestTimeout(f"{method} got no answer in {timeout} s") from None
        except ConnectionClosed:
            raise NotConnected("the bridge connection is closed") from None
        finally:
            self._pending.pop(call_id, None)

    async def notify(self, method: str, params: Any = None) -> None:
        """Send a notification (no answer).  Raises :class:`NotConnected` if the connection is gone."""
        try:
            await self._ws.send(jsonrpc.encode_notification(method, UNSET if params is None else params),
                                text=True)
        except ConnectionClosed:
            raise NotConnected("the bridge connection is closed") from None

    async def send_raw(self, frame: str | bytes) -> None:
        """Send one text frame as is (to test the server with malformed input)."""
        await self._ws.send(frame, text=True)

    async def ack(self) -> int:
        """Acknowledge the highest seq seen and wait until the server applied it; return it."""
        seq = self.last_seq
        await self.call("stream.ack", {"seq": seq})
        self.acked_seq = max(self.acked_seq, seq)
        return seq

    # ---- lifecycle -------------------------------------------------------------------------

    @property
    def close_code(self) -> int | None:
        """The close code once the connection closed (e.g. 4409 replaced, 1001 server shutdown)."""
        return self._ws.close_code

    @property
    def close_reason(self) -> str | None:
        """The close reason text once the connection closed."""
        return self._ws.close_reason

    async def wait_closed(self) -> None:
        """Wait until the connection has closed (for whatever reason)."""
        await asyncio.shield(self._closed)

    async def close(self) -> None:
        """Close the connection (1000) and stop the reader and request tasks.  Idempotent."""
        if self._ack_timer is not None:
            self._ack_timer.cancel()
            self._ack_timer = None
        await self._ws.close()
        await asyncio.gather(self._reader, return_exceptions=True)
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    # ---- reader ----------------------------------------------------------------------------

    async def _read(self) -> None:
        ws, pending = self._ws, self._pending
        Response, Notification, Request = jsonrpc.Response, jsonrpc.Notification, jsonrpc.Request
        try:
            while True:
                try:
                    raw = await ws.recv(decode=False)
                except ConnectionClosed:
                    return
                try:
                    # Any: dispatched on type(msg) below (the hot path), which mypy cannot narrow
                    msg: Any = jsonrpc.decode(raw)
                except RpcError as exc:
                    log.warning("undecodable frame from the sidecar: %s", exc.message)
                    continue
                kind = type(msg)
                if kind is Notification:
                    await self._deliver(msg)
                elif kind is Response:
                    if msg.id == self._auth_id:
                        self._hello(msg.result)
                    future = pending.get(msg.id)
                    if future is not None and not future.done():
                        future.set_result(msg.result)
                elif kind is Request:
                    self._spawn(self._answer(msg))
                else:
                    error = RemoteError(msg.error.code, msg.error.message,
                                        None if msg.error.data is UNSET else msg.error.data)
                    future = pending.get(msg.id)
                    if future is not None and not future.done():
                        future.set_exception(error)
                    else:
                        log.warning("error answer for id %r: %s", msg.id, error)
        finally:
            self._closed.set_result(None)
            if self._ack_timer is not None:
                self._ack_timer.cancel()
                self._ack_timer = None
            for future in pending.values():
                if not future.done():
                    future.set_exception(NotConnected(f"connection closed ({ws.close_code})"))

    def _hello(self, result: Any) -> None:
        """The auth answer, handled in the reader before any replayed frame: a different
        ``stream_id`` means a new sidecar process whose seq numbers started over, so what we saw
        of the old stream says nothing about the new one."""
        sid = result.get("stream_id") if isinstance(result, dict) else None
        if self.stream_id is not None and sid is not None and sid != self.stream_id:
            self.restarted = True
            self.last_seq = self.acked_seq = 0
        self.stream_id = sid

    async def _deliver(self, msg: jsonrpc.Notification) -> None:
        """Track seq, skip already-seen frames, call on_notification, schedule the ack."""
        params = msg.params
        seq = params.get("seq") if type(params) is dict else None
        if type(seq) is int:
            if seq <= self.last_seq:
                return  # seen on an earlier connection and not acked then
            self.last_seq = seq
        callback = self._on_notification
        if callback is not None:
            outcome = callback(msg.method, params)
            if inspect.isawaitable(outcome):
                await outcome
        if type(seq) is int:
            if seq - self.acked_seq >= self._ack_every:
                self._send_ack()
            elif self._ack_timer is None:
                self._ack_timer = asyncio.get_running_loop().call_later(self._ack_delay, self._send_ack)

    def _send_ack(self) -> None:
        """Fire-and-forget ``stream.ack`` notification for the highest seq seen."""
        if self._ack_timer is not None:
            self._ack_timer.cancel()
            self._ack_timer = None
        seq = self.last_seq
        if seq <= self.acked_seq or self._closed.done():
            return
        self.acked_seq = seq
        self._spawn(self._quiet(self.notify("stream.ack", {"seq": seq})))

    async def _answer(self, msg: jsonrpc.Request) -> None:
        """Answer one incoming request with on_request's result or error."""
        try:
            if self._on_request is None:
                raise MethodNotFound(f"no handler for {msg.method}")
            result = await self._on_request(msg.method, {} if msg.params is UNSET else msg.params)
            frame = jsonrpc.encode_result(msg.id, result)
        except RpcError as exc:
            frame = jsonrpc.encode_error(msg.id, exc)
        except RemoteError as exc:
            frame = jsonrpc.encode_error(msg.id, RpcError(exc.code, exc.message, exc.data))
        except Exception as exc:  # noqa: BLE001 — a harness bug answers -32603, reading goes on
            log.exception("on_request(%s) raised", msg.method)
            frame = jsonrpc.encode_error(msg.id, InternalError(f"{type(exc).__name__}: {exc}"))
        await self._quiet(self._ws.send(frame, text=True))

    def _spawn(self, coro: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    @staticmethod
    async def _quiet(awaitable: Awaitable[Any]) -> None:
        """Await a send; a closed connection is not an error here (the reader reports it)."""
        try:
            await awaitable
        except (ConnectionClosed, NotConnected):
            pass


def _tap(ws: ClientConnection, tap: Callable[[str, str | bytes], None]) -> None:
    """Route ``ws``'s send / recv through ``tap`` (instance attributes: the class is untouched)."""
    send, recv = ws.send, ws.recv

    async def tapped_send(message: Any, text: bool | None = None) -> None:
        tap("to_sidecar", message)
        await send(message, text=text)

    async def tapped_recv(decode: bool | None = None) -> Any:
        message = await recv(decode=decode)
        tap("to_electron", message)
        return message

    ws.send = tapped_send  # type: ignore[method-assign]
    ws.recv = tapped_recv  # type: ignore[method-assign]
