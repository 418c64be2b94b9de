"""BridgeServer: the asyncio driver around the sans-I/O parts (codec, auth, stream): it accepts
and authenticates connections, reads their frames, and closes; its one worker is :mod:`bridge.worker`.

Rules / theory of operation
---------------------------
* Listens on loopback only (``host`` must be a loopback address; ``port=0`` picks a free port and
  :meth:`BridgeServer.start` returns the real one).  The HTTP handshake is refused with 403 for a
  foreign ``Origin`` or a non-loopback ``Host`` (see :mod:`bridge.auth`).  A frame larger than
  ``max_frame`` bytes (1 MiB in the sidecar) is bad input like any malformed frame: it gets a
  JSON-RPC error -32600 naming the cap (with the request's ``id``; ``null`` for a notification or
  an unreadable frame), never reaches the handler, and the connection lives (docs/decisions.md
  "Oversized frames"); an oversized ANSWER to one of our own requests also fails that request at
  once (:class:`~bridge.errors.AnswerTooLarge`; :meth:`Session.refuse_oversized`).  Only past
  ``hard_frame`` bytes (default 16 × ``max_frame``), which websockets refuses to buffer at all,
  is the connection closed with 1009.
* Before auth a frame is at most ``auth_frame`` bytes (4 KiB; :mod:`bridge.auth` rule 4): larger
  is 1009 at its header, nothing decoded; once the token matched the limit is ``hard_frame``.
* The first frame must be the ``auth`` request within ``auth_timeout`` seconds (the handshake
  before it: ``open_timeout``), else: error response + close 4401 (wrong/missing/malformed), or
  close 4408 (timeout, however much of the frame trickled in); another major: -32602 + close 4426
  (:mod:`bridge.auth` rule 5).  The answer: ``{"ok": true, "protocol", "capabilities", "last_seq": N,
  "stream_id": S}`` (this server's ``protocol`` and ``capabilities``; N = last seq issued so far,
  S = this process's stream; seq numbers restart with a new process), followed by a
  replay of every unacked stream frame, in order, then new frames.
* One client at a time: a connection that authenticates replaces the current one, which is closed
  with 4409; requests still pending on the old one fail with :class:`NotConnected`.
* Per connection a **reader** (the websockets handler coroutine) and a **writer** task.
  The reader: answers to our own requests resolve their futures at once; ``stream.ack {seq}`` is
  handled here (``{"ok": true}`` if it was a request); malformed frames get their JSON-RPC error;
  a frame whose decode or dispatch raises anything else is answered -32603 (a request with an id;
  :meth:`Session.fail_frame`) — the reader never dies on one frame;
  every other request/notification goes into one queue bounded in frames (``queue_size``) AND in
  bytes (``queue_bytes``, the raw frame sizes; a frame larger than the byte cap still goes in when
  the queue is empty).  When either is reached the reader stops reading, so a flood back-pressures
  the socket instead of growing memory (1 MB frames behind a busy worker once grew it to 1 GB).
  Caveat: a handler awaiting :meth:`request` while the client has more than ``queue_size`` frames
  queued ahead of the answer waits until its timeout (the answer is behind them on the socket).
  The writer sends frames in :class:`~bridge.stream.Delivery` order: a response leaves after every
  notification its handler emitted.
* ONE **worker** (:class:`bridge.worker.Worker`, per server, across connections) hands the
  queued frames to ``handler`` (or a run of them to ``group_handler``) strictly in arrival order
  and queues their answers; its rules are :mod:`bridge.worker`'s.  Frames of a replaced
  connection are still handled (nothing Electron sent is lost); their answers are dropped.
* :meth:`notify` is synchronous: it appends to the stream and wakes the writer; it returns the seq.
* :meth:`close` answers every request Electron sent before the connection goes: it stops
  accepting connections, keeps the current one open while the handler call in flight gets up to
  ``grace`` seconds (so a handler awaiting the client's answer to :meth:`request` — the virtual
  clock's platform requests — still gets it), and answers it with its result if it ends in time,
  else -32003 :data:`~bridge.worker.CUT_SHORT` (the worker is then cancelled).  A request taken off the queue
  after the close began — queued behind the call in flight, or sent meanwhile — is never handed
  to the handler: it is answered -32002 :data:`~bridge.worker.NOT_BEGUN` (counted; the count is
  logged once, at the end of the close); so is a request the
  reader reads once the worker is done (or finds no queue room for), by the reader itself, until
  the 1001 — every request read is answered.  Those answers are flushed to the socket (bounded,
  :data:`FLUSH_S`) before the connection is closed with 1001.  Only frames still on the wire when
  the close frame leaves, and frames of a client that does not read, go unanswered.
"""
from __future__ import annotations

