"""A client that sends requests but never reads the answers is cut off (1008) instead of making
the sidecar buffer answers without bound (found by the breaker: +136 MB for 2,000 requests with a
50 KB id); the server keeps serving the next client."""
from __future__ import annotations

import asyncio
import json

from websockets.asyncio.client import connect

from bridge.client import BridgeClient
from bridge.server import BridgeServer
from tests.waits import HANDSHAKE_S


async def handler(method, params):
    return {"ok": True}


async def test_client_that_does_not_read_is_cut_off():
    server = BridgeServer("tok", handler, control_limit=256 << 10)
    port = await server.start()
    try:
        ws = await connect(f"ws://127.0.0.1:{port}/", open_timeout=HANDSHAKE_S, max_size=None, max_queue=1)
        await ws.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "auth", "params": {"token": "tok"}}))
        await ws.recv()  # the auth answer: before it a frame is capped at 4 KiB (issue 18 item 5)
        big_id = "x" * 50_000
        session = None
        for i in range(200):  # ~10 MB of answers if they were all kept
            await ws.send(json.dumps({"jsonrpc": "2.0", "id": f"{big_id}{i}", "method": "status"}))
            await asyncio.sleep(0.001)
            session = session or server._session
        for _ in range(100):
            if session.closed:
                break
            await asyncio.sleep(0.01)
        assert session.closed  # cut off instead of buffering
        assert session.delivery.control_bytes < (256 << 10) + 200_000
        ws.transport.abort()
        c = await BridgeClient.connect(port, "tok")
        assert await c.call("status") == {"ok": True}
        await c.close()
    finally:
        await server.close()
