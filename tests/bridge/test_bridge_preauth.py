"""Before auth a frame is small (DESIGN §3–§4, issue 18 item 5): an unauthenticated connection's
frames are capped at ``auth_frame`` bytes (4 KiB) by websockets itself, which reads the frame
header, closes with 1009 and never buffers the payload; once ``auth`` succeeded the usual caps
(``max_frame`` 1 MiB: -32600, the connection lives; ``hard_frame`` 16 MiB: 1009) apply.  A
connection that never finishes its handshake or its auth frame is closed (``open_timeout`` /
``auth_timeout``), whatever it trickles in."""
import asyncio
import json

import pytest
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import ConnectionClosed

from bridge import BridgeClient, BridgeServer, NotConnected, RemoteError, jsonrpc
import bridge.server as bridge_server
from tests.bridge.test_bridge_server import TOKEN, App
from tests.waits import HANDSHAKE_S

MiB = 1 << 20


@pytest.fixture
async def start():
    servers, clients = [], []

    async def _start(token=TOKEN, **kwargs):
        app = App()
        for wait in ("open_timeout", "auth_timeout"):  # not this test's subject: tests/waits.py
            kwargs.setdefault(wait, HANDSHAKE_S)
        server = BridgeServer(token, app, **kwargs)
        app.server = server
        servers.append(server)
        return server, app, await server.start()

    _start.clients = clients
    yield _start
    for client in clients:
        await client.close()
    for server in servers:
        await server.close(grace=0.5)


def auth_frame(token: str, size: int) -> str:
    """An ``auth`` request with the right token, padded (an ignored member) to ``size`` bytes."""
    bare = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "auth",
                       "params": {"token": token, "pad": ""}})
    frame = bare.replace('"pad": ""', '"pad": "' + "x" * (size - len(bare)) + '"')
    assert len(frame) == size
    return frame


@pytest.fixture
def decoded(monkeypatch):
    """Every frame the server decoded or authenticated (it must see none of an oversized one)."""
    seen: list = []
    real_decode, real_auth = jsonrpc.decode, bridge_server.authenticate

    def decode(raw, *args, **kwargs):
        seen.append(("decode", len(raw)))
        return real_decode(raw, *args, **kwargs)

    def authenticate(message, token):
        seen.append(("authenticate", type(message).__name__))
        return real_auth(message, token)

    monkeypatch.setattr(jsonrpc, "decode", decode)
    monkeypatch.setattr(bridge_server, "authenticate", authenticate)
    return seen


async def closed_code(ws) -> int | None:
    """The close code the server sent; an answer instead (the frame was accepted) fails."""
    with pytest.raises(ConnectionClosed) as info:
        async with asyncio.timeout(30):
            await ws.recv()
    return None if info.value.rcvd is None else info.value.rcvd.code


async def test_a_10_MB_auth_frame_with_the_right_token_is_closed_1009_and_never_decoded(start, decoded):
    server, app, port = await start()
    # no ``async with``: closing it again once the server closed trips over the aborted transport
    ws = await ws_connect(f"ws://127.0.0.1:{port}/", open_timeout=HANDSHAKE_S, proxy=None, compression=None)
    try:
        await ws.send(auth_frame(TOKEN, 10_000_000))
    except ConnectionClosed:
        pass  # the server may close before the last byte left
    assert await closed_code(ws) == 1009
    assert decoded == [] and app.handled == [] and not server.connected
    client = await BridgeClient.connect(port, TOKEN)  # the server keeps serving
    start.clients.append(client)
    assert await client.call("echo", {"alive": True}) == {"alive": True}


async def test_the_pre_auth_cap_is_4_KiB_exactly(start, decoded):
    server, _, port = await start()
    async with ws_connect(f"ws://127.0.0.1:{port}/", open_timeout=HANDSHAKE_S, proxy=None) as ws:
        await ws.send(auth_frame(TOKEN, 4097))
        assert await closed_code(ws) == 1009
    assert decoded == []
    async with ws_connect(f"ws://127.0.0.1:{port}/", open_timeout=HANDSHAKE_S, proxy=None) as ws:
        await ws.send(auth_frame(TOKEN, 4096))
        assert json.loads(await ws.recv())["result"]["ok"] is True
        assert server.connected


async def test_a_long_token_still_fits_its_auth_frame(start):
    """The cap grows to fit the token's own auth frame: a long secret is never a lockout."""
    token = "t" * 10_000
    _, _, port = await start(token=token)
    client = await BridgeClient.connect(port, token)
    start.clients.append(client)
    assert await client.call("echo", {}) == {}


async def test_after_auth_the_1_MiB_and_16_MiB_caps_are_unchanged(start):
    _, app, port = await start()  # the sidecar's caps: max_frame 1 MiB, hard_frame 16 MiB
    # not in start.clients: the server closes it (closing it again trips over the aborted transport)
    client = await BridgeClient.connect(port, TOKEN, max_frame=2 * MiB)
    blob = "x" * (MiB - 100)  # over the pre-auth cap, under max_frame: handled
    assert await client.call("echo", {"b": blob}) == {"b": blob}
    with pytest.raises(RemoteError) as info:  # over max_frame: -32600, the connection lives
        await client.call("echo", {"b": "y" * (2 * MiB)})
    assert info.value.code == -32600 and str(MiB) in info.value.message
    assert await client.call("echo", {"alive": True}) == {"alive": True}
    with pytest.raises(NotConnected):  # over hard_frame: websockets closes with 1009
        await client.call("echo", {"b": "z" * (16 * MiB + 1)})
    await client.wait_closed()
    assert client.close_code == 1009
    assert [m for m, _ in app.handled] == ["echo", "echo"]


async def test_a_trickled_partial_auth_frame_is_closed_at_the_auth_timeout(start):
    """Slow loris: a frame header and a few payload bytes, then nothing — closed 4408."""
    _, _, port = await start(auth_timeout=0.2)
    reader, writer = await raw_upgrade(port)
    writer.write(bytes([0x81, 0x80 | 100]) + b"\0\0\0\0" + b'{"jsonrpc"')  # 100 bytes announced
    await writer.drain()
    async with asyncio.timeout(30):
        frame = await reader.readexactly(4)
    assert frame[0] == 0x88 and int.from_bytes(frame[2:4], "big") == 4408
    writer.close()


async def test_a_handshake_that_never_ends_is_dropped_at_the_open_timeout(start):
    """Slow loris before the websocket exists: half an HTTP request, then nothing."""
    _, _, port = await start(open_timeout=0.2)
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    await writer.drain()
    async with asyncio.timeout(30):
        assert await reader.read() == b""  # the server dropped the connection
    writer.close()


async def raw_upgrade(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A websocket opening handshake by hand (so a test can send a frame's bytes as it likes)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                 b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
    head = await reader.readuntil(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 101 "), head
    return reader, writer
