"""The h11 path of an ``http`` Stack (sidecar.stack.http11): a server that closes a kept-alive
connection after each answer, and one that accepts and never answers."""
from __future__ import annotations

import socket
import threading

import pytest

from sidecar.stack.client import StackClient
from sidecar.stack.errors import StackUnavailable
from sidecar.stack.http11 import H11Pool


def _server(answer: bool) -> tuple[socket.socket, threading.Event, list[int]]:
    """Answers each request 200 and closes the connection WITHOUT ``Connection: close`` (the
    client believes it kept-alive) — or, ``answer=False``, reads and never answers."""
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
    return srv, stop, accepted


async def test_a_closed_kept_alive_connection_is_replaced_and_the_request_succeeds():
    srv, stop, accepted = _server(answer=True)
    async with StackClient(f"http://127.0.0.1:{srv.getsockname()[1]}", timeout=2.0) as c:
        assert isinstance(c._http, H11Pool)
        for i in range(3):
            assert (await c.send("PUT", "/v1/p", b"{}", f"k{i}")).status == 200
    assert accepted[0] == 3
    stop.set()
    srv.close()


async def test_a_server_that_never_answers_hits_the_total_deadline():
    srv, stop, _ = _server(answer=False)
    async with StackClient(f"http://127.0.0.1:{srv.getsockname()[1]}", timeout=5.0,
                           total_timeout=0.5) as c:
        with pytest.raises(StackUnavailable, match="deadline"):
            await c.send("POST", "/v1/tus/t/tasks", b"{}", "k")
    stop.set()
    srv.close()


async def test_a_read_timeout_names_its_phase():
    srv, stop, _ = _server(answer=False)
    async with StackClient(f"http://127.0.0.1:{srv.getsockname()[1]}", timeout=0.3,
                           total_timeout=10.0) as c:
        with pytest.raises(StackUnavailable, match=r"timeout \(ReadTimeout\)") as ei:
            await c.health()
        assert ei.value.status is None
    stop.set()
    srv.close()
