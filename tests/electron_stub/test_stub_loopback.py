"""The loopback HTTP server shared by the reference Stack, the receivers and the tests' Stack
stand-in (electron_stub.loopback): a client that leaves is counted, never a traceback; a handler
bug is still printed and kept; stop() leaves no handler thread behind."""
from __future__ import annotations

import socket
import struct
import threading
import time
from http.server import BaseHTTPRequestHandler

import httpx
import pytest

from electron_stub.loopback import LoopbackServer
from electron_stub.receivers import Receivers
from electron_stub.stack_server import StackServer as ReferenceStack
from tests.stack.fake_stack import StackServer as FakeStack
from tests.waits import HANDSHAKE_S


class _Slow(BaseHTTPRequestHandler):
    """Answers after ``server.delay_s`` (paused: cut short by stop), or raises on /bug."""
    protocol_version = "HTTP/1.1"
    server: LoopbackServer

    def do_GET(self) -> None:
        if self.path == "/bug":
            raise KeyError("a bug in the fake")
        self.server.pause(self.server.delay_s)  # type: ignore[attr-defined]
        body = b'{"ok": true}'
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def _server(delay_s: float) -> LoopbackServer:
    s = LoopbackServer(_Slow, name="t-loopback")
    s.delay_s = delay_s  # type: ignore[attr-defined]
    return s.start()


def _send_and_reset(port: int, path: str, wait_for: threading.Event | None = None) -> None:
    """Send a request, then close with RST (SO_LINGER 0), as a killed process's socket does."""
    c = socket.create_connection(("127.0.0.1", port))
    c.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    if wait_for is not None:
        wait_for.wait(5)
    c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    c.close()


def _until(cond, within_s: float = 5.0) -> bool:
    end = time.monotonic() + within_s
    while not cond():
        if time.monotonic() > end:
            return False
        time.sleep(0.01)
    return True


def _conn_threads(name: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == f"{name}-conn" and t.is_alive()]


def test_a_client_that_leaves_before_the_answer_is_counted_not_printed(capfd):
    s = _server(0.3)
    try:
        _send_and_reset(s.port, "/slow")  # the answer is written 0.3 s later, into a reset socket
        assert _until(lambda: s.clients_gone == 1), "the broken pipe was not counted"
    finally:
        s.stop()
    assert s.errors == []
    err = capfd.readouterr().err
    assert "Exception occurred during processing of request" not in err, err


def test_a_handler_bug_is_printed_and_kept(capfd):
    s = _server(0.0)
    try:
        r = httpx.get(f"{s.url}/bug", timeout=5)  # the connection is closed without an answer
    except httpx.HTTPError:
        pass
    finally:
        assert _until(lambda: len(s.errors) == 1)
        s.stop()
    assert "KeyError: 'a bug in the fake'" in s.errors[0]
    assert "Exception occurred during processing of request" in capfd.readouterr().err
    assert s.clients_gone == 0


def test_stop_wakes_delayed_answers_closes_keep_alive_connections_and_joins_every_handler(capfd):
    s = _server(30.0)
    idle = socket.create_connection(("127.0.0.1", s.port))  # a keep-alive connection, idle
    idle.sendall(b"GET /ok HTTP/1.1\r\nHost: x\r\n\r\n")
    waiting = socket.create_connection(("127.0.0.1", s.port))  # its answer is 30 s away
    waiting.sendall(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
    assert _until(lambda: len(_conn_threads("t-loopback")) == 2)
    s.stop()  # not after the 30 s answer: that answer would then reach ``waiting`` (below)
    assert _conn_threads("t-loopback") == []  # nothing of this server runs after stop()
    waiting.settimeout(2)
    try:
        late = waiting.recv(65536)
    except ConnectionResetError:
        late = b""
    assert late == b""  # closed or reset — never the late answer
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", s.port), timeout=1).close()  # the listener is gone
    idle.close()
    waiting.close()
    assert s.errors == []
    assert "Traceback" not in capfd.readouterr().err


@pytest.mark.parametrize("make", [
    lambda: _Started(ReferenceStack(seed=1)),
    lambda: _Started(Receivers(seed=1)),
    lambda: _Started(FakeStack()),
], ids=["reference-stack", "receivers", "fake-stack"])
def test_every_loopback_fake_drops_a_delayed_answer_quietly_when_its_client_leaves(make, capfd, monkeypatch):
    """The three fakes share one server: a slow answer (injected latency / delay) to a client
    that left is counted, prints nothing, and stop() ends the delay at once (the pause says it
    was woken, not timed out: a stopwatch would measure the machine too)."""
    woken: list[bool] = []
    pausing = threading.Event()

    def pause(self, seconds: float) -> None:  # LoopbackServer.pause, recording how it ended
        pausing.set()
        woken.append(self._wake.wait(seconds))

    monkeypatch.setattr(LoopbackServer, "pause", pause)
    f = make()
    try:
        f.slow(30.0)  # the harness's fakes cap it at 2 s
        _send_and_reset(f.port, f.path)
        assert pausing.wait(HANDSHAKE_S)  # the handler is pausing
    finally:
        f.obj.stop()
    assert woken == [True]
    assert _conn_threads(f.thread_name) == []
    err = capfd.readouterr().err
    assert "Exception occurred" not in err and "Traceback" not in err, err


class _Started:
    """Each fake, started, with a way to make its answers slow."""

    def __init__(self, obj) -> None:
        self.obj = obj
        if isinstance(obj, Receivers):
            obj.add_target("hook", "webhook")
            obj.start()
            self.path, self.thread_name = "/hooks/hook", "receivers"
        elif isinstance(obj, ReferenceStack):
            obj.start()
            self.path, self.thread_name = "/v1/tus/t/startup", "stack-server"
        else:
            obj.start()
            self.path, self.thread_name = "/v1/tus/t/startup", "fake-stack"
        self.port = int(obj.url.rsplit(":", 1)[1])

    def slow(self, seconds: float) -> None:
        if isinstance(self.obj, Receivers):
            self.obj.set_fault("hook", "latency", seconds)
        elif isinstance(self.obj, ReferenceStack):
            self.obj.set_fault("latency", seconds)
        else:
            self.obj.fail("delay", seconds=seconds)
