"""A real Stack stand-in on loopback for the client and pump tests.

``StackServer`` is an ``http.server`` (HTTP/1.1, keep-alive) in a thread.  It records every request,
honours ``Idempotency-Key`` (a repeated key gets the first answer and changes nothing), serves
``GET /v1/tus/{tu}/startup`` from ``startup``, and can be told to misbehave with :meth:`fail`:
``"down"`` (drop the connection without an answer), ``"delay"`` (answer late), or an HTTP status.
A fault counted with ``times`` that is meant for ONE write is aimed at its ``key`` (the
``Idempotency-Key``), not at a path: the sidecar sends a flush's writes concurrently, and every
task write of a TU shares ``/v1/tus/{tu}/tasks`` — a path-aimed ``times=2`` went to whichever
write the stand-in's threads took first (a flaky test_stack_cadence test, load ~9).  ``before``
lets a test order concurrent requests (it runs in the handler thread, before the fault is
chosen), so both arrival orders are tested rather than left to the scheduler.
:meth:`stop`/:meth:`start` take it off the network for real (connection refused) and back on the
same port.
"""
from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
import socket
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler

from electron_stub.loopback import LoopbackServer


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    peer: tuple
    outcome: str = ""  # "applied" | "replayed" | "fault:<mode>" | "read" | "missing"


@dataclass
class Fault:
    mode: str | int  # "down" | "delay" | HTTP status
    path_contains: str | None = None
    times: int | None = None  # None: until healed
    seconds: float = 0.0  # for "delay"
    key: str | None = None  # only the write with this Idempotency-Key

    def matches(self, seen: "Seen") -> bool:
        return ((self.path_contains is None or self.path_contains in seen.path)
                and (self.key is None or seen.headers.get("idempotency-key") == self.key))


@dataclass
class StackServer:
    requests: list[Seen] = field(default_factory=list)
    applied: list[Seen] = field(default_factory=list)
    answers: dict[str, tuple[int, bytes]] = field(default_factory=dict)
    startup: dict[str, dict] = field(default_factory=dict)
    faults: list[Fault] = field(default_factory=list)
    in_flight: int = 0
    max_in_flight: int = 0
    port: int = 0
    #: called with each request in its handler thread before its fault is chosen (module doc)
    before: Callable[[Seen], None] | None = None

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._httpd: LoopbackServer | None = None
        self.clients_gone = 0  # requests whose client left before the answer (all runs so far)
        self.errors: list[str] = []  # handler bugs (tracebacks), kept across stop/start

    # -- control ------------------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def fail(self, mode: str | int, *, path_contains: str | None = None,
             times: int | None = None, seconds: float = 0.0, key: str | None = None) -> None:
        """Misbehave for requests whose path contains ``path_contains`` and (``key``) whose
        Idempotency-Key is ``key`` — ``times`` of them, or until :meth:`heal`.  Aim a counted
        fault meant for one write at its ``key`` (module doc)."""
        with self._lock:
            self.faults.append(Fault(mode, path_contains, times, seconds, key))

    def heal(self) -> None:
        with self._lock:
            self.faults.clear()

    def writes(self) -> list[Seen]:
        return [r for r in self.requests if r.method in ("PUT", "POST")]

    def start(self) -> None:
        httpd = LoopbackServer(_Handler, port=self.port, name="fake-stack", poll_interval=0.02)
        httpd.stack = self  # type: ignore[attr-defined]
        self.port = httpd.port
        self._httpd = httpd.start()

    def stop(self) -> None:
        """Close the listener and every open connection: clients get refused/reset; a delayed
        answer is dropped and its handler thread has ended when this returns."""
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        httpd.stop()
        self.clients_gone += httpd.clients_gone
        self.errors += httpd.errors

    # -- request handling (server threads) ---------------------------------------------------
    def _handle(self, h: "_Handler") -> None:
        n = int(h.headers.get("Content-Length") or 0)
        body = h.rfile.read(n) if n else b""
        seen = Seen(h.command, h.path, {k.lower(): v for k, v in h.headers.items()}, body,
                    h.client_address)
        if self.before is not None:
            self.before(seen)
        with self._lock:
            self.requests.append(seen)
            fault = self._take_fault(seen)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if fault is not None:
                seen.outcome = f"fault:{fault.mode}"
                if fault.mode == "down":
                    h.close_connection = True
                    return
                if fault.mode == "delay":
                    h.server.pause(fault.seconds)  # cut short by stop()
                else:
                    return _reply(h, int(fault.mode), {"error": f"injected {fault.mode}"})
            if h.command == "GET":
                parts = h.path.split("/")
                if len(parts) == 5 and parts[1:3] == ["v1", "tus"] and parts[4] == "startup" \
                        and parts[3] in self.startup:
                    seen.outcome = "read"
                    return _reply(h, 200, self.startup[parts[3]])
                seen.outcome = "missing"
                return _reply(h, 404, {"error": "not found"})
            key = seen.headers.get("idempotency-key")
            if not key:
                seen.outcome = "missing"
                return _reply(h, 400, {"error": "Idempotency-Key required"})
            with self._lock:
                first = self.answers.get(key)
                if first is None:
                    self.applied.append(seen)
                    status = 200 if h.command == "PUT" else 201
                    first = (status, json.dumps({"ok": True, "seq": len(self.applied)}).encode())
                    self.answers[key] = first
                    seen.outcome = "applied"
                else:
                    seen.outcome = "replayed"
            extra = {"Idempotent-Replayed": "true"} if seen.outcome == "replayed" else {}
            _reply_raw(h, first[0], first[1], extra)
        finally:
            with self._lock:
                self.in_flight -= 1

    def _take_fault(self, seen: Seen) -> Fault | None:
        for f in self.faults:
            if f.matches(seen):
                if f.times is not None:
                    f.times -= 1
                    if f.times <= 0:
                        self.faults.remove(f)
                return f
        return None


def _reply(h: BaseHTTPRequestHandler, status: int, payload: dict) -> None:
    _reply_raw(h, status, json.dumps(payload).encode(), {})


def _reply_raw(h: BaseHTTPRequestHandler, status: int, body: bytes, extra: dict) -> None:
    h.send_response(status)
    h.send_header("Content-Type", "application/json")
    h.send_header("Content-Length", str(len(body)))
    for k, v in extra.items():
        h.send_header(k, v)
    h.end_headers()
    h.wfile.write(body)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body are two writes: no 40 ms delayed-ACK stall
    server: LoopbackServer

    def do_GET(self) -> None:
        self.server.stack._handle(self)  # type: ignore[attr-defined]

    do_PUT = do_POST = do_GET

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def refused_port() -> Iterator[int]:
    """A loopback port that refuses connections while the block runs: bound, never listening.
    Held, so no other test or xdist worker can take it meanwhile (a port freed and hoped to
    stay free could be handed to a parallel sidecar's bind)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield s.getsockname()[1]


def serve() -> Iterator["StackServer"]:
    """A started stand-in for a fixture to ``yield from``: stopped after the test, and the test
    fails if the stand-in itself raised (a bug in the fake must not pass as a sidecar result)."""
    server = StackServer()
    server.start()
    yield server
    server.stop()
    assert server.errors == [], "the Stack stand-in itself failed:\n" + "\n".join(server.errors)
