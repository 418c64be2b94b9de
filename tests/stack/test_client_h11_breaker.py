"""Adversarial tests of the h11 path (sidecar.stack.http11) against raw loopback servers: each
server is an ``asyncio.start_server`` handler that misbehaves in one precise way."""
from __future__ import annotations

import asyncio
import os

import pytest

from sidecar.stack.client import StackClient
from sidecar.stack.errors import StackUnavailable


async def read_req(r: asyncio.StreamReader) -> bytes:
    """One request (head + ``Content-Length`` body) off the connection; returns its head."""
    head = await r.readuntil(b"\r\n\r\n")
    n = next((int(ln.split(b":")[1]) for ln in head.split(b"\r\n")
              if ln.lower().startswith(b"content-length:")), 0)
    if n:
        await r.readexactly(n)
    return head


def ok(body: bytes = b"{}", extra: bytes = b"") -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n%s\r\n%s" % (len(body), extra, body)


class Srv:
    """``handler(reader, writer, n)`` serves the n-th connection (1-based); ``conns`` counts them."""

    def __init__(self, handler) -> None:
        self.handler, self.conns, self.writers = handler, 0, []

    async def __aenter__(self) -> "Srv":
        async def serve(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            self.conns += 1
            self.writers.append(w)
            try:
                await self.handler(r, w, self.conns)
            except (OSError, asyncio.IncompleteReadError):
                pass
            finally:
                w.close()
        self.srv = await asyncio.start_server(serve, "127.0.0.1", 0)
        self.port = self.srv.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.srv.close()
        for w in self.writers:
            w.close()


async def keep_answering(r: asyncio.StreamReader, w: asyncio.StreamWriter, body: bytes) -> None:
    while True:
        await read_req(r)
        w.write(ok(body))
        await w.drain()


def stack_client(url: str, path: str, **kw) -> StackClient:
    """The h11 path, or the httpx one (an https Stack's) through a real socket transport with
    the pool an https Stack gets (a plugged transport brings its own limits)."""
    if path == "h11":
        return StackClient(url, **kw)
    import httpx

    limits = httpx.Limits(max_connections=kw.get("max_connections", 16))
    return StackClient(url, transport=httpx.AsyncHTTPTransport(limits=limits), **kw)


@pytest.mark.parametrize("first", [ok(b'{"first":1}'), b"HTTP/1.1 204 No Content\r\n\r\n"],
                         ids=["200", "204"])
async def test_bytes_past_the_end_of_an_answer_are_never_read_as_the_next_answer(first):
    """A server that sends more than it framed (here a whole second answer after a 200, or
    after a 204, which has no body) is out of step: the surplus must not become the answer to
    the client's next request."""
    async def h(r, w, n):
        if n == 1:
            await read_req(r)
            w.write(first + ok(b'{"stale":1}'))
        await keep_answering(r, w, b'{"real":2}')
    async with Srv(h) as s, StackClient(s.url, timeout=2.0) as c:
        assert (await c.send("PUT", "/p", b"{}", "k1")).status in (200, 204)
        assert (await c.send("PUT", "/p", b"{}", "k2")).body == b'{"real":2}'


async def test_bytes_a_server_sends_to_an_idle_connection_are_never_read_as_an_answer():
    """Servers answer an idle kept-alive connection they are about to close with ``408 Request
    Timeout``: that answer belongs to no request, so the next request must not get it — the
    connection is dropped at checkout like one the server closed."""
    idle, idle_answered = asyncio.Event(), asyncio.Event()

    async def h(r, w, n):
        if n == 1:
            await read_req(r)
            w.write(ok())
            await w.drain()
            await idle.wait()
            w.write(b"HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            await w.drain()
            idle_answered.set()
            await asyncio.sleep(30)  # not closed yet: only the stray bytes tell
        await keep_answering(r, w, b'{"real":2}')
    async with Srv(h) as s, StackClient(s.url, timeout=2.0) as c:
        await c.send("PUT", "/p", b"{}", "k1")
        idle.set()
        await idle_answered.wait()
        idle_conn = c._http._idle[0]
        for _ in range(500):  # until the client's loop took the 408 in (unread, as in production)
            if getattr(idle_conn.reader, "_buffer", None):
                break
            await asyncio.sleep(0.01)
        assert (await c.send("PUT", "/p", b"{}", "k2")).body == b'{"real":2}'


def client_sockets(port: int) -> int:
    """This process's TCP sockets connected TO ``port`` (the client's ends, not the server's)."""
    mine = {os.readlink(f"/proc/self/fd/{fd}")[8:-1] for fd in os.listdir("/proc/self/fd")
            if os.path.exists(f"/proc/self/fd/{fd}") and os.readlink(f"/proc/self/fd/{fd}").startswith("socket:[")}
    with open("/proc/self/net/tcp") as f:
        rows = [ln.split() for ln in f.read().splitlines()[1:]]
    return sum(1 for r in rows if int(r[2].split(":")[1], 16) == port and r[9] in mine)


@pytest.mark.parametrize("timeout,total", [(0.2, 10.0), (10.0, 0.3)], ids=["WriteTimeout", "deadline"])
async def test_a_connection_given_up_mid_write_is_closed_at_once(timeout, total):
    """A Stack that stops reading: the write times out (or the deadline cancels it) with data
    still buffered.  The given-up connection must be gone then — not kept open (and its buffer
    held) until a peer that never reads drains it."""
    async def h(r, w, n):
        await asyncio.sleep(30)  # never reads
    async with Srv(h) as s, StackClient(s.url, timeout=timeout, total_timeout=total) as c:
        for i in range(3):
            with pytest.raises(StackUnavailable):
                await c.send("PUT", "/p", b"x" * (32 << 20), f"k{i}")
        for _ in range(20):  # a closed transport lets go of its socket on a later loop turn
            await asyncio.sleep(0.01)
        assert client_sockets(s.port) == 0


async def test_requests_waiting_for_the_pool_open_no_connection_after_close():
    """``close()`` is shutdown: requests still queued for a slot must fail then, not open fresh
    connections to Stack afterwards; the one in flight is cut too (test_client_close.py)."""
    async def h(r, w, n):
        await read_req(r)
        await asyncio.sleep(0.3)
        w.write(ok())
        await w.drain()
        await keep_answering(r, w, b"{}")
    async with Srv(h) as s:
        c = StackClient(s.url, timeout=5.0, max_connections=1)
        tasks = [asyncio.create_task(c.health()) for _ in range(3)]
        while s.conns == 0:
            await asyncio.sleep(0.01)
        await c.close()
        res = await asyncio.gather(*tasks, return_exceptions=True)
        assert all(isinstance(e, StackUnavailable) and "closed" in str(e) for e in res), res
        assert s.conns == 1
        assert c._http._idle == []


# -- held when tried (kept: cheap, and each guards a promise of the module) ---------------------

async def test_an_answer_trickled_byte_by_byte_still_ends_at_the_deadline():
    """Every read gets a byte well within the per-read timeout: only the deadline can end it."""
    async def h(r, w, n):
        await read_req(r)
        for b in ok(b"x" * 10_000):
            w.write(bytes([b]))
            await w.drain()
            await asyncio.sleep(0.01)
    async with Srv(h) as s, StackClient(s.url, timeout=5.0, total_timeout=0.5) as c:
        with pytest.raises(StackUnavailable, match="deadline"):  # not the per-read timeout's message
            await c.health()


async def test_pool_waits_that_time_out_or_are_cancelled_give_every_slot_back():
    """Stack hangs: requests above ``max_connections`` time out waiting for the pool or are
    cancelled by their deadline; once Stack heals all slots are free again."""
    healed = asyncio.Event()

    async def h(r, w, n):
        while True:
            await read_req(r)
            if not healed.is_set():
                await asyncio.sleep(30)
            w.write(ok())
            await w.drain()
    async with Srv(h) as s, StackClient(s.url, timeout=0.3, total_timeout=10.0, max_connections=2) as c:
        res = await asyncio.gather(*(c.health() for _ in range(6)), return_exceptions=True)
        assert all(isinstance(e, StackUnavailable) for e in res)
        assert any("PoolTimeout" in str(e) for e in res)
        c.timeout, c.total_timeout = 10.0, 0.3  # now the deadline cancels the pool waits
        res = await asyncio.gather(*(c.health() for _ in range(6)), return_exceptions=True)
        assert all(isinstance(e, StackUnavailable) for e in res)
        healed.set()
        c.total_timeout = 10.0
        assert await asyncio.gather(*(c.health() for _ in range(6))) == [None] * 6
        assert c._http._slots._value == 2


async def test_a_request_cancelled_mid_answer_never_leaves_its_connection_to_the_next():
    async def h(r, w, n):
        if n == 1:
            await read_req(r)
            w.write(b'HTTP/1.1 200 OK\r\nContent-Length: 20\r\n\r\n{"half":')
            await w.drain()
            await asyncio.sleep(1)
            w.write(b'1}        ')
        await keep_answering(r, w, b'{"next":2}')
    async with Srv(h) as s, StackClient(s.url, timeout=5.0, total_timeout=0.3) as c:
        with pytest.raises(StackUnavailable, match="deadline"):
            await c.startup("a")
        c.total_timeout = 5.0
        assert await c.startup("b") == {"next": 2}
        assert s.conns == 2


@pytest.mark.parametrize("framing", ["chunked", "content-length"])
async def test_an_answer_larger_than_the_cap_fails_fast_and_holds_no_more(monkeypatch, framing):
    """A Stack that sends a runaway answer (an endless chunked body, or a huge Content-Length)
    must not grow the sidecar's memory until the deadline (the breaker saw ~1 GB in 2 s): past
    ``MAX_ANSWER_BYTES`` the request fails as Stack unavailable, naming the cap, long before
    its deadline, and the connection is not pooled."""
    from sidecar.stack import http11

    monkeypatch.setattr(http11, "MAX_ANSWER_BYTES", 1 << 20)
    chunk = b"x" * 65536

    async def runaway(r, w, n):
        await read_req(r)
        if framing == "chunked":
            w.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
            while True:
                w.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                await w.drain()
        w.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % (1 << 30))
        while True:
            w.write(chunk)
            await w.drain()

    async with Srv(runaway) as srv:
        c = StackClient(srv.url, timeout=30.0)
        with pytest.raises(StackUnavailable, match="larger than 1048576 bytes"):  # the cap ended it,
            await c.startup("g-tu-1")  # not the 60 s deadline (its message says "deadline")
        assert c._http._idle == []  # type: ignore[union-attr]
        await c.close()


async def test_the_httpx_path_caps_an_answer_too(monkeypatch):
    """The https path (httpx) reads the body as a stream under the same cap."""
    import httpx

    from sidecar.stack import http11

    monkeypatch.setattr(http11, "MAX_ANSWER_BYTES", 1 << 20)

    async def two_mib():
        for _ in range(32):
            yield b"x" * 65536

    def big(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=two_mib())  # streamed, 64 KiB at a time

    c = StackClient("https://stack.example", transport=httpx.MockTransport(big))
    with pytest.raises(StackUnavailable, match="larger than 1048576 bytes"):
        await c.startup("g-tu-1")
    small = StackClient("https://stack.example", transport=httpx.MockTransport(
        lambda req: httpx.Response(200, json={"favorites": [], "history": []})))
    assert (await small.startup("g-tu-1"))["favorites"] == []
    await c.close()
    await small.close()
