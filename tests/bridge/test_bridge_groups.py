"""BridgeServer's groups: a run of queued frames of one groupable method goes to the group handler
in ONE call, in arrival order, never past a frame of another method; each frame gets its own
answer, in order, after the group's notifications (bridge/server.py, "Groups")."""
import asyncio

import pytest

from bridge import BridgeClient, BridgeServer, InvalidParams, RemoteError

TOKEN = "s3cret-token"


class App:
    """``hold`` blocks the worker until released, so the frames behind it queue up."""

    def __init__(self) -> None:
        self.server: BridgeServer | None = None
        self.release = asyncio.Event()
        self.calls: list[tuple[str, object]] = []  # (method, params) or ("group:m", [params])
        self.fail_group: Exception | None = None

    async def handle(self, method, params):
        self.calls.append((method, params))
        if method == "hold":
            await self.release.wait()
            return "held"
        if method == "ev":
            self.server.notify("note", {"of": params["i"]})
            if params["i"] < 0:
                raise InvalidParams(f"bad i {params['i']}")
            return {"i": params["i"], "alone": True}
        return {"other": params}

    async def group(self, method, params_list):
        self.calls.append((f"group:{method}", [p["i"] for p in params_list]))
        if self.fail_group is not None:
            raise self.fail_group
        out = []
        for p in params_list:
            self.server.notify("note", {"of": p["i"]})
            out.append(InvalidParams(f"bad i {p['i']}") if p["i"] < 0 else {"i": p["i"], "alone": False})
        return out


@pytest.fixture
async def bridge():
    made = []

    async def make(group_max=256):
        app = App()
        server = BridgeServer(TOKEN, app.handle, group_handler=app.group, group_methods={"ev"},
                              group_max=group_max)
        app.server = server
        port = await server.start()
        notes: list = []
        client = await BridgeClient.connect(port, TOKEN, on_notification=lambda m, p: notes.append(p))
        made.append((server, client))
        return app, client, notes

    yield make
    for server, client in made:
        await client.close()
        await server.close(grace=0.5)


async def queue_behind_hold(app, client, frames):
    """Send ``hold`` then ``frames`` (coroutines of calls) while the worker is held; release."""
    hold = asyncio.ensure_future(client.call("hold"))
    while not app.calls:
        await asyncio.sleep(0.001)
    calls = [asyncio.ensure_future(f) for f in frames]
    # every frame read and queued behind hold — counted, not waited for (issue 18 item 2: a
    # 50 ms sleep let a loaded machine split the run into groups the test did not expect)
    async with asyncio.timeout(30):  # only so that a broken reader fails the test
        while app.server._queue.qsize() < len(calls):
            await asyncio.sleep(0.001)
    app.release.set()
    assert await hold == "held"
    return await asyncio.gather(*calls, return_exceptions=True)


async def test_queued_run_goes_to_the_group_handler_in_order_and_answers_each(bridge):
    app, client, notes = await bridge()
    answers = await queue_behind_hold(app, client, [client.call("ev", {"i": i}) for i in range(5)])
    assert answers == [{"i": i, "alone": False} for i in range(5)]
    assert app.calls[1:] == [("group:ev", [0, 1, 2, 3, 4])]
    assert [n["of"] for n in notes] == [0, 1, 2, 3, 4]


async def test_a_run_stops_at_another_method_and_at_group_max(bridge):
    app, client, _ = await bridge(group_max=2)
    frames = [client.call("ev", {"i": 0}), client.call("ev", {"i": 1}), client.call("ev", {"i": 2}),
              client.call("other", {"x": 1}), client.call("ev", {"i": 3}), client.call("ev", {"i": 4})]
    answers = await queue_behind_hold(app, client, frames)
    assert answers[3] == {"other": {"x": 1}}
    assert [c for c in app.calls[1:]] == [("group:ev", [0, 1]), ("ev", {"i": 2}), ("other", {"x": 1}),
                                          ("group:ev", [3, 4])]
    assert answers[2] == {"i": 2, "alone": True}


async def test_an_error_outcome_answers_only_its_own_frame(bridge):
    app, client, _ = await bridge()
    answers = await queue_behind_hold(app, client, [client.call("ev", {"i": i}) for i in (1, -2, 3)])
    assert answers[0] == {"i": 1, "alone": False} and answers[2] == {"i": 3, "alone": False}
    assert isinstance(answers[1], RemoteError) and answers[1].code == -32602
    assert "bad i -2" in answers[1].message


async def test_a_raise_of_the_group_handler_answers_every_frame_and_the_bridge_lives(bridge):
    app, client, _ = await bridge()
    app.fail_group = RuntimeError("disk on fire")
    answers = await queue_behind_hold(app, client, [client.call("ev", {"i": i}) for i in range(3)])
    assert all(isinstance(a, RemoteError) and a.code == -32603 and "disk on fire" in a.message
               for a in answers)
    assert await client.call("ev", {"i": 9}) == {"i": 9, "alone": True}  # a lone frame: handler


async def test_notifications_group_too_and_get_no_answer(bridge):
    app, client, notes = await bridge()
    await queue_behind_hold(app, client, [client.notify("ev", {"i": i}) for i in range(4)])
    await client.call("other", {})  # behind the group: every note of it is out by its answer
    assert app.calls[1] == ("group:ev", [0, 1, 2, 3])
    assert [n["of"] for n in notes] == [0, 1, 2, 3]


def test_group_max_must_be_positive():
    async def h(m, p):
        return None
    with pytest.raises(ValueError):
        BridgeServer(TOKEN, h, group_handler=h, group_methods={"ev"}, group_max=0)
