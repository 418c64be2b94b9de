"""The h11 path of an ``http`` Stack (sidecar.stack.http11): a server that closes a kept-alive
connection after each answer, and one that accepts and never answers."""
from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from sidecar.stack.client import StackClient
from sidecar.stack.errors import StackUnavailable
from sidecar.stack.http11 import H11Pool


@contextmanager
def _server(answer: bool) -> Iterator[tuple[str, list[int]]]:
    """Answers each request 200 and closes the connection WITHOUT ``Connection: close`` (the
    client believes it kept-alive) — or, ``answer=False``, reads and never answers.  Yields the
    base URL and the count of accepted connections; stopped and closed on exit."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    stop, accepted = threading.Event(), [0]

    def serve() -> None:
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                continue
            accepted[0] += 1
            conn.recv(65536)
            if answer:
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
            else:
                stop.wait()
            conn.close()
    threading.Thread(target=serve, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{srv.getsockname()[1]}", accepted
    finally:
        stop.set()
        srv.close()


async def test_a_closed_kept_alive_connection_is_replaced_and_the_request_succeeds():
    with _server(answer=True) as (url, accepted):
        async with StackClient(url, timeout=2.0) as c:
            assert isinstance(c._http, H11Pool)
            for i in range(3):
                assert (await c.send("PUT", "/v1/p", b"{}", f"k{i}")).status == 200
        assert accepted[0] == 3


async def test_a_server_that_never_answers_hits_the_total_deadline():
    with _server(answer=False) as (url, _):
        async with StackClient(url, timeout=5.0, total_timeout=0.5) as c:
            with pytest.raises(StackUnavailable, match="deadline"):
                await c.send("POST", "/v1/tus/t/tasks", b"{}", "k")


async def test_a_read_timeout_names_its_phase():
    with _server(answer=False) as (url, _):
        async with StackClient(url, timeout=0.3, total_timeout=10.0) as c:
            with pytest.raises(StackUnavailable, match=r"timeout \(ReadTimeout\)") as ei:
                await c.health()
            assert ei.value.status is None
