"""The wall clock's pump loop is woken by work, not paced by the ticker (issue 21 item 2;
:meth:`sidecar.app.deliveries.Deliveries.pump_loop`): after a pass that claimed attempts while a
row is still due, the next pass runs at once — even when the delivery timer's next instant is
an hour away.  A real wall-clock app and store; the router's pass is scripted."""
from __future__ import annotations

import asyncio

from sidecar.app.router import PassResult

from test_app_shutdown import make_app


async def test_a_pass_that_leaves_work_due_is_followed_at_once(tmp_path):
    app, store = await make_app(tmp_path)
    passes: list[float] = []
    fourth = asyncio.Event()

    async def pump(now, *, stack=True, detach=False):
        passes.append(now)
        if len(passes) >= 4:
            fourth.set()
            return PassResult(next_due=now + 3600)
        # a batch claimed, more of that target due now; the timer's next instant is far away
        return PassResult(next_due=now + 3600, claimed=16, other_due=now)
    app.routing.pump = pump  # type: ignore[method-assign]
    try:
        app._pump_kick.set()
        async with asyncio.timeout(30):  # generous: without the rule the next pass is in 1 h
            await fourth.wait()
        assert len(passes) == 4
    finally:
        await app.close()
        await store.close()
