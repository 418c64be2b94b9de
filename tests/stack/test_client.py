"""StackClient against a real HTTP server on loopback (DESIGN §9 contract, error tree)."""
from __future__ import annotations

import json

import pytest

from sidecar.stack.client import StackClient, StackReply
from sidecar.stack.errors import StackError, StackRejected, StackUnavailable

from fake_stack import StackServer, refused_port

PATH = "/v1/tus/g-tu-1/favorites/g-ru-1/markers/followUpChat"
BODY = b'{"value":{"step":0}}'


async def test_write_sends_headers_and_body(client: StackClient, stack_server: StackServer):
    reply = await client.send("PUT", PATH, BODY, "followUpChat:g-tu-1:g-ru-1:t-1:0:set")
    assert reply == StackReply(status=200, body=b'{"ok": true, "seq": 1}', replayed=False)
    assert reply.json() == {"ok": True, "seq": 1}
    [seen] = stack_server.requests
    assert (seen.method, seen.path, seen.body) == ("PUT", PATH, BODY)
    assert seen.headers["idempotency-key"] == "followUpChat:g-tu-1:g-ru-1:t-1:0:set"
    assert seen.headers["content-type"] == "application/json"


async def test_repeated_key_gets_first_answer_and_changes_nothing(client, stack_server):
    first = await client.send("POST", "/v1/tus/t/tasks", b'{"a":1}', "task:x:created")
    again = await client.send("POST", "/v1/tus/t/tasks", b'{"a":1}', "task:x:created")
    other = await client.send("POST", "/v1/tus/t/tasks", b'{"a":2}', "task:x:closed")
    assert (first.status, first.body, first.replayed) == (201, b'{"ok": true, "seq": 1}', False)
    assert (again.status, again.body, again.replayed) == (201, b'{"ok": true, "seq": 1}', True)
    assert other.body == b'{"ok": true, "seq": 2}'
    assert [s.headers["idempotency-key"] for s in stack_server.applied] == \
        ["task:x:created", "task:x:closed"]


async def test_keep_alive_reuses_one_connection(client, stack_server):
    for i in range(3):
        await client.send("PUT", PATH, BODY, f"k{i}")
    assert len({s.peer for s in stack_server.requests}) == 1


async def test_startup(client, stack_server):
    stack_server.startup["g-tu-1"] = {"favorites": [{"ru": "g-ru-1"}], "history": []}
    assert await client.startup("g-tu-1") == {"favorites": [{"ru": "g-ru-1"}], "history": []}
    assert stack_server.requests[0].method == "GET"
    assert "idempotency-key" not in stack_server.requests[0].headers
    with pytest.raises(StackRejected) as ei:
        await client.startup("nobody")
    assert ei.value.status == 404 and ei.value.path == "/v1/tus/nobody/startup"


@pytest.mark.parametrize("status,cls", [(500, StackUnavailable), (503, StackUnavailable),
                                        (429, StackUnavailable), (400, StackRejected),
                                        (404, StackRejected), (409, StackRejected)])
async def test_status_mapping(client, stack_server, status, cls):
    stack_server.fail(status)
    with pytest.raises(cls) as ei:
        await client.send("PUT", PATH, BODY, "k")
    err = ei.value
    assert type(err) is cls and isinstance(err, StackError)
    assert err.status == status and err.retryable is (cls is StackUnavailable)
    assert (err.method, err.path) == ("PUT", PATH)
    assert err.detail == json.dumps({"error": f"injected {status}"})
    assert err.short().startswith(f"{cls.__name__} {status}: ")


async def test_dropped_connection_is_unavailable(client, stack_server):
    stack_server.fail("down")
    with pytest.raises(StackUnavailable) as ei:
        await client.send("PUT", PATH, BODY, "k")
    assert ei.value.status is None and ei.value.retryable


async def test_connection_refused_is_unavailable():
    with refused_port() as port:
        async with StackClient(f"http://127.0.0.1:{port}", timeout=1.0) as c:
            with pytest.raises(StackUnavailable) as ei:
                await c.send("PUT", PATH, BODY, "k")
            assert ei.value.status is None
            with pytest.raises(StackUnavailable):
                await c.startup("t")


async def test_timeout_is_unavailable(stack_server):
    stack_server.fail("delay", seconds=1.0)
    async with StackClient(stack_server.url, timeout=0.2) as c:
        with pytest.raises(StackUnavailable) as ei:
            await c.send("PUT", PATH, BODY, "k")
    assert ei.value.status is None and "timeout" in str(ei.value)


async def test_server_restart_recovers(client, stack_server):
    await client.send("PUT", PATH, BODY, "k1")
    stack_server.stop()
    with pytest.raises(StackUnavailable):
        await client.send("PUT", PATH, BODY, "k2")
    stack_server.start()
    assert (await client.send("PUT", PATH, BODY, "k2")).status == 200


async def test_undecodable_startup_is_unavailable(client, stack_server):
    stack_server.startup["t"] = ["not", "an", "object"]
    with pytest.raises(StackUnavailable) as ei:
        await client.startup("t")
    assert ei.value.status == 200


async def test_write_needs_key(client):
    with pytest.raises(ValueError):
        await client.send("PUT", PATH, BODY, "")