import asyncio
import itertools
import secrets
import logging
from collections.abc import Callable, Iterable
from http import HTTPStatus
from typing import Any

from msgspec import UNSET
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request as HttpRequest, Response as HttpResponse

from . import jsonrpc
from .auth import AUTH_FRAME, Hello, auth_frame_cap, authenticate, check_handshake, check_protocol, is_loopback_bind
from .errors import (CLOSE_AUTH_TIMEOUT, CLOSE_REPLACED, CLOSE_TOO_BIG, AnswerTooLarge, InvalidRequest,
                     NotConnected, RemoteError, RequestTimeout, RpcError, Unauthorized, UnsupportedProtocol)
from .inbound import InboundQueue
from .session import Session, close_and_drain, refuse_auth, within
from .stream import OutboundStream
from .worker import GroupHandler, Handler, Worker, error_frame

__all__ = ["BridgeServer", "PROTOCOL"]

log = logging.getLogger("bridge.server")

PROTOCOL = "1.0"  # the contract version a BridgeServer announces unless given its app's (``protocol``)
CLOSE_TIMEOUT_S = 2.0  # seconds a closing handshake may take before the TCP connection is dropped
FLUSH_S = 0.1  # seconds close() waits for its last answers to reach the socket before the 1001


class BridgeServer:
    """The sidecar's end of the local websocket.  See the module header for the rules.

    ``token``: per-launch secret (non-empty str).  ``handler``: ``async (method, params) -> result``.
    ``host``: loopback address to bind.  ``port``: 0 = any free port.  ``max_frame``: bytes per
    incoming frame (larger: a -32600 error, the connection lives).  ``hard_frame``: bytes past
    which websockets closes with 1009 (default 16 × ``max_frame``).  ``allowed_origins``: exact ``Origin`` values accepted (no Origin is always
    accepted).  ``queue_size``: inbound frames buffered for the worker; ``queue_bytes``: their raw bytes.  ``stream_limit``: unacked
    outbound frames kept.  ``auth_timeout`` / ``open_timeout``: seconds for the ``auth`` frame /
    the HTTP handshake.  ``auth_frame``: bytes of a frame before auth (:func:`auth_frame_cap`).
    ``raw_params``: hand the handler params as :class:`msgspec.Raw` (default: decoded JSON).
    ``control_limit``: bytes of answers queued for a client that does not read them; past it the
    connection is closed with 1008 (it may reconnect and resume the stream).
    ``group_handler`` / ``group_methods`` / ``group_max``: hand a run of up to ``group_max``
    queued frames of one of ``group_methods`` to ``group_handler`` in one call (module rules).
    ``cut_short_data``: ``(method) -> data`` of the -32603 answering a call cut short at close.
    ``protocol`` / ``capabilities``: the ``"MAJOR.MINOR"`` and capabilities the auth answer gives.
    """

    def __init__(
        self,
        token: str,
        handler: Handler,
        host: str = "127.0.0.1",
        port: int = 0,
        max_frame: int = 1 << 20,
        allowed_origins: Iterable[str] = (),
        queue_size: int = 1024,
        stream_limit: int = 100_000,
        *,
        queue_bytes: int = 8 << 20,
        auth_timeout: float = 10.0, open_timeout: float = 10.0, auth_frame: int = AUTH_FRAME,
        control_limit: int = 32 << 20,
        hard_frame: int | None = None,
        raw_params: bool = False,
        group_handler: GroupHandler | None = None,
        group_methods: Iterable[str] = (),
        group_max: int = 256,
        cut_short_data: Callable[[str], Any] | None = None, protocol: str = PROTOCOL, capabilities: Iterable[str] = (),
    ):
        if not token:
            raise ValueError("BridgeServer needs a non-empty token")
        if not is_loopback_bind(host):
            raise ValueError(f"BridgeServer binds loopback only, not {host!r}")
        self._token = token.encode("utf-8")  # expected secret, bytes for compare_digest
        self._raw_params = raw_params  # params reach the handler undecoded (msgspec.Raw)
        self._protocol, self._capabilities = protocol, list(capabilities)  # announced in the auth answer
        if group_max < 1:
            raise ValueError("group_max must be >= 1")
        self._host = "127.0.0.1" if host.lower() == "localhost" else host  # one address, one port
        self._port = port  # requested port (0 = free)
        self._max_frame = max_frame  # bytes; larger frames get a -32600 error, connection lives
        # bytes; websockets closes the connection with 1009 past it (memory bound of one frame)
        self._hard_frame = max(hard_frame if hard_frame is not None else 16 * max_frame, max_frame)
        self._allowed_origins = frozenset(allowed_origins)  # exact Origin values accepted
        self._auth_timeout = auth_timeout  # seconds for the first frame
        self._open_timeout = open_timeout  # seconds for the HTTP handshake
        self._auth_frame = auth_frame_cap(auth_frame, self._token, self._hard_frame)  # bytes before auth
        self._control_limit = control_limit  # bytes of unread answers before a client is cut off
        self.stream = OutboundStream(stream_limit)  # the resumable outbound stream
        self.stream_id = secrets.token_hex(8)  # a new process, a new stream: seqs restart (re-read tasks)
        self.port: int | None = None  # the bound port once started
        self._queue = InboundQueue(queue_size, queue_bytes)  # readers → the one worker
        self._session: Session | None = None  # the current authenticated connection
        self._server: Server | None = None  # the websockets server
        self._worker: asyncio.Task | None = None  # the one handler task
        self._closing = asyncio.Event()  # set by close(): readers stop waiting for queue space
        self._ids = itertools.count(1)  # ids of our requests to the client
        self._background: set[asyncio.Task] = set()  # retire-the-old-connection tasks
        # set by close() once the worker is done: the reader answers requests NOT_BEGUN itself
        self._settled = False
        self._closed = False  # close() began (quiesce() may have run before it)
        # the one worker: the handler calls, in arrival order (bridge.worker)
        self._work = Worker(self._queue, handler, self._closing, raw_params=raw_params,
                            group_handler=group_handler, group_methods=group_methods,
                            group_max=group_max, cut_short_data=cut_short_data)

    # ---- public API ------------------------------------------------------------------------

    @property
    def queued_bytes(self) -> int:
        """Raw bytes of inbound frames waiting for the worker."""
        return self._queue.queued_bytes

    @property
    def connected(self) -> bool:
        """True while an authenticated client is connected."""
        return self._session is not None

    @property
    def client(self) -> Hello | None:
        """The current client's auth params (``client``, ``version``), or None."""
        return self._session.hello if self._session is not None else None

    @property
    def session(self) -> Session | None:
        """The current connection (:meth:`Session.tell`: a note outside the stream), or None."""
        return self._session

    async def start(self) -> int:
        """Bind and start serving; return the real port."""
        self._worker = asyncio.create_task(self._work.run(), name="bridge-worker")
        self._server = await serve(
            self._serve_connection, self._host, self._port, process_request=self._check_handshake,
            max_size=self._auth_frame,  # until auth; then hard_frame (_serve_connection)
            open_timeout=self._open_timeout,
            compression=None,  # loopback: compression costs CPU and buys nothing
            # a frozen client must not hold up the sidecar's exit by websockets' default 10 s
            close_timeout=CLOSE_TIMEOUT_S,
        )
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("bridge listening on %s:%d", self._host, self.port)
        return self.port

    def notify(self, method: str, params: Any = None) -> int:
        """Append a notification to the stream (seq stamped into params) and send it if a client
        is connected; return its seq.  ``params``: Struct, mapping or None (TypeError otherwise)."""
        seq = self.stream.append(method, params)
        session = self._session
        if session is not None:
            session.wake()
        return seq

    async def request(self, method: str, params: Any = None, timeout: float | None = 10.0) -> Any:
        """Send a request to the current client and return its ``result``.

        Raises :class:`RemoteError` (error answer), :class:`AnswerTooLarge` (an answer frame over
        ``max_frame``: at once, not at the timeout), :class:`RequestTimeout` (none within
        ``timeout`` seconds; None = wait forever), :class:`NotConnected` (no client, or the
        connection closed meanwhile), ``TypeError`` (params not encodable).
        """
        session = self._session
        if session is None or session.closed:
            raise NotConnected(f"no authenticated client for {method}")
        request_id = next(self._ids)
        data = jsonrpc.encode_request(request_id, method, UNSET if params is None else params)
        future = asyncio.get_running_loop().create_future()
        session.pending[request_id] = future
        session.send(data)
        try:
            async with asyncio.timeout(timeout):
                return await future
        except TimeoutError:
            if future.done() and not future.cancelled():
                return future.result()  # settled in the same loop iteration: its outcome wins
            raise RequestTimeout(f"{method} (id {request_id}) got no answer in {timeout} s") from None
        except AnswerTooLarge as exc:  # the reader does not know the method: name it here
            raise AnswerTooLarge(exc.size, exc.cap, f"{method} (id {request_id})") from None
        finally:
            session.pending.pop(request_id, None)

    async def quiesce(self, *, grace: float = 5.0) -> None:
        """The first half of :meth:`close`: stop accepting connections and frames, and settle the
        worker — the handler call in flight gets ``grace`` seconds, then is answered CUT_SHORT;
        the queued frames NOT_BEGUN.  The current connection stays open (a :class:`Deferred`
        answer, ``sidecar.shutdown``'s, can still go out on it) until :meth:`close`.
        Idempotent."""
        if self._closing.is_set():
            return
        self._closing.set()  # from here the worker answers every frame it takes NOT_BEGUN
        if self._server is not None:
            self._server.server.close()  # no new connection; the current one stays for the answers
        if self._worker is not None:
            if not self._work.idle.is_set() and not await within(self._work.idle.wait(), grace):
                log.warning("bridge close: handler still busy after %.1f s; answered it"
                            " 'shutting down' and cancelled it", grace)
                self._work.cut_short()
                self._worker.cancel()
            self._work.answer_queued()
        self._settled = True  # from here the reader answers what it reads (module rules)

    async def close(self, *, grace: float = 5.0) -> None:
        """Answer what was asked, then close the connection (1001) — see the module rules.
        Idempotent.

        Bounded: the handler call in flight gets ``grace`` seconds (:meth:`quiesce`, unless it
        ran already), the last answers :data:`FLUSH_S`, the closing handshake ``grace`` again,
        then the connections are aborted.  Nothing here waits on a cancellation to finish (the
        process must exit within 2 s)."""
        if self._closed:
            return
        self._closed = True
        await self.quiesce(grace=grace)
        session = self._session
        if session is not None and not await session.flush(FLUSH_S):
            log.warning("bridge close: the last answers did not reach the socket in %.1f s", FLUSH_S)
        if self._server is not None:
            self._server.close()  # closes open connections with 1001 and waits for handlers
            if not await within(self._server.wait_closed(), grace):
                log.warning("bridge close: closing handshake not done after %.1f s; aborting", grace)
                for conn in list(getattr(self._server, "all_connections", ())):
                    conn.transport.abort()
                await within(self._server.wait_closed(), 0.2)
        if self._background:
            await within(asyncio.gather(*self._background, return_exceptions=True), 0.2)
        if self._worker is not None:
            self._worker.cancel()
            await within(asyncio.gather(self._worker, return_exceptions=True), 0.2)
        if self._work.refused:  # once, with the count (bridge.worker rules)
            log.info("bridge close: %d frames refused while stopping (-32002, nothing done)",
                     self._work.refused)
        log.info("bridge closed")

    # ---- handshake and reader ---------------------------------------------------------------

    def _check_handshake(self, connection: ServerConnection, request: HttpRequest) -> HttpResponse | None:
        """process_request hook: 403 for a foreign Origin or a non-loopback Host."""
        reason = check_handshake(
            request.headers.get_all("Origin"), request.headers.get_all("Host"), self._allowed_origins
        )
        if reason is None:
            return None
        log.warning("refused a websocket handshake from %s: %s", connection.remote_address, reason)
        return connection.respond(HTTPStatus.FORBIDDEN, f"Forbidden: {reason}\n")

    async def _serve_connection(self, ws: ServerConnection) -> None:
        """websockets handler: authenticate, take over as the current session, read."""
        try:
            try:
                async with asyncio.timeout(self._auth_timeout):
                    raw = await ws.recv(decode=False)
            except TimeoutError:
                log.warning("no auth frame from %s within %.1f s", ws.remote_address, self._auth_timeout)
                await close_and_drain(ws, CLOSE_AUTH_TIMEOUT, "auth timeout")
                return
            try:
                message: Any = jsonrpc.decode(raw)
            except RpcError as exc:
                message = exc
            try:
                request, hello = authenticate(message, self._token)
                check_protocol(hello, self._protocol)
            except (Unauthorized, UnsupportedProtocol) as exc:
                return await refuse_auth(ws, exc, getattr(message, "id", None))
        except ConnectionClosed as exc:
            if exc.sent is not None and exc.sent.code == CLOSE_TOO_BIG:
                log.warning("refused %s: a frame over %d bytes before auth", ws.remote_address, self._auth_frame)
            return
        ws.protocol.max_message_size = self._hard_frame  # read at each frame's start: before the answer
        session = Session(ws, self.stream, hello, self._control_limit)
        old, self._session = self._session, session
        if old is not None:
            self._retire(old)
        log.info("client %r %s connected from %s; replaying %d unacked frames",
                 hello.client, hello.version, ws.remote_address, len(self.stream))
        hello_answer = {"ok": True, "protocol": self._protocol, "capabilities": self._capabilities,
                        "last_seq": self.stream.last_seq, "stream_id": self.stream_id}
        session.send(jsonrpc.encode_result(request.id, hello_answer), first=True)
        session.start()
        try:
            await self._read(session)
        finally:
            session.shutdown()
            if self._session is session:
                self._session = None
                log.info("client %r disconnected (code %s)", hello.client, ws.close_code)

    def _retire(self, old: Session) -> None:
        """Close a replaced connection with 4409 in the background."""
        log.info("client %r replaced by a newer connection", old.hello.client)
        old.shutdown()
        task = asyncio.create_task(old.ws.close(CLOSE_REPLACED, "replaced by a newer connection"))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _read(self, session: Session) -> None:
        """Read frames until the connection closes; dispatch as the module header says."""
        ws = session.ws
        Request, Notification, Response = jsonrpc.Request, jsonrpc.Notification, jsonrpc.Response
        while True:
            try:
                raw = await ws.recv(decode=False)
            except ConnectionClosed:
                return
            if len(raw) > self._max_frame:
                session.refuse_oversized(raw, self._max_frame)
                continue
            try:  # one frame's failure, whatever its class, is that frame's answer
                # Any: dispatched on type(msg) below (the hot path), which mypy cannot narrow
                msg: Any = jsonrpc.decode(raw, raw_params=self._raw_params)
            except RpcError as exc:
                session.send(error_frame(exc.id, exc))
                continue
            except Exception as exc:  # noqa: BLE001 — a codec bug must not end the connection
                session.fail_frame(raw, exc)
                continue
            try:
                kind = type(msg)
                if kind is Request or kind is Notification:
                    if msg.method == "stream.ack":
                        session.on_ack(msg)
                    elif msg.method == "auth":
                        if kind is Request:
                            session.send(error_frame(msg.id, InvalidRequest("already authenticated")))
                    elif self._settled:  # closing, the worker is done: the client hears so at once
                        self._refuse(session, msg)
                    elif self._queue.has_room(len(raw)):
                        self._queue.put_nowait((session, msg, len(raw)))
                    elif not await self._queue.put((session, msg, len(raw)), self._closing):
                        self._refuse(session, msg)  # closing and no room: the handler never sees it
                elif kind is Response:
                    future = session.pending.get(msg.id)
                    if future is not None and not future.done():
                        future.set_result(msg.result)
                    else:
                        log.debug("answer to unknown or expired request id %r", msg.id)
                else:
                    future = session.pending.get(msg.id)
                    error = RemoteError(msg.error.code, msg.error.message,
                                        None if msg.error.data is UNSET else msg.error.data)
                    if future is not None and not future.done():
                        future.set_exception(error)
                    else:
                        log.warning("client sent an error for id %r: %s", msg.id, error)
            except Exception as exc:  # noqa: BLE001 — one frame never ends the connection
                session.fail_frame(raw, exc)

    def _refuse(self, session: Session, msg: Any) -> None:
        """Closing: ``msg`` never reaches the handler; a request is answered NOT_BEGUN."""
        self._work.refuse(session, msg)

