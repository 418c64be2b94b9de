"""BridgeServer + BridgeClient over a real loopback websocket."""
import asyncio
import json
import logging

import pytest
import websockets
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from bridge import (
    AnswerTooLarge,
    BridgeClient,
    BridgeServer,
    InvalidParams,
    MethodNotFound,
    NotConnected,
    RemoteError,
    RequestTimeout,
)
from tests.waits import HANDSHAKE_S

TOKEN = "s3cret-token"
AUTH = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "auth", "params": {"token": TOKEN, "client": "raw"}})


class _OwnError(Exception):
    """A handler's exception that knows its error object (bridge.errors.ErrorObject), as the
    sidecar's SidecarError does — the bridge imports nothing of it."""

    def error_object(self):
        return -32602, str(self), {"field": "name"}


class App:
    """A handler like sidecar/app/root.py's: records what it handles, in order."""

    def __init__(self):
        self.server: BridgeServer | None = None
        self.handled: list = []

    async def __call__(self, method, params):
        self.handled.append((method, params))
        if method == "echo":
            return params
        if method == "record":
            return None
        if method == "emit":
            for i in range(params["n"]):
                self.server.notify("task.created", {"i": i})
            return {"emitted": params["n"]}
        if method == "ask":
            return await self.server.request("platform.request", params, timeout=2)
        if method == "ask.two":
            first = self.server.request("platform.request", {"n": 1}, timeout=2)
            second = self.server.request("platform.request", {"n": 2}, timeout=2)
            return list(await asyncio.gather(first, second))
        if method == "bad.params":
            raise InvalidParams("tu is required", data={"field": "tu"})
        if method == "boom":
            raise RuntimeError("kaboom")
        if method == "own.error":
            raise _OwnError("name: exists")
        if method == "peer.error":
            raise RemoteError(-32602, "the peer's")
        if method == "unencodable":
            return object()
        raise MethodNotFound(f"unknown method {method}")


@pytest.fixture
async def start():
    """Factory: start a BridgeServer around a fresh App; everything is closed at teardown."""
    servers, clients = [], []

    async def _start(**kwargs):
        app = App()
        for wait in ("open_timeout", "auth_timeout"):  # not this test's subject: tests/waits.py
            kwargs.setdefault(wait, HANDSHAKE_S)
        server = BridgeServer(TOKEN, app, **kwargs)
        app.server = server
        servers.append(server)
        return server, app, await server.start()

    _start.clients = clients
    yield _start
    for client in clients:
        await client.close()
    for server in servers:
        await server.close(grace=0.5)


async def connect(start, port, **kwargs):
    client = await BridgeClient.connect(port, TOKEN, **kwargs)
    start.clients.append(client)
    return client


async def raw_authed(port):
    ws = await ws_connect(f"ws://127.0.0.1:{port}/", open_timeout=HANDSHAKE_S, compression=None, proxy=None)
    await ws.send(AUTH)
    hello = json.loads(await ws.recv())
    assert hello["id"] == 1 and len(hello["result"].pop("stream_id")) == 16
    assert hello == {"jsonrpc": "2.0", "id": 1, "result": {"ok": True, "protocol": "1.0", "capabilities": [],
                                                           "last_seq": 0}}
    return ws


async def eventually(predicate, timeout=2.0):
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.005)


# ---- auth and handshake --------------------------------------------------------------------


async def test_auth_ok(start):
    server, _, port = await start()
    assert port > 0 and server.port == port
    client = await connect(start, port, client="electron", version="9.9")
    assert client.hello == {"ok": True, "protocol": "1.0", "capabilities": [], "last_seq": 0,
                            "stream_id": server.stream_id}
    assert server.connected
    assert (server.client.client, server.client.version) == ("electron", "9.9")
    assert await client.call("echo", {"a": [1, 2]}) == {"a": [1, 2]}


async def test_versioned_auth_gets_the_servers_protocol_and_capabilities(start):
    server, _, port = await start(protocol="1.3", capabilities=("platform.requests", "logs"))
    async with ws_connect(f"ws://127.0.0.1:{port}/", open_timeout=HANDSHAKE_S, proxy=None) as ws:
        await ws.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "auth", "params": {
            "token": TOKEN, "protocol": "1.7", "capabilities": ["platform.requests"]}}))
        answer = json.loads(await ws.recv())["result"]
        assert (answer["protocol"], answer["capabilities"]) == ("1.3", ["platform.requests", "logs"])
        assert server.client.capabilities == ["platform.requests"] and server.client.protocol == "1.7"


