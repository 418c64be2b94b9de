"""StackClient against hostile servers (found by the breaker, then fixed): ids outside ASCII in
the idempotency key, and a Stack that answers one byte at a time."""
from __future__ import annotations

import socket
import threading
import time

import pytest

from sidecar.stack.client import StackClient, header_key
from sidecar.stack.errors import StackUnavailable

from fake_stack import StackServer


def test_header_key_is_ascii_deterministic_and_leaves_ascii_keys_alone():
    assert header_key("followUpChat:g-tu-1:g-ru-1:t-1:0:set") == "followUpChat:g-tu-1:g-ru-1:t-1:0:set"
    k = header_key("followUpChat:tu:rü 1:t-1:0:set")
    assert k.isascii() and k == header_key("followUpChat:tu:rü 1:t-1:0:set")
    assert k != header_key("followUpChat:tu:ru 1:t-1:0:set")
    assert "%25" in header_key("a%b")


async def test_non_ascii_ids_are_sent_and_stay_idempotent(client: StackClient, stack_server: StackServer):
    key = "followUpChat:tu-ü:ru-日本:t-1:0:set"
    first = await client.send("PUT", "/v1/tus/x/favorites/y/markers/followUpChat", b'{"value":null}', key)
    again = await client.send("PUT", "/v1/tus/x/favorites/y/markers/followUpChat", b'{"value":null}', key)
    assert first.status == 200 and again.replayed
    assert len(stack_server.applied) == 1


def _dripping_server() -> tuple[socket.socket, threading.Event]:
    """Accepts, sends a 200 status line, then one byte every 0.3 s (never finishes)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    stop = threading.Event()

    def serve():
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                continue
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n")
            while not stop.is_set():
                try:
                    conn.sendall(b"x")
                except OSError:
                    break
                time.sleep(0.3)
            conn.close()
    threading.Thread(target=serve, daemon=True).start()
    return srv, stop


async def test_a_trickling_answer_hits_the_total_deadline():
    srv, stop = _dripping_server()
    client = StackClient(f"http://127.0.0.1:{srv.getsockname()[1]}", timeout=1.0, total_timeout=1.5)
    # the total deadline's message, not the per-read timeout's, long before the 300 s the 1,000
    # bytes would trickle for (a stopwatch is not asserted: a loaded machine, issue 18)
    with pytest.raises(StackUnavailable, match="deadline"):
        await client.send("POST", "/v1/tus/t/tasks", b"{}", "k")
    await client.close()
    stop.set()
    srv.close()
