"""A reused kept-alive connection that turns out stale as the request goes out — the server
timed it out just then and answered ``408 Request Timeout`` (RFC 9110 §15.5.9), or closed it
before any answer — is no answer: the request goes once more (sidecar.stack.http11 rules), on
both paths (h11 for an ``http`` Stack, httpx for an ``https`` one).  Raw loopback servers, as in
test_client_h11_breaker.py; each server acts only once the request has arrived (it reads it
whole, so its close is a FIN, not a reset with unread bytes): no race left to the scheduler."""
from __future__ import annotations

import asyncio

import httpx
import pytest

from sidecar.stack.client import StackClient
from sidecar.stack.errors import StackRejected, StackUnavailable
from test_client_h11_breaker import Srv, keep_answering, ok, read_req, stack_client

REQUEST_TIMEOUT = b"HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"


@pytest.mark.parametrize("path,then_close", [("h11", True), ("h11", False), ("httpx", True)],
                         ids=["h11-408+close", "h11-408-kept-open", "httpx-408+close"])
async def test_a_408_on_a_reused_connection_is_a_stale_connection_and_the_request_goes_again(path, then_close):
    """The race the idle check cannot see: the server times the kept-alive connection out and
    writes its 408 just as the client reuses it.  The request goes once more, on a fresh
    connection, and gets that one's answer.  (httpx keeps a 408 that does not say ``Connection:
    close`` in its pool, and would hand it to the resend: a server timing a connection out
    closes it — RFC 9110 §15.5.9 — so that case is h11's only.)"""
    async def h(r, w, n):
        if n == 1:
            await read_req(r)
            w.write(ok())
            await w.drain()
            await read_req(r)  # the next request is here: the server's idle timeout "fired"
            w.write(REQUEST_TIMEOUT if then_close else REQUEST_TIMEOUT.replace(b"Connection: close\r\n", b""))
            await w.drain()
            if not then_close:
                await asyncio.sleep(30)  # neither closes nor answers more
            return
        await keep_answering(r, w, b'{"real":2}')
    async with Srv(h) as s:
        async with stack_client(s.url, path, timeout=2.0) as c:
            await c.send("PUT", "/p", b"{}", "k1")
            assert (await c.send("PUT", "/p", b"{}", "k2")).body == b'{"real":2}'
            assert s.conns == 2
            assert (await c.send("PUT", "/p", b"{}", "k3")).body == b'{"real":2}'  # the fresh one is pooled
            assert s.conns == 2


@pytest.mark.parametrize("path", ["h11", "httpx"])
async def test_a_408_on_a_fresh_connection_is_the_answer_and_the_request_goes_only_once_more(path):
    """A 408 on a connection opened for the request (or for its one resend) is the server's
    answer, mapped as any 4xx (StackRejected 408; the router retries a 408 on its ladder)."""
    async def h(r, w, n):
        if n == 1:
            await read_req(r)
            w.write(ok())
            await w.drain()
        await read_req(r)
        w.write(REQUEST_TIMEOUT)
        await w.drain()
    async with Srv(h) as s:
        async with stack_client(s.url, path, timeout=2.0) as c:
            await c.send("PUT", "/p", b"{}", "k1")
            with pytest.raises(StackRejected) as ei:  # reused: 408 → fresh connection: 408 again
                await c.send("PUT", "/p", b"{}", "k2")
            assert ei.value.status == 408 and s.conns == 2
            with pytest.raises(StackRejected) as ei:  # nothing pooled: a fresh connection's 408
                await c.send("PUT", "/p", b"{}", "k3")
            assert ei.value.status == 408 and s.conns == 3


@pytest.mark.parametrize("path", ["h11", "httpx"])
@pytest.mark.parametrize("again", ["answers", "dies too"])
async def test_a_reused_connection_that_dies_before_its_answer_goes_once_more(path, again):
    """The server closes the kept-alive connection as the request arrives, without a byte of
    answer (it was closing it just then): the request goes once more and gets the fresh
    connection's answer — and if that one dies too, the request is Stack unavailable; no
    third try.  (httpcore drops only an idle connection it sees readable; it resent nothing.)"""
    async def h(r, w, n):
        if n == 1:
            await read_req(r)
            w.write(ok())
            await w.drain()
        if n == 1 or again == "dies too":
            await read_req(r)
            return  # closed, no answer
        await keep_answering(r, w, b'{"real":2}')
    async with Srv(h) as s:
        async with stack_client(s.url, path, timeout=2.0) as c:
            await c.send("PUT", "/p", b"{}", "k1")
            if again == "answers":
                assert (await c.send("PUT", "/p", b"{}", "k2")).body == b'{"real":2}'
            else:
                with pytest.raises(StackUnavailable, match="RemoteProtocolError"):
                    await c.send("PUT", "/p", b"{}", "k2")
            assert s.conns == 2


async def test_a_plugged_transport_s_408_is_always_the_answer():
    """A plugged transport (the tests' MockTransport) traces no connection: it is never resent."""
    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        return httpx.Response(408)
    async with StackClient("https://stack.example", transport=httpx.MockTransport(handler)) as c:
        for key in ("k1", "k2"):
            with pytest.raises(StackRejected) as ei:
                await c.send("PUT", "/p", b"{}", key)
            assert ei.value.status == 408
    assert len(calls) == 2