@pytest.mark.parametrize("protocol", ["2.0", "0.9", "1", "one", 1, None])
async def test_unsupported_major_gets_error_then_4426(start, protocol):
    server, app, port = await start(protocol="1.3")
    async with ws_connect(f"ws://127.0.0.1:{port}/", open_timeout=HANDSHAKE_S, proxy=None) as ws:
        await ws.send(json.dumps({"jsonrpc": "2.0", "id": 4, "method": "auth",
                                  "params": {"token": TOKEN, "protocol": protocol}}))
        error = json.loads(await ws.recv())["error"]
        assert error["code"] == -32602 and error["data"] == {"field": "protocol", "supported": ["1.3"]}
        assert "1.3" in error["message"]
        with pytest.raises(ConnectionClosed) as info:
            await ws.recv()
        assert (info.value.rcvd.code, info.value.rcvd.reason) == (4426, "unsupported protocol")
    assert app.handled == [] and not server.connected


async def test_unsupported_major_with_a_wrong_token_is_4401(start):
    """The token is checked first: a stranger learns nothing of the versions."""
    _, _, port = await start()
    async with ws_connect(f"ws://127.0.0.1:{port}/", open_timeout=HANDSHAKE_S, proxy=None) as ws:
        await ws.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "auth",
                                  "params": {"token": "guess", "protocol": "9.0"}}))
        assert json.loads(await ws.recv())["error"]["code"] == -32001


async def test_wrong_token_gets_error_then_4401_and_server_keeps_serving(start):
    _, _, port = await start()
    async with ws_connect(f"ws://127.0.0.1:{port}/", open_timeout=HANDSHAKE_S, proxy=None) as ws:
        await ws.send(AUTH.replace(TOKEN, "guess"))
        assert json.loads(await ws.recv()) == {
            "jsonrpc": "2.0", "id": 1, "error": {"code": -32001, "message": "wrong token"}}
        with pytest.raises(ConnectionClosed) as info:
            await ws.recv()
        assert (info.value.rcvd.code, info.value.rcvd.reason) == (4401, "unauthorized")
    with pytest.raises(RemoteError) as refused:
        await BridgeClient.connect(port, "guess")
    assert refused.value.code == -32001
    client = await connect(start, port)
    assert await client.call("echo", {}) == {}


async def test_first_frame_not_auth_gets_4401(start):
    server, app, port = await start()
    async with ws_connect(f"ws://127.0.0.1:{port}/", open_timeout=HANDSHAKE_S, proxy=None) as ws:
        await ws.send('{"jsonrpc":"2.0","id":5,"method":"status"}')
        assert json.loads(await ws.recv()) == {"jsonrpc": "2.0", "id": 5, "error": {
            "code": -32001, "message": "first frame must be an auth request, got 'status'"}}
        with pytest.raises(ConnectionClosed) as info:
            await ws.recv()
        assert info.value.rcvd.code == 4401
    assert app.handled == [] and not server.connected


async def test_auth_timeout_closes_4408(start):
    _, _, port = await start(auth_timeout=0.2)
    async with ws_connect(f"ws://127.0.0.1:{port}/", open_timeout=HANDSHAKE_S, proxy=None) as ws:
        with pytest.raises(ConnectionClosed) as info:
            async with asyncio.timeout(2):
                await ws.recv()
        assert (info.value.rcvd.code, info.value.rcvd.reason) == (4408, "auth timeout")


async def test_browser_origin_refused_with_403_unless_allowed(start):
    _, _, port = await start(allowed_origins=("app://operator",))
    with pytest.raises(InvalidStatus) as info:
        await BridgeClient.connect(port, TOKEN, origin="https://evil.example")
    assert info.value.response.status_code == 403
    assert b"Origin 'https://evil.example' is not allowed" in info.value.response.body
    client = await connect(start, port, origin="app://operator")
    assert client.hello["ok"] is True


