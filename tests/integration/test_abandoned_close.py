"""A close stage of ``sidecar serve`` that overruns its bound is abandoned: the process still ends
at once with exit 0, its last log line names what was abandoned instead of claiming a clean
shutdown, and nothing committed is lost (the flake of ``test_wall_clock``'s restarted-sidecar
test under load 7–12: "shut down cleanly" logged, the process alive 2 s later, then aiosqlite's
thread failing with "Event loop is closed").

The fault is the one seen there: when the database close is asked for, aiosqlite's connection
thread is still busy (a checkpoint or a commit on a loaded disk), so the close queues behind it
and overruns its 0.3 s bound.  ``PRELUDE`` keeps the thread busy for ``hold`` seconds (None:
for good) from the moment the close begins."""
from __future__ import annotations

import pytest

from bridge.client import BridgeClient
from tests.integration.sidecar_proc import SidecarProcess, send_event, answer_no_dialogs as _answer

T0 = 1796025600.0

PRELUDE = r"""
import asyncio, threading
from sidecar.store.db import Store

HOLD_S = {hold}
_close = Store.close

async def slow_close(self):
    if self._db is not None:
        busy = threading.Event()
        asyncio.ensure_future(self.read(lambda conn: busy.wait(HOLD_S)))
        await asyncio.sleep(0)  # the thread's work is queued before the close
    await _close(self)

Store.close = slow_close
"""


async def _login(sc: SidecarProcess) -> tuple[BridgeClient, dict]:
    c = await BridgeClient.connect(sc.port, sc.token, on_request=_answer)
    await c.call("clock.advance_to", {"t": T0})
    return c, await c.call("session.login", {"tu": "c-tu-1", "project": "chathouse"})


# hold 1 s: the thread comes back after the loop closed (the flake's "Event loop is closed");
# for good: a close that never ends must not keep the process alive (the watchdog's exit 5)
@pytest.mark.parametrize("hold, durability", [(1.0, "normal"), (None, "full")])
async def test_an_overrunning_database_close_is_abandoned_named_and_loses_nothing(tmp_path, hold, durability):
    data = tmp_path / "data"
    async with SidecarProcess(data, clock="virtual", prelude=PRELUDE.format(hold=hold),
                              extra=("--durability", durability)) as sc:
        c, _ = await _login(sc)
        for i in range(5):
            await c.call("platform.event", send_event(i, T0 + i))
        open_before = (await c.call("status"))["open_tasks"]
        code = await sc.stop("stdin")  # Overran past 2 s
        await c.close()
        err = await sc.stderr_text()
    assert open_before == 5
    assert code == 0, err
    last = err.strip().splitlines()[-1]
    assert "shut down" in last and "abandoned" in last and "database close" in last, err
    assert "shut down cleanly" not in err
    assert "Event loop is closed" not in err and "Traceback" not in err, err
    # the connection was never closed, so nothing was checkpointed: the steps are in the WAL alone
    assert (data / "sidecar.db-wal").stat().st_size > 0
    async with SidecarProcess(data, clock="virtual") as sc2:  # a restart finds every commit
        c2, login = await _login(sc2)
        assert login["open_tasks"] == open_before
        assert await sc2.stop("stdin") == 0
        await c2.close()
        assert "shut down cleanly" in await sc2.stderr_text()
