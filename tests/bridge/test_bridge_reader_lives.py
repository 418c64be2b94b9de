"""The reader never dies on a frame (issue 18 item 4): a ``stream.ack`` whose ``seq`` is a
5,000-digit integer closed the connection with 1011 — msgspec's ValidationError escaped the
reader.  Whatever a frame's decode or convert raises, the client gets an error answer (or, for a
notification, nothing) and the connection serves on."""
from __future__ import annotations

import json

import pytest

from bridge import jsonrpc
from tests.bridge.test_bridge_server import raw_authed, start  # noqa: F401 — the fixture

HUGE = "9" * 5000
ACKS = [  # (params text, why it is bad)
    '{"seq":%s}' % HUGE,
    '{"seq":-%s}' % HUGE,
    '{"seq":18446744073709551616}',  # 2^64
    '{"seq":9223372036854775808}',  # 2^63
    '{"seq":-1}',
    '{"seq":1.5}',
    '{"seq":"7"}',
    '{"seq":[1]}',
    '{"seq":{"n":1}}',
    '{"seq":null}',
    '{}',
    '[1]',
    '{"seq":' + "[" * 5000 + "]" * 5000 + '}',  # nested past msgspec's depth
]


async def _answer(ws) -> dict:
    """The next answer with an id, or a parse error (JSON-RPC: its id is null — the nesting
    case: the whole frame is refused before its id is read); a notification's envelope that
    does not decode (non-raw params) is answered with id null too: skipped."""
    while True:
        reply = json.loads(await ws.recv())
        if reply.get("id") is not None or reply["error"]["code"] == -32700:
            return reply


@pytest.mark.parametrize("raw_params", [True, False])
async def test_a_bad_stream_ack_is_invalid_params_naming_seq_and_the_connection_lives(start, raw_params):  # noqa: F811
    server, _, port = await start(raw_params=raw_params)
    async with await raw_authed(port) as ws:
        server.notify("task.created", {"i": 1})
        assert json.loads(await ws.recv())["params"]["seq"] == 1
        for i, params in enumerate(ACKS):
            await ws.send('{"jsonrpc":"2.0","id":%d,"method":"stream.ack","params":%s}' % (i, params))
            reply = await _answer(ws)
            if "[[" in params:
                assert (reply["id"], reply["error"]["code"]) == (None, -32700), reply
                continue
            assert reply["id"] == i and reply["error"]["code"] in (-32602, -32600), (params[:40], reply)
            if raw_params and params.startswith('{"seq"') and "[[" not in params:
                assert (reply["error"]["code"], reply["error"]["data"]) == (-32602, {"field": "seq"}), reply
            await ws.send('{"jsonrpc":"2.0","method":"stream.ack","params":%s}' % params)  # notification
        assert server.stream.acked_seq == 0  # nothing bad was taken as an ack
        await ws.send('{"jsonrpc":"2.0","id":"ok","method":"stream.ack","params":{"seq":1}}')
        assert await _answer(ws) == {"jsonrpc": "2.0", "id": "ok", "result": {"ok": True}}
        assert server.stream.acked_seq == 1
        assert ws.close_code is None


async def test_a_decode_that_raises_anything_is_answered_and_the_reader_reads_on(start, monkeypatch):  # noqa: F811
    """Whatever the exception class (a codec bug, an OverflowError, a RecursionError), one
    frame's failure is that frame's -32603 answer, never the connection's end."""
    _, app, port = await start(raw_params=True)
    real = jsonrpc.decode
    raised = []

    def flaky(frame, **kw):
        if b"explode" in bytes(frame):
            raised.append(1)
            raise OverflowError("a codec bug")
        return real(frame, **kw)
    monkeypatch.setattr(jsonrpc, "decode", flaky)
    async with await raw_authed(port) as ws:
        await ws.send('{"jsonrpc":"2.0","id":3,"method":"echo","params":{"explode":1}}')
        reply = json.loads(await ws.recv())
        assert reply["error"]["code"] == -32603 and reply["id"] == 3, reply
        await ws.send('{"jsonrpc":"2.0","id":4,"method":"echo","params":{"x":1}}')
        assert json.loads(await ws.recv())["id"] == 4
        assert ws.close_code is None
    assert raised == [1]
