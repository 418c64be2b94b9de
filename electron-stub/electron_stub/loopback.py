"""One loopback HTTP server in a thread: the start/stop shared by the reference Stack
(:mod:`electron_stub.stack_server`), the webhook/Telegram receivers
(:mod:`electron_stub.receivers`) and the tests' Stack stand-in (``tests/stack/fake_stack.py``).

Rules / theory of operation
---------------------------
* :meth:`LoopbackServer.start` binds ``127.0.0.1`` (port 0: a free one; or a given port, reused
  at once so a stopped server can come back on the same port) and serves from a daemon thread;
  each connection gets its own daemon handler thread (HTTP/1.1 keep-alive is the handler's).
* A client that goes away mid-request is not an error of a loopback fake: the sidecar is killed
  by a scenario's ``crash`` line, by a test, or gives up on a slow answer (its timeout) and
  closes the connection — the answer written afterwards meets a broken pipe or a reset.  Those
  (``ConnectionError``, ``TimeoutError``, and any ``OSError``/``ValueError`` on a socket that
  :meth:`stop` closed) are counted in :attr:`LoopbackServer.clients_gone` and print nothing.
  Any other exception in a handler is a bug of the fake: socketserver's traceback is printed as
  before *and* it is kept in :attr:`LoopbackServer.errors`, so a test can fail on it.
* :meth:`stop` ends everything it started before it returns: the listener is closed, every open
  connection is shut (a client sees it closed, a handler blocked on a keep-alive read wakes),
  then handlers waiting in :meth:`pause` (injected latency) wake — their answer meets the shut
  socket and is dropped, never delivered late — and the handler threads are
  joined (bounded by ``join_s``).  So no handler thread of a stopped server writes to stderr
  later — formerly a delayed answer woke after its test had ended and printed
  "Exception occurred during processing of request" into the middle of another test's output.
"""
from __future__ import annotations

import socket
import sys
import threading
import time
import traceback
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

__all__ = ["LoopbackServer", "CLIENT_GONE"]

#: what a handler meets when its client went away (broken pipe, reset, aborted) or timed out
CLIENT_GONE: tuple[type[BaseException], ...] = (ConnectionError, TimeoutError)


class LoopbackServer(ThreadingHTTPServer):
    """A ``ThreadingHTTPServer`` on 127.0.0.1 with a clean stop (see the module header).
    ``handler``: the request handler class (its ``server`` attribute is this object)."""

    daemon_threads = True
    block_on_close = False  # stop() joins its own threads, with a bound
    allow_reuse_address = True

    def __init__(self, handler: type[BaseHTTPRequestHandler], *, port: int = 0, name: str = "loopback",
                 poll_interval: float = 0.05) -> None:
        super().__init__(("127.0.0.1", port), handler)
        self.name = name
        self.poll_interval = poll_interval
        self.clients_gone = 0  # requests whose client went away before the answer was written
        self.errors: list[str] = []  # tracebacks of handler bugs (never a client that went away)
        self._halt = threading.Event()  # stop() began
        self._wake = threading.Event()  # paused handlers wake (after their connections are shut)
        self._lock = threading.Lock()
        self._conns: dict[socket.socket, threading.Thread] = {}
        self._serve_thread: threading.Thread | None = None

    # ---- lifecycle --------------------------------------------------------------------------

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> "LoopbackServer":
        self._serve_thread = threading.Thread(target=self.serve_forever, kwargs={"poll_interval": self.poll_interval},
                                              name=self.name, daemon=True)
        self._serve_thread.start()
        return self

    @property
    def stopping(self) -> bool:
        return self._halt.is_set()

    def pause(self, seconds: float) -> None:
        """Sleep ``seconds`` in a handler (injected latency or a delay) — cut short by :meth:`stop`."""
        self._wake.wait(seconds)

    def stop(self, join_s: float = 2.0) -> None:
        """Stop serving, close the listener and every connection, wake paused handlers and join
        the handler threads (each within ``join_s`` seconds at most).  Idempotent."""
        if self._halt.is_set():
            return
        self._halt.set()
        if self._serve_thread is not None:
            self.shutdown()  # serve_forever returns (within poll_interval)
            self._serve_thread.join(join_s)
        self.server_close()  # the listener: new connections are refused
        with self._lock:
            open_now = list(self._conns.items())
        for conn, _ in open_now:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # already closed by its handler
        self._wake.set()  # after the shutdowns: a delayed answer meets a closed socket, never a client
        end = time.monotonic() + join_s
        for _, t in open_now:
            t.join(max(0.0, end - time.monotonic()))

    # ---- socketserver hooks -----------------------------------------------------------------

    def process_request(self, request, client_address) -> None:  # type: ignore[override]
        t = threading.Thread(target=self.process_request_thread, args=(request, client_address),
                             name=f"{self.name}-conn", daemon=True)
        with self._lock:
            self._conns[request] = t
        t.start()

    def shutdown_request(self, request) -> None:  # type: ignore[override]
        with self._lock:
            self._conns.pop(request, None)
        super().shutdown_request(request)

    def handle_error(self, request, client_address) -> None:  # type: ignore[override]
        exc = sys.exc_info()[1]
        if isinstance(exc, CLIENT_GONE) or (self._halt.is_set() and isinstance(exc, (OSError, ValueError))):
            with self._lock:
                self.clients_gone += 1
            return
        with self._lock:
            self.errors.append(traceback.format_exc())
        super().handle_error(request, client_address)  # a bug of the fake: say so, as socketserver does