async def test_non_loopback_host_refused_with_403(start):
    _, _, port = await start()
    with pytest.raises(InvalidStatus) as info:
        await ws_connect(f"ws://rebind.example:{port}/", open_timeout=HANDSHAKE_S, host="127.0.0.1", port=port, proxy=None)
    assert info.value.response.status_code == 403
    async with ws_connect(f"ws://localhost:{port}/", open_timeout=HANDSHAKE_S, host="127.0.0.1", port=port, proxy=None) as ws:
        await ws.send(AUTH)
        assert json.loads(await ws.recv())["result"]["ok"] is True


def test_bind_is_loopback_only():
    with pytest.raises(ValueError):
        BridgeServer(TOKEN, App(), host="0.0.0.0")
    with pytest.raises(ValueError):
        BridgeServer("", App())


# ---- malformed frames and handler errors -----------------------------------------------------


async def test_malformed_json_gets_parse_error_and_connection_stays_up(start):
    _, app, port = await start()
    async with await raw_authed(port) as ws:
        await ws.send("{nope")
        reply = json.loads(await ws.recv())
        assert reply["id"] is None and reply["error"]["code"] == -32700
        assert reply["error"]["message"].startswith("parse error: ")
        await ws.send('{"jsonrpc":"2.0","id":2,"method":"echo","params":{"x":1}}')
        assert json.loads(await ws.recv()) == {"jsonrpc": "2.0", "id": 2, "result": {"x": 1}}
    assert app.handled == [("echo", {"x": 1})]


async def test_invalid_envelope_gets_invalid_request(start):
    _, app, port = await start()
    async with await raw_authed(port) as ws:
        await ws.send('{"jsonrpc":"2.0","id":7,"method":5}')
        reply = json.loads(await ws.recv())
        assert (reply["id"], reply["error"]["code"]) == (7, -32600)
        await ws.send('[{"jsonrpc":"2.0","id":8,"method":"echo"}]')
        reply = json.loads(await ws.recv())
        assert (reply["id"], reply["error"]["code"]) == (None, -32600)
        await ws.send('{"jsonrpc":"2.0","id":9,"method":"auth","params":{"token":"x"}}')
        assert json.loads(await ws.recv()) == {"jsonrpc": "2.0", "id": 9, "error": {
            "code": -32600, "message": "already authenticated"}}
    assert app.handled == []


async def test_unknown_method_bad_params_and_handler_crash(start, caplog):
    _, _, port = await start()
    client = await connect(start, port)
    with pytest.raises(RemoteError) as info:
        await client.call("no.such.method", {})
    assert (info.value.code, info.value.message) == (-32601, "unknown method no.such.method")
    with pytest.raises(RemoteError) as info:
        await client.call("bad.params", {})
    assert (info.value.code, info.value.message, info.value.data) == (-32602, "tu is required", {"field": "tu"})
    with caplog.at_level(logging.ERROR, "bridge.server"):
        with pytest.raises(RemoteError) as info:
            await client.call("boom")
    assert (info.value.code, info.value.message) == (-32603, "RuntimeError: kaboom")
    assert "handler for boom raised" in caplog.text and "kaboom" in caplog.text
    with pytest.raises(RemoteError) as info:
        await client.call("unencodable")
    assert info.value.code == -32603 and info.value.message.startswith("result not encodable")
    assert await client.call("echo", {"alive": True}) == {"alive": True}


async def test_a_handler_error_with_its_own_error_object_is_answered_with_it(start):
    """One mapping (bridge.errors.as_rpc_error): the handler's exception says its code and
    data.field; a peer's error that escapes a handler is still -32603, never the peer's code."""
    _, _, port = await start()
    client = await connect(start, port)
    with pytest.raises(RemoteError) as info:
        await client.call("own.error", {})
    assert (info.value.code, info.value.message, info.value.data) == (-32602, "name: exists", {"field": "name"})
    with pytest.raises(RemoteError) as info:
        await client.call("peer.error", {})
    assert (info.value.code, info.value.message) == (-32603, "RemoteError: -32602: the peer's")


