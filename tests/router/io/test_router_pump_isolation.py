"""Targets are isolated (DESIGN §10 "Targets are isolated"): on the wall clock a pass hands the
attempts to their own tasks (``detach``), so a receiver that accepts and never answers holds only
its own target — a healthy webhook beside it gets its deliveries while the hanging attempt is
still open.  Real loopback receivers; no wall-clock bound but a generous one."""
from __future__ import annotations

import asyncio

from sidecar.router.config import Target
from sidecar.router.io.channels import WebhookChannel
from sidecar.router.io.pump import DeliveryPump
from sidecar.router.model import RoutingEvent, parse_rule
from sidecar.router.state import RouterState

from routerhelp import T0, emit

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
TARGETS = {"hang-hook": "webhook", "crm-hook": "webhook"}


async def _serve(handler) -> tuple[asyncio.Server, str]:
    srv = await asyncio.start_server(handler, "127.0.0.1", 0)
    port = srv.sockets[0].getsockname()[1]
    return srv, f"http://127.0.0.1:{port}/hook"


async def test_a_hanging_receiver_never_delays_a_healthy_one(rstore):
    events: list[str] = []
    opened = asyncio.Event()
    release = asyncio.Event()

    async def hang(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        events.append("hang.open")
        opened.set()
        await release.wait()  # accepts and never answers (until the test ends)
        writer.close()

    async def ok(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length"))
        await reader.readexactly(length)
        events.append("crm.received")
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        await writer.drain()
        writer.close()

    hang_srv, hang_url = await _serve(hang)
    ok_srv, ok_url = await _serve(ok)
    rule = parse_rule({"name": "both", "actions": [{"target": "hang-hook"}, {"target": "crm-hook"}]}, TARGETS)
    st = RouterState(prefix="ev-", rules={"both": rule})
    chans = {"hang-hook": WebhookChannel("hang-hook", Target(channel="webhook", url=hang_url, secret=SECRET,
                                                             timeout_s=60)),
             "crm-hook": WebhookChannel("crm-hook", Target(channel="webhook", url=ok_url, secret=SECRET))}
    woke = asyncio.Event()
    pump = DeliveryPump(rstore, chans, wake=woke.set)
    try:
        for i in range(3):
            await emit(rstore, st, [RoutingEvent(source="electron", subject="a", action=f"b{i}", payload={})],
                       T0 + i, targets=TARGETS)
        async with asyncio.timeout(30):  # generous: the hanging attempt's own timeout is 60 s
            await pump.run_due(T0 + 3, detach=True)
            await opened.wait()
            while events.count("crm.received") < 3:
                woke.clear()
                await pump.run_due(T0 + 3, detach=True)
                await woke.wait()
            await pump.run_due(T0 + 3, detach=True)
        assert events[0] == "hang.open" or "hang.open" in events
        assert events.count("crm.received") == 3 and not release.is_set()  # the hang is still open
        rows = {r.target: r for r in await rstore.deliveries() if r.status == "delivered"}
        assert set(rows) == {"crm-hook"}
        # the hanging target's batch is claimed (attempts 1, pending); only its first row was
        # sent — the others wait behind it in the same task (one delivery at a time)
        hung = await rstore.deliveries(target="hang-hook")
        assert [(r.attempts, r.status) for r in hung] == [(1, "pending")] * 3
        assert events.count("hang.open") == 1
    finally:
        release.set()
        await pump.close()
        for srv in (hang_srv, ok_srv):
            srv.close()
