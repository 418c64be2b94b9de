"""Stack's HTTP/1.1 paths (DESIGN §9 "Stack contract"; docs/decisions.md, the section on
Stack's HTTP path): :class:`H11Pool` — asyncio streams + ``h11`` with a keep-alive pool — for an
``http`` Stack, and :class:`HttpxPath` — httpx — for an ``https`` Stack and the tests' plugged
transports.  Both answer :meth:`request` with an :class:`Answer` or raise :class:`TransportFailure`.

Rules / theory of operation
---------------------------
* Why two: httpx cost ~0.8 ms of client CPU per ``POST /v1/batch`` here, h11 on streams
  ~0.2 ms (``python -m bench.stack_http``); on the 8-hour shift that was most of the Stack share
  of the sidecar's CPU.  TLS stays with httpx (its CA bundle, hostname checks, tested).
* :class:`H11Pool`, one per client: at most ``max_connections`` requests in flight (a semaphore;
  the pool wait is a phase), each on a kept-alive connection taken from the idle list (last in,
  first out) or opened; a connection goes back only when both sides finished the exchange and
  neither said ``Connection: close``.  An idle connection the server closed (EOF seen) or sent
  bytes to is dropped at checkout; one found dead while sending or before any byte of its answer
  (the race of a server closing it just then), or that answers ``408 Request Timeout`` (the same
  race when the server says so before closing: RFC 9110 §15.5.9), is replaced by a fresh
  connection ONCE — every Stack request is safe to resend (writes carry their idempotency key,
  reads are GETs).  A 408 on a fresh connection is an answer like any other.
* :class:`HttpxPath` resends the same way, once: httpcore drops an idle connection that is
  readable at checkout but resends nothing, so a reused connection (httpcore's ``trace``
  extension shows no ``connection.*`` step for the request) that answers 408 or dies before the
  answer's head (``RemoteProtocolError`` / ``ReadError`` / ``WriteError``) goes again — on the
  connection httpcore hands it, which it cannot be told to open.  A plugged transport traces
  nothing: its answers are never resent.
* Per-phase timeout ``timeout`` seconds: pool wait, connect, write (drain), and each read (no
  byte for that long).  The whole request's deadline is the caller's (``asyncio.timeout``
  around :meth:`request`): a cancelled exchange closes its connection, never pools it.
* No redirects (a 3xx is an answer like any other), no content decoding (no
  ``Accept-Encoding`` is sent, so none arrives), ``Content-Length`` framing for bodies; the
  answer's header names are lower-case.  Errors: :class:`PhaseTimeout` (its ``phase``:
  ``ConnectTimeout``, ``WriteTimeout``, ``ReadTimeout``, ``PoolTimeout``) and
  :class:`TransportFailure` for refused/reset connections and protocol violations.
* ``aclose()`` is shutdown (:mod:`sidecar.app.closing`), on both paths: the exchanges in flight
  end at once (h11: their connections aborted; httpx: their requests cut, since httpcore's close
  lets a request queued for a connection open a fresh one and run to its timeout) as
  :class:`TransportFailure` ``the client was closed mid-exchange`` — never resent; a request
  queued for a slot, connecting, or made later sends nothing (``the client is closed``).  It
  waits for none of them.  The write such a request carried stays pending in the outbox (its
  claim was committed before the send) and goes again on the next run.
* An answer's body is capped at :data:`MAX_ANSWER_BYTES` on both paths: past it the request is a
  :class:`TransportFailure` naming the cap (Stack unavailable, retried on its ladder) and the
  connection is dropped — a runaway answer (an endless chunked body) grew the sidecar ~1 GB
  within a 2 s deadline before (docs/decisions.md, "Stack's HTTP path": the breaker round).
"""
from __future__ import annotations

import asyncio
import ssl
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import h11

from ..domain.errors import IOFailure

if TYPE_CHECKING:
    import httpx


