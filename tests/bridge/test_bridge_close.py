"""BridgeServer.close answers every request Electron sent before the connection goes (1001).

A request in flight when the sidecar is told to stop (SIGTERM) used to get no answer: close()
shut the connection with 1001 first and let the handler finish into a closed socket.  Now the
connection stays open while the handler gets its ``grace``: its result goes out if it ends in
time, else -32003 "shutting down … did not finish"; frames queued behind it are answered -32002 ("nothing was
done"); then 1001.  A handler that asks the client something meanwhile still gets its answer.
"""
import asyncio

import pytest

from bridge import BridgeClient, BridgeServer, RemoteError
from tests.waits import EXIT_S

TOKEN = "s3cret-token"


class Slow:
    """A handler whose ``slow`` call lasts ``seconds`` (None: until released)."""

    def __init__(self) -> None:
        self.server: BridgeServer | None = None
        self.started = asyncio.Event()
        self.release = asyncio.Event()
        self.handled: list[str] = []

    async def __call__(self, method, params):
        self.handled.append(method)
        if method == "slow":
            self.started.set()
            if params.get("seconds") is None:
                await self.release.wait()
            else:
                await asyncio.sleep(params["seconds"])
            return {"done": True}
        if method == "ask":
            self.started.set()
            assert self.server is not None
            return await self.server.request("platform.request", {"q": 1}, timeout=2)
        return {"echo": params}


@pytest.fixture
async def bridge():
    app = Slow()
    server = BridgeServer(TOKEN, app)
    app.server = server
    port = await server.start()

    async def answer(method, params):
        return {"answered": params}

    client = await BridgeClient.connect(port, TOKEN, on_request=answer)
    yield server, app, client
    app.release.set()
    await client.close()
    await server.close(grace=0.1)


async def _closed(client: BridgeClient) -> int | None:
    async with asyncio.timeout(2):
        await client.wait_closed()
    return client.close_code


async def test_a_request_that_ends_within_the_grace_gets_its_result_before_1001(bridge):
    server, app, client = bridge
    call = asyncio.create_task(client.call("slow", {"seconds": 0.1}))
    await app.started.wait()
    await server.close(grace=1.0)
    assert await call == {"done": True}
    assert await _closed(client) == 1001


async def test_a_request_still_running_after_the_grace_is_answered_shutting_down(bridge):
    server, app, client = bridge
    call = asyncio.create_task(client.call("slow", {"seconds": None}))
    await app.started.wait()
    queued = [asyncio.create_task(client.call("echo", {"i": i})) for i in range(3)]
    async with asyncio.timeout(30):  # the echoes wait behind the slow call: counted, not slept for
        while server._queue.qsize() < len(queued):  # (issue 18 item 2)
            await asyncio.sleep(0.001)
    async with asyncio.timeout(EXIT_S):  # bounded: the slow call never ends, the answers wait for no one
        await server.close(grace=0.1)
    with pytest.raises(RemoteError) as info:
        await call
    assert info.value.code == -32003 and "shutting down" in info.value.message
    assert "did not finish" in info.value.message
    for q in queued:
        with pytest.raises(RemoteError) as info:
            await q
        assert info.value.code == -32002 and "nothing was done" in info.value.message
    assert app.handled == ["slow"]  # nothing queued began after the close
    assert await _closed(client) == 1001


async def test_a_request_awaiting_the_clients_answer_at_close_still_gets_it(bridge):
    """The virtual clock awaits platform requests inside a step: the connection must stay open
    for the client's answer while the handler has its grace."""
    server, app, client = bridge
    call = asyncio.create_task(client.call("ask", {}))
    await app.started.wait()
    await server.close(grace=1.0)
    assert await call == {"answered": {"q": 1}}
    assert await _closed(client) == 1001


async def test_a_frame_sent_during_the_close_is_answered_shutting_down(bridge):
    server, app, client = bridge
    call = asyncio.create_task(client.call("slow", {"seconds": None}))
    await app.started.wait()
    closing = asyncio.create_task(server.close(grace=5.0))
    await asyncio.sleep(0)  # the close began: it waits for the slow call
    late = asyncio.create_task(client.call("echo", {"late": True}))
    async with asyncio.timeout(2):
        while server._queue.qsize() == 0:  # the late frame reached the sidecar's queue
            await asyncio.sleep(0.005)
    app.release.set()
    assert await call == {"done": True}
    with pytest.raises(RemoteError) as info:
        await late
    assert info.value.code == -32002 and "nothing was done" in info.value.message
    await closing
    assert app.handled == ["slow"]
    assert await _closed(client) == 1001


async def test_a_frame_read_after_the_cut_short_until_the_1001_is_answered(bridge, monkeypatch):
    """F3 (breaker 16): after the call in flight is cut short (worker cancelled, queue settled)
    the connection stays open a moment for the last answers; a request read then used to sit in
    the queue unanswered ("N inbound frames were not handled").  Every request read until the
    close is answered -32002 "nothing was done".  (The flush is slowed to hold that moment open.)"""
    server, app, client = bridge
    call = asyncio.create_task(client.call("slow", {"seconds": None}))
    await app.started.wait()
    session = server._session
    flush = session.flush
    in_flush = asyncio.Event()

    async def slow_flush(timeout_s):
        in_flush.set()
        await asyncio.sleep(0.3)
        return await flush(timeout_s)

    monkeypatch.setattr(session, "flush", slow_flush)
    closing = asyncio.create_task(server.close(grace=0.1))
    await in_flush.wait()
    late = [asyncio.create_task(client.call("echo", {"i": i})) for i in range(3)]
    with pytest.raises(RemoteError):
        await call
    for q in late:
        with pytest.raises(RemoteError) as info:
            await q
        assert info.value.code == -32002 and "nothing was done" in info.value.message
    await closing
    assert app.handled == ["slow"]
    assert await _closed(client) == 1001