async def test_an_oversized_frame_gets_a_jsonrpc_error_and_the_connection_lives(start):
    """docs/decisions.md "Oversized frames": over ``max_frame`` → -32600 with the request's id
    (null for anything else), nothing reaches the handler; the connection stays up."""
    _, app, port = await start(max_frame=1024)
    client = await connect(start, port)
    with pytest.raises(RemoteError) as info:
        await client.call("echo", {"blob": "x" * 2000})
    assert info.value.code == -32600 and "1024" in info.value.message and "bytes" in info.value.message
    await client.notify("echo", {"blob": "y" * 2000})  # a notification: dropped, answered with id null
    assert await client.call("echo", {"alive": True}) == {"alive": True}
    assert app.handled == [("echo", {"alive": True})]
    await client.close()


async def test_a_frame_over_the_hard_limit_still_closes_1009(start):
    """Past ``hard_frame`` (16 × max_frame) websockets refuses to buffer it: close 1009."""
    _, app, port = await start(max_frame=1024, hard_frame=4096)
    client = await connect(start, port)
    with pytest.raises(NotConnected):
        await client.call("echo", {"blob": "x" * 5000})
    await client.wait_closed()
    assert client.close_code == 1009
    assert app.handled == []


async def test_absent_params_reach_the_handler_as_empty_object(start):
    _, app, port = await start()
    client = await connect(start, port)
    assert await client.call("echo") == {}
    assert app.handled == [("echo", {})]


# ---- ordering and correlation ---------------------------------------------------------------


async def test_500_notifications_handled_in_arrival_order_with_backpressure(start):
    _, app, port = await start(queue_size=8)
    client = await connect(start, port)
    for i in range(500):
        await client.notify("record", {"i": i})
    assert await client.call("echo", {"last": True}) == {"last": True}
    assert app.handled[:-1] == [("record", {"i": i}) for i in range(500)]


async def test_response_follows_the_notifications_its_handler_emitted(start):
    _, _, port = await start()
    got = []
    client = await connect(start, port, on_notification=lambda m, p: got.append((m, p)))
    assert await client.call("emit", {"n": 3}) == {"emitted": 3}
    assert got == [("task.created", {"i": 0, "seq": 1}), ("task.created", {"i": 1, "seq": 2}),
                   ("task.created", {"i": 2, "seq": 3})]


async def test_handler_request_is_answered_by_on_request(start):
    _, _, port = await start()

    async def on_request(method, params):
        return {"method": method, "answer": params["q"] * 2}

    client = await connect(start, port, on_request=on_request)
    assert await client.call("ask", {"q": 21}) == {"method": "platform.request", "answer": 42}


async def test_two_outstanding_requests_answered_out_of_order(start):
    _, _, port = await start()
    second_answered = asyncio.Event()
    order = []

    async def on_request(method, params):
        if params["n"] == 1:
            await second_answered.wait()
        order.append(params["n"])
        if params["n"] == 2:
            asyncio.get_running_loop().call_soon(second_answered.set)
        return {"n": params["n"]}

    client = await connect(start, port, on_request=on_request)
    assert await client.call("ask.two") == [{"n": 1}, {"n": 2}]
    assert order == [2, 1]


async def test_request_errors_timeout_and_not_connected(start):
    server, _, port = await start()
    with pytest.raises(NotConnected):
        await server.request("platform.request", {})
    hang = asyncio.Event()

    async def on_request(method, params):
        if params.get("mode") == "hang":
            await hang.wait()
        if params.get("mode") == "http500":
            raise RemoteError(-32050, "http 500", {"status": 500})
        if params.get("mode") == "bug":
            raise ValueError("oops")
        return "ok"

    client = await connect(start, port, on_request=on_request)
    with pytest.raises(RequestTimeout):
        await server.request("platform.request", {"mode": "hang"}, timeout=0.2)
    with pytest.raises(RemoteError) as info:
        await server.request("platform.request", {"mode": "http500"})
    assert (info.value.code, info.value.message, info.value.data) == (-32050, "http 500", {"status": 500})
    with pytest.raises(RemoteError) as info:
        await server.request("platform.request", {"mode": "bug"})
    assert (info.value.code, info.value.message) == (-32603, "ValueError: oops")
    assert await server.request("platform.request", {}) == "ok"
    pending = asyncio.create_task(server.request("platform.request", {"mode": "hang"}, timeout=5))
    await asyncio.sleep(0.05)
    await client.close()
    with pytest.raises(NotConnected):
        await pending
    with pytest.raises(NotConnected):
        await server.request("platform.request", {})