#: bytes of one answer's body, at most: a TU's startup data (favorites with markers, history) is
#: a few MB at the most; 64 MiB leaves room and still bounds what a broken Stack can make us hold
MAX_ANSWER_BYTES = 64 * 1024 * 1024


class TransportFailure(IOFailure):
    """No complete answer: connection refused/reset/closed, or the server broke HTTP/1.1.

    The client maps it to :class:`~sidecar.stack.errors.StackUnavailable` at once; it derives
    from the I/O branch of the one root (``sidecar.domain.errors`` rule 1) like every other."""


class PhaseTimeout(TransportFailure):
    """A phase took longer than the per-phase timeout; ``phase`` names it as httpx does."""

    def __init__(self, phase: str) -> None:
        super().__init__(phase)
        self.phase = phase


def _too_large() -> TransportFailure:
    return TransportFailure(f"the answer is larger than {MAX_ANSWER_BYTES} bytes")


class Answer:
    """An HTTP answer: ``status``, ``body`` bytes, ``headers`` (``.get(lower-case name)``)."""

    __slots__ = ("status", "body", "headers")

    def __init__(self, status: int, body: bytes, headers: Any) -> None:
        self.status = status
        self.body = body
        self.headers = headers


class _Stale(IOFailure):
    """A reused connection died before its answer began, or answered 408 (module rules: resent
    once)."""


class _Conn:
    __slots__ = ("reader", "writer", "h11", "reused")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.h11 = h11.Connection(h11.CLIENT)
        self.reused = False

    def alive(self) -> bool:
        # bytes that came in while idle (a server's 408 before it closes) answer no request of
        # ours; read as the next answer they would give it a stranger's reply.  at_eof() is False
        # while they sit unread, and StreamReader has no public way to ask: its ``_buffer``.
        return not (self.reader.at_eof() or self.writer.is_closing() or self.reader.exception()
                    or getattr(self.reader, "_buffer", None))

    def close(self) -> None:
        # abort, not close: close() first flushes what is still buffered, so a connection given
        # up mid-write (WriteTimeout, the deadline) to a peer that stopped reading stayed open,
        # its buffer held, for as long as that peer lived.  Nothing is owed to it; no wait either.
        self.writer.transport.abort()


