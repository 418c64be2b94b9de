"""``StackClient.close()`` is shutdown (sidecar.app.closing; sidecar.stack.http11 rules): on
both paths — h11 for an ``http`` Stack, httpx for an ``https`` one — the exchanges in flight or
queued end at once, named, and nothing is sent after it.  Raw loopback servers, as in
test_client_h11_breaker.py."""
from __future__ import annotations

import asyncio

import pytest

from sidecar.stack.client import StackClient
from sidecar.stack.errors import StackUnavailable
from test_client_h11_breaker import Srv, client_sockets, keep_answering, ok, read_req, stack_client


@pytest.mark.parametrize("path", ["h11", "httpx"])
@pytest.mark.parametrize("where", ["reading", "writing", "reused"])
async def test_close_cuts_the_exchanges_in_flight_at_once(path, where):
    """``close()`` is shutdown (sidecar.app.closing): an exchange in flight — waiting for its
    answer, stuck mid-write to a Stack that stopped reading, or on a reused connection (which
    must not be resent then) — ends at once as Stack unavailable naming the close, not at its
    60 s deadline; no connection is opened for it and none stays open.  (The write it carried
    stays pending in the outbox: tests/app/test_app_shutdown.py.)"""
    arrived = asyncio.Event()

    async def h(r, w, n):
        if where == "writing":
            arrived.set()
            await asyncio.sleep(30)  # never reads: the client's write fills the socket
        if where == "reused":
            await read_req(r)
            w.write(ok())
            await w.drain()
        await read_req(r)
        arrived.set()
        await asyncio.sleep(30)  # sits on it
    body = b"x" * (32 << 20) if where == "writing" else b"{}"
    async with Srv(h) as s:
        c = stack_client(s.url, path, timeout=30.0, total_timeout=60.0)
        if where == "reused":
            await c.health()
        task = asyncio.create_task(c.send("PUT", "/p", body, "k"))
        await arrived.wait()
        await asyncio.sleep(0.05)  # the client is inside its read (or its blocked write)
        await c.close()
        with pytest.raises(StackUnavailable, match="client (is|was) closed"):  # not the deadline's
            await task
        assert s.conns == 1
        for _ in range(20):  # an aborted transport lets go of its socket on a later loop turn
            await asyncio.sleep(0.01)
        assert client_sockets(s.port) == 0


@pytest.mark.parametrize("path", ["h11", "httpx"])
async def test_requests_after_close_fail_as_stack_unavailable_and_open_nothing(path):
    """A request made after ``close()`` is Stack unavailable, named (not httpx's RuntimeError,
    which the pump would log as a channel's bug), and opens no connection."""
    async def h(r, w, n):
        await keep_answering(r, w, b"{}")
    async with Srv(h) as s:
        c = stack_client(s.url, path, timeout=5.0)
        await c.health()
        await c.close()
        with pytest.raises(StackUnavailable, match="client is closed"):
            await c.health()
        assert s.conns == 1


@pytest.mark.parametrize("path", ["h11", "httpx"])
async def test_close_cuts_requests_queued_for_the_pool_and_opens_nothing(path):
    """Both paths: requests waiting for a slot when ``close()`` comes end at once, named, and
    open no connection (httpcore handed a queued request a FRESH connection after its pool was
    closed, which then ran to its read timeout)."""
    arrived = asyncio.Event()

    async def h(r, w, n):
        await read_req(r)
        arrived.set()
        await asyncio.sleep(30)
    async with Srv(h) as s:
        c = stack_client(s.url, path, timeout=3.0, total_timeout=60.0, max_connections=1)
        tasks = [asyncio.create_task(c.health()) for _ in range(3)]
        await arrived.wait()
        await c.close()
        res = await asyncio.gather(*tasks, return_exceptions=True)
        # "closed", not the 3 s pool / read timeout's "timeout (pool)" / "timeout (read)"
        assert all(isinstance(e, StackUnavailable) and "closed" in str(e) for e in res), res
        await asyncio.sleep(0.05)
        assert s.conns == 1


async def test_a_connection_that_completes_its_connect_after_close_sends_nothing(monkeypatch):
    """h11 path: ``close()`` while a request is connecting — the connection is given up as it
    arrives, before a byte of the request is written."""
    real, gate, connecting = asyncio.open_connection, asyncio.Event(), asyncio.Event()

    async def slow_connect(*a, **kw):
        connecting.set()
        await gate.wait()
        return await real(*a, **kw)
    monkeypatch.setattr(asyncio, "open_connection", slow_connect)
    got: list[bytes] = []

    async def h(r, w, n):
        got.append(await r.read(65536))
    async with Srv(h) as s:
        c = StackClient(s.url, timeout=5.0)
        task = asyncio.create_task(c.health())
        await connecting.wait()
        await c.close()
        gate.set()
        with pytest.raises(StackUnavailable, match="client is closed"):
            await task
        for _ in range(20):
            await asyncio.sleep(0.01)
        assert got in ([], [b""])  # the server saw the connection at most, never a byte
