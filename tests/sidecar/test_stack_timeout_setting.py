"""``stack_timeout_s`` (``SIDECAR_STACK_TIMEOUT_S``): the seconds a Stack request may take per
phase (connect, read, write, pool wait; a whole request twice that), 5 s by default.  The harness
raises it (``electron_stub.machine.HARNESS_WAIT_S``) because its reference Stack answers within
2 s by design: only a loaded machine reached the 5 s, and a virtual-clock replay then counted a
Stack failure a quiet machine never saw."""
from __future__ import annotations

from pathlib import Path

import pytest

from electron_stub.stack_server import StackServer
from sidecar.app.root import SidecarApp
from sidecar.config import Settings
from sidecar.store.db import Store
from tests.app.test_app_steps import T0, TU, msg


async def _flush_slow(tmp_path: Path, stack: StackServer, **settings) -> dict:
    """Login, one chat message (its Stack writes), then a flush while Stack answers after 0.6 s."""
    store = await Store.open(tmp_path / "sidecar.db")
    app = SidecarApp(Settings(token="t", clock="virtual", data_dir=tmp_path, stack_url=stack.url,
                              **settings), store)
    app.bridge.notify = lambda m, p=None: 0  # type: ignore[method-assign]
    try:
        app.engine.outbox_at(await app.routing.start(None))
        await app.senders.start(["stack"])
        await app.handle("clock.advance_to", {"t": T0})
        await app.handle("session.login", {"tu": TU, "project": "golden", "operator": "op"})
        await app.handle("platform.event", msg("ru-1", "m-1", T0))
        stack.set_fault("latency", 0.6)
        return await app.handle("stack.flush", {})
    finally:
        await app.close()
        await store.close()


async def test_the_stack_timeout_is_a_setting(tmp_path, stack):
    ans = await _flush_slow(tmp_path, stack, stack_timeout_s=0.2)
    assert ans["acked"] == 0 and ans["failed"] > 0, ans  # 0.6 s > 0.2 s per read: unavailable


async def test_the_default_waits_for_a_stack_within_its_design(tmp_path, stack):
    ans = await _flush_slow(tmp_path, stack)
    assert ans["acked"] > 0 and ans["failed"] == 0, ans


def test_the_stack_timeout_refuses_what_is_no_wait():
    for bad in (0, -1, float("inf"), float("nan")):
        with pytest.raises(ValueError):
            Settings(token="t", stack_timeout_s=bad)