class H11Pool:
    """Keep-alive HTTP/1.1 to ``base_url`` (``http`` only; module rules)."""

    def __init__(self, base_url: str, *, timeout: float, max_connections: int,
                 headers: dict[str, str]) -> None:
        u = urlsplit(base_url)
        if u.scheme.lower() != "http" or not u.hostname:
            raise ValueError(f"H11Pool speaks plain http to a host, not {base_url!r}")
        self.host, self.port = u.hostname, u.port or 80
        self.prefix = u.path.rstrip("/")  # a base URL's path is kept before every request's
        host = f"[{self.host}]" if ":" in self.host else self.host
        self._base: list[tuple[str, str]] = [("Host", host if u.port in (None, 80) else f"{host}:{u.port}"),
                                             *headers.items()]
        self.timeout = timeout
        self._idle: list[_Conn] = []
        self._busy: set[_Conn] = set()  # connections an exchange is on: close() aborts them
        self._slots = asyncio.Semaphore(max_connections)
        self._closed = False

    async def request(self, method: str, path: str, headers: dict[str, str], body: bytes | None) -> Answer:
        """One exchange: ``path`` starts with ``/`` (already quoted); ``body`` None sends none."""
        if self._closed:
            raise TransportFailure("the client is closed")
        hdrs = [*self._base, *headers.items()]
        if body is not None:
            hdrs.append(("Content-Length", str(len(body))))
        req = h11.Request(method=method, target=self.prefix + path, headers=hdrs)
        if self._slots.locked():  # the pool wait is a phase of its own
            try:
                async with asyncio.timeout(self.timeout):
                    await self._slots.acquire()
            except TimeoutError:
                raise PhaseTimeout("PoolTimeout") from None
        else:
            await self._slots.acquire()  # free: returns at once
        try:
            conn = await self._checkout()
            try:
                return await self._exchange(conn, req, body)
            except _Stale:
                return await self._exchange(await self._open(), req, body)
        finally:
            self._slots.release()

    async def _checkout(self) -> _Conn:
        while self._idle:
            conn = self._idle.pop()
            if conn.alive():
                conn.reused = True
                return conn
            conn.close()  # the server closed it while idle
        return await self._open()

    async def _open(self) -> _Conn:
        if self._closed:  # a request queued for a slot (or resending) when close() came: shutdown
            raise TransportFailure("the client is closed")
        try:
            async with asyncio.timeout(self.timeout):
                reader, writer = await asyncio.open_connection(self.host, self.port)
        except TimeoutError:
            raise PhaseTimeout("ConnectTimeout") from None
        except OSError as exc:
            raise TransportFailure(f"ConnectError: {exc}") from exc
        if self._closed:  # close() came while connecting: not a byte goes out on it
            writer.transport.abort()
            raise TransportFailure("the client is closed")
        return _Conn(reader, writer)

    async def _exchange(self, conn: _Conn, req: h11.Request, body: bytes | None) -> Answer:
        started = False  # a byte of the answer arrived: no resend after this
        self._busy.add(conn)
        try:
            c = conn.h11
            out = c.send(req)
            if body:
                out += c.send(h11.Data(data=body))
            conn.writer.write(out + c.send(h11.EndOfMessage()))
            try:
                async with asyncio.timeout(self.timeout):
                    await conn.writer.drain()
            except TimeoutError:
                raise PhaseTimeout("WriteTimeout") from None
            status, head, chunks, size = 0, None, [], 0
            while True:
                ev = c.next_event()
                if ev is h11.NEED_DATA:
                    try:
                        async with asyncio.timeout(self.timeout):
                            data = await conn.reader.read(65536)
                    except TimeoutError:
                        raise PhaseTimeout("ReadTimeout") from None
                    started = started or bool(data)
                    c.receive_data(data)
                elif isinstance(ev, h11.Response):
                    if ev.status_code == 408 and conn.reused:
                        # RFC 9110 §15.5.9: the server timed the idle connection out just as we
                        # reused it (after the idle check saw nothing) — no answer to this request
                        raise _Stale()
                    status, head = ev.status_code, ev.headers
                elif isinstance(ev, h11.Data):
                    size += len(ev.data)
                    if size > MAX_ANSWER_BYTES:
                        raise _too_large()
                    chunks.append(bytes(ev.data))
                elif isinstance(ev, h11.EndOfMessage):
                    break
                elif isinstance(ev, h11.ConnectionClosed):
                    raise TransportFailure("RemoteProtocolError: the server closed the connection "
                                           "without an answer")
                # h11.InformationalResponse (1xx): skipped, the final answer follows
        except (OSError, h11.ProtocolError, TransportFailure, _Stale) as exc:
            conn.close()
            if self._closed:  # close() aborted it (or it failed meanwhile): shutdown, no resend
                raise TransportFailure("the client was closed mid-exchange") from exc
            if isinstance(exc, _Stale):
                raise
            if conn.reused and not started and not isinstance(exc, PhaseTimeout):
                raise _Stale() from exc
            if isinstance(exc, TransportFailure):
                raise
            raise TransportFailure(f"{type(exc).__name__}: {exc}") from exc
        except BaseException:
            conn.close()  # cancelled (the request's deadline) mid-exchange: unusable
            raise
        finally:
            self._busy.discard(conn)
        # bytes past the answer's end (a server sending more than it framed) would be read as
        # the NEXT request's answer: a connection out of step with its server is never pooled
        if c.our_state is h11.DONE and c.their_state is h11.DONE and not c.trailing_data[0] \
                and not self._closed:
            c.start_next_cycle()
            self._idle.append(conn)
        else:
            conn.close()  # Connection: close, or an answer framed by the connection's end
        assert head is not None
        return Answer(status, b"".join(chunks), {k.decode(): v.decode("latin-1") for k, v in head})

    async def aclose(self) -> None:
        """Shutdown: every connection aborted — idle ones and those an exchange is on (that
        exchange ends at once, ``the client was closed mid-exchange``); requests queued for a
        slot, or made later, open none (``the client is closed``).  Does not wait for them."""
        self._closed = True
        idle, self._idle = self._idle, []
        for conn in (*idle, *self._busy):
            conn.close()