async def test_client_without_on_request_answers_method_not_found(start):
    server, _, port = await start()
    await connect(start, port)
    with pytest.raises(RemoteError) as info:
        await server.request("platform.request", {})
    assert info.value.code == -32601


# ---- resumable stream ------------------------------------------------------------------------


async def test_stream_resumes_after_the_last_ack(start):
    server, _, port = await start()
    first = []
    client = await connect(start, port, ack_every=1000, ack_delay=60,
                           on_notification=lambda m, p: first.append(p["seq"]))
    assert [server.notify("task.created", {"n": n}) for n in range(1, 11)] == list(range(1, 11))
    await client.call("echo", {})
    assert first == list(range(1, 11))
    assert await client.call("stream.ack", {"seq": 4}) == {"ok": True}
    assert [f.seq for f in server.stream.unacked()] == list(range(5, 11))
    await client.close()
    await eventually(lambda: not server.connected)
    second = []
    client = await connect(start, port, on_notification=lambda m, p: second.append((m, p)))
    assert client.hello == {"ok": True, "protocol": "1.0", "capabilities": [], "last_seq": 10, "stream_id": server.stream_id}
    await client.call("echo", {})
    assert second == [("task.created", {"n": n, "seq": n}) for n in range(5, 11)]
    server.notify("task.closed", {"n": 11})
    server.notify("task.closed", {"n": 12})
    await client.call("echo", {})
    assert [p["seq"] for _, p in second] == list(range(5, 13))
    assert await client.ack() == 12
    assert len(server.stream) == 0


async def test_an_impossible_ack_is_refused_naming_seq_and_changes_nothing(start, caplog):
    server, _, port = await start()
    ws = await raw_authed(port)
    try:
        server.notify("task.created", {})
        server.notify("task.created", {})
        assert [json.loads(await ws.recv())["params"]["seq"] for _ in range(2)] == [1, 2]
        for seq in (3, -1, 2**63):
            await ws.send(json.dumps({"jsonrpc": "2.0", "id": 5, "method": "stream.ack", "params": {"seq": seq}}))
            error = json.loads(await ws.recv())["error"]
            assert (error["code"], error["data"]) == (-32602, {"field": "seq"}), seq
        with caplog.at_level(logging.WARNING, "bridge.server"):
            for _ in range(3):  # the notification form: logged once, nothing else
                await ws.send('{"jsonrpc":"2.0","method":"stream.ack","params":{"seq":9}}')
            await ws.send('{"jsonrpc":"2.0","id":6,"method":"stream.ack","params":{"seq":1}}')
            assert json.loads(await ws.recv()) == {"jsonrpc": "2.0", "id": 6, "result": {"ok": True}}
        assert [r.getMessage() for r in caplog.records if "stream.ack" in r.getMessage()] == [
            "ignored stream.ack: seq 9 is beyond the last issued seq 2 (further ones of this connection are not logged)"]
        assert [f.seq for f in server.stream.unacked()] == [2] and server.stream.acked_seq == 1
        await ws.send('{"jsonrpc":"2.0","id":7,"method":"stream.ack","params":{"seq":0}}')  # old: harmless
        assert json.loads(await ws.recv())["result"] == {"ok": True} and server.stream.acked_seq == 1
    finally:
        await ws.close()


async def test_client_batches_acks(start):
    server, _, port = await start()
    got = []
    await connect(start, port, ack_every=64, ack_delay=0.02, on_notification=lambda m, p: got.append(p["seq"]))
    for n in range(200):
        server.notify("task.created", {"n": n})
    await eventually(lambda: server.stream.acked_seq == 200)
    assert got == list(range(1, 201))
    assert len(server.stream) == 0


async def test_client_skips_frames_it_has_already_seen(start):
    server, _, port = await start()
    for n in range(10):
        server.notify("task.created", {"n": n})
    got = []
    client = await connect(start, port, seen_seq=7, on_notification=lambda m, p: got.append(p["seq"]))
    await client.call("echo", {})
    assert got == [8, 9, 10]


