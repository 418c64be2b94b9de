"""Stop signals from the first instant to the last (issue 7 item 1, breaker defects 1 and 2).

* Every stop signal handler is in place before ``ready`` is printed: a signal sent the moment
  Electron reads ``ready`` is a clean exit 0, never the default action (rc -15 / -1 / -2).
* From the first stop request on, the watchdog runs and any further stop signal ends the process
  at once with 128 + N — also while the event loop is busy (a far-future ``clock.advance_to``),
  where the old code removed the handlers and armed the second-signal handler only later.
"""
from __future__ import annotations

import asyncio
import json
import signal

import pytest

from bridge.client import BridgeClient
from tests.integration.sidecar_proc import SidecarProcess

T0 = 1796025600.0
RUNS = 20


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT", "SIGHUP"])
async def test_a_signal_right_after_ready_is_a_clean_exit_0(tmp_path, sig):
    codes = []
    for i in range(RUNS):
        async with SidecarProcess(tmp_path / f"d{i}", clock="virtual") as sc:
            codes.append(await sc.stop(sig))  # sent as soon as the ready line was read
    assert codes == [0] * RUNS, f"{sig}: exit codes {codes}"


async def _busy_far_future_advance(sc: SidecarProcess) -> BridgeClient:
    c = await BridgeClient.connect(sc.port, sc.token, on_request=_no_dialogs)
    await c.call("clock.advance_to", {"t": T0})
    await c.call("session.login", {"tu": "g-tu-1", "project": "golden"})
    await c.send_raw(json.dumps({"jsonrpc": "2.0", "id": 99, "method": "clock.advance_to",
                                "params": {"t": T0 + 86400 * 365 * 50}}))
    await asyncio.sleep(0.2)  # the loop is inside the 50-year advance
    return c


async def _no_dialogs(method, params):
    return {"dialogs": []}


@pytest.mark.parametrize(("first", "second"), [("SIGTERM", "SIGINT"), ("SIGINT", "SIGTERM"),
                                               ("SIGTERM", "SIGHUP")])
async def test_a_second_signal_during_a_busy_shutdown_exits_at_once_with_128_plus_n(tmp_path, first, second):
    for i in range(3):
        async with SidecarProcess(tmp_path / f"d{i}", clock="virtual") as sc:
            c = await _busy_far_future_advance(sc)
            sc.proc.send_signal(getattr(signal, first))
            await asyncio.sleep(0.002)
            sc.proc.send_signal(getattr(signal, second))
            code = await sc.wait_exit(1.0, what=f"{first} then {second}")
            err = await sc.stderr_text()
            assert code == 128 + getattr(signal, second), (code, err[-1500:])
            assert f"second {second} during shutdown" in err
            await c.close()


async def test_one_signal_during_a_busy_loop_is_bounded_by_the_watchdog(tmp_path):
    async with SidecarProcess(tmp_path, clock="virtual") as sc:
        c = await _busy_far_future_advance(sc)
        code = await sc.stop("SIGTERM")  # within 2 s: cleanly (0) or forced by the watchdog (5)
        assert code in (0, 5)
        await c.close()