class HttpxPath:
    """The same :meth:`request` through ``httpx.AsyncClient`` (``https``, plugged transports)."""

    def __init__(self, base_url: str, *, timeout: float, max_connections: int, headers: dict[str, str],
                 verify: ssl.SSLContext | bool, transport: httpx.AsyncBaseTransport | None) -> None:
        import httpx

        self._httpx = httpx
        self._closed = False
        self._cuts: set[asyncio.Timeout] = set()  # one per request in flight: close() fires them
        self._http = httpx.AsyncClient(
            base_url=base_url, verify=verify, timeout=httpx.Timeout(timeout), transport=transport,
            http1=True, http2=False, follow_redirects=False,
            limits=httpx.Limits(max_connections=max_connections,
                                max_keepalive_connections=max_connections, keepalive_expiry=30.0),
            headers=headers)

    async def request(self, method: str, path: str, headers: dict[str, str], body: bytes | None) -> Answer:
        if self._closed:  # httpx would raise RuntimeError: not a transport failure
            raise TransportFailure("the client is closed")
        cut = asyncio.timeout(None)  # fired by close(): httpcore would let the request run on
        try:
            async with cut:
                self._cuts.add(cut)
                try:
                    return await self._once(method, path, headers, body, last=False)
                except _Stale:
                    return await self._once(method, path, headers, body, last=True)
        except TimeoutError:
            if cut.expired():
                raise TransportFailure("the client was closed mid-exchange") from None
            raise
        finally:
            self._cuts.discard(cut)

    async def _once(self, method: str, path: str, headers: dict[str, str], body: bytes | None, *,
                    last: bool) -> Answer:
        """One try; unless ``last``, :class:`_Stale` when it went out on a reused connection
        that answered 408 or died before the answer's head (module rules)."""
        httpx = self._httpx
        steps: list[str] = []  # httpcore's trace of this try; a plugged transport tells none

        async def trace(name: str, info: Any) -> None:
            steps.append(name)

        def reused() -> bool:  # it went out, and on no connection opened for it
            return not last and bool(steps) and not any(s.startswith("connection.") for s in steps)
        try:
            async with self._http.stream(method, path, content=body, headers=headers,
                                         extensions={"trace": trace}) as resp:
                if resp.status_code == 408 and reused():
                    raise _Stale()  # the server timed the idle connection out (H11Pool's race)
                chunks, size = [], 0
                async for chunk in resp.aiter_bytes():
                    size += len(chunk)
                    if size > MAX_ANSWER_BYTES:
                        raise _too_large()
                    chunks.append(chunk)
        except httpx.TimeoutException as exc:
            raise PhaseTimeout(type(exc).__name__) from exc
        except httpx.TransportError as exc:
            if self._closed:
                raise TransportFailure("the client was closed mid-exchange") from exc
            if reused() and "http11.receive_response_headers.complete" not in steps \
                    and isinstance(exc, (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)):
                raise _Stale() from exc
            raise TransportFailure(f"{type(exc).__name__}: {exc}") from exc
        return Answer(resp.status_code, b"".join(chunks), resp.headers)

    async def aclose(self) -> None:
        """Shutdown, as :meth:`H11Pool.aclose`: the requests in flight or queued for a slot end
        at once (httpcore's own close only closes connections: a queued request was handed a
        fresh one after it, and ran to its timeout), later ones fail; then httpx closes."""
        self._closed = True
        now = asyncio.get_running_loop().time()
        for cut in self._cuts:
            cut.reschedule(now)
        await self._http.aclose()