async def test_stream_cap_drops_the_oldest(start):
    server, _, port = await start(stream_limit=5)
    for n in range(8):
        server.notify("task.created", {"n": n})
    assert server.stream.dropped == 3
    got = []
    client = await connect(start, port, on_notification=lambda m, p: got.append(p["seq"]))
    assert client.hello["last_seq"] == 8
    await client.call("echo", {})
    assert got == [4, 5, 6, 7, 8]


async def test_newer_client_replaces_older_with_4409(start):
    server, _, port = await start()
    old = await connect(start, port, client="old")
    new = await connect(start, port, client="new")
    await asyncio.wait_for(old.wait_closed(), 2)
    assert (old.close_code, old.close_reason) == (4409, "replaced by a newer connection")
    assert server.client.client == "new"
    with pytest.raises(NotConnected):
        await old.call("echo", {})
    assert await new.call("echo", {"still": "up"}) == {"still": "up"}


async def test_close_sends_1001(start):
    server, _, port = await start()
    client = await connect(start, port)
    await server.close()
    await asyncio.wait_for(client.wait_closed(), 2)
    assert client.close_code == 1001
    with pytest.raises((OSError, websockets.exceptions.InvalidHandshake)):
        await BridgeClient.connect(port, TOKEN, open_timeout=1)


async def test_malformed_first_frame_gets_4401(start):
    _, _, port = await start()
    async with ws_connect(f"ws://127.0.0.1:{port}/", open_timeout=HANDSHAKE_S, proxy=None) as ws:
        await ws.send("garbage")
        reply = json.loads(await ws.recv())
        assert reply["id"] is None and reply["error"]["code"] == -32001
        assert reply["error"]["message"].startswith("first frame must be an auth request (parse error: ")
        with pytest.raises(ConnectionClosed) as info:
            await ws.recv()
        assert info.value.rcvd.code == 4401


async def test_close_does_not_hang_on_a_full_queue_and_a_stuck_handler(start, caplog):
    release = asyncio.Event()

    async def stuck(method, params):
        await release.wait()

    server = BridgeServer(TOKEN, stuck, queue_size=2)
    port = await server.start()
    client = await connect(start, port)
    for i in range(50):
        await client.notify("record", {"i": i})
    async with asyncio.timeout(30):  # the worker stuck on frame 0, the queue full, the reader waiting:
        while server._queue.qsize() < 2:  # counted, not slept for (issue 18 item 2)
            await asyncio.sleep(0.001)
    with caplog.at_level(logging.INFO, "bridge.server"):
        async with asyncio.timeout(2):
            await server.close(grace=0.1)
    assert "handler still busy after 0.1 s" in caplog.text
    # the refusals of a stop are one line with their count, never one line each (issue 20 item 1)
    refused = [r.getMessage() for r in caplog.records if "refused while stopping" in r.getMessage()]
    assert len(refused) == 1 and refused[0].startswith("bridge close: "), refused
    assert not [r for r in caplog.records if "ShuttingDown" in r.getMessage()]
    await asyncio.wait_for(client.wait_closed(), 2)
    assert client.close_code == 1001


# ---- found by the breaker (issue 7 item 6) ---------------------------------------------------


async def test_inbound_queue_is_capped_in_bytes_not_only_frames(start):
    """1 MB frames behind a busy worker once grew memory to 1 GB: the queue holds at most
    ``queue_bytes`` of raw frames (one frame always fits), then the socket back-pressures."""
    release = asyncio.Event()
    handled: list[int] = []

    async def busy(method, params):
        await release.wait()
        handled.append(params["i"])

    cap, frame = 1 << 20, 200_000
    server = BridgeServer(TOKEN, busy, queue_bytes=cap, max_frame=1 << 21)
    port = await server.start()
    try:
        client = await connect(start, port)
        peak = 0
        sender = asyncio.create_task(_send_big(client, 40, frame))
        async with asyncio.timeout(30):  # until the queue has no room for another frame (it
            while server.queued_bytes <= cap - frame:  # fills: the worker is held), counted, not
                await asyncio.sleep(0.001)  # slept for (issue 18 item 2)
                peak = max(peak, server.queued_bytes)
        for _ in range(20):  # ... and stays there while the sender pushes on
            await asyncio.sleep(0.01)
            peak = max(peak, server.queued_bytes)
        assert 0 < peak <= cap
        release.set()
        await sender
        assert await client.call("x", {"i": -1}) is None
        assert handled == list(range(40)) + [-1]
        assert server.queued_bytes == 0
    finally:
        release.set()
        await server.close(grace=0.5)


async def _send_big(client, n: int, size: int) -> None:
    for i in range(n):
        await client.notify("record", {"i": i, "pad": "x" * size})


async def test_cutting_off_a_client_that_does_not_read_logs_no_concurrency_error(start, caplog):
    """The cut-off used to start a second ``recv()`` beside the reader's: websockets'
    ConcurrencyError traceback in the log."""
    _, _, port = await start(control_limit=64 << 10)
    ws = await raw_authed(port)
    ws.transport.pause_reading()  # stops reading its answers
    big = json.dumps({"jsonrpc": "2.0", "id": 0, "method": "echo", "params": {"pad": "y" * 30_000}})
    with caplog.at_level(logging.DEBUG):
        try:
            for i in range(200):
                await ws.send(big.replace('"id": 0', f'"id": {i + 2}'))
                await asyncio.sleep(0)
        except websockets.exceptions.ConnectionClosed:
            pass
        await eventually(lambda: "disconnected" in caplog.text, timeout=5)
        await asyncio.sleep(0.1)
    ws.transport.abort()
    assert "not reading its answers" in caplog.text
    assert "ConcurrencyError" not in caplog.text and "Traceback" not in caplog.text


# ---- raw params (decode once, sidecar.protocol.methods) ---------------------------------------------


async def test_raw_params_reach_the_handler_undecoded_and_the_bridge_methods_still_work(start):
    """``raw_params=True``: params reach the handler as the frame's own bytes (msgspec.Raw),
    absent ones as ``{}``; scalars are refused as before; ``stream.ack`` is still the bridge's."""
    import msgspec

    server, app, port = await start(raw_params=True)
    async with await raw_authed(port) as ws:
        await ws.send('{"jsonrpc":"2.0","id":2,"method":"record","params":{"tu": "t-1", "n":[1,2]}}')
        assert json.loads(await ws.recv()) == {"jsonrpc": "2.0", "id": 2, "result": None}
        await ws.send('{"jsonrpc":"2.0","id":3,"method":"record"}')
        await ws.recv()
        await ws.send('{"jsonrpc":"2.0","id":4,"method":"record","params":3}')
        reply = json.loads(await ws.recv())
        assert (reply["id"], reply["error"]["code"]) == (4, -32600)
        assert reply["error"]["message"] == "invalid envelope: Expected `object | array`, got `int` - at `$.params`"
        server.notify("task.created", {"n": 1})
        await ws.recv()
        await ws.send('{"jsonrpc":"2.0","id":5,"method":"stream.ack","params":{"seq":1}}')
        assert json.loads(await ws.recv()) == {"jsonrpc": "2.0", "id": 5, "result": {"ok": True}}
    assert len(server.stream) == 0
    assert [m for m, _ in app.handled] == ["record", "record"]
    assert all(isinstance(p, msgspec.Raw) for _, p in app.handled)
    assert [bytes(p) for _, p in app.handled] == [b'{"tu": "t-1", "n":[1,2]}', b"{}"]


async def test_an_oversized_answer_to_our_request_fails_it_at_once(start):
    """F2 (breaker 16): an answer over ``max_frame`` to one of the server's own requests fails
    that request at once with :class:`AnswerTooLarge` naming the size and the cap — it used to
    wait its whole timeout (the id-null error went to the client, the pending request never
    heard of it).  The connection lives; the next request is answered normally."""
    server, _, port = await start(max_frame=1024)

    async def on_request(method, params):
        return {"blob": "x" * params["n"]}

    await connect(start, port, on_request=on_request, max_frame=1 << 20)
    with pytest.raises(AnswerTooLarge) as info:  # at once, not the 30 s timeout (RequestTimeout)
        await server.request("platform.request", {"n": 2000}, timeout=30)
    assert info.value.size > 1024 and info.value.cap == 1024 and "1024" in str(info.value)
    assert await server.request("platform.request", {"n": 10}, timeout=5) == {"blob": "x" * 10}
