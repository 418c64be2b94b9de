"""``handshake_timeout_s`` (``SIDECAR_HANDSHAKE_TIMEOUT_S``): the seconds a new bridge connection
has for its websocket opening handshake, and again for its first frame, ``auth`` (DESIGN §3: a
connection that finishes neither is closed), 10 s by default.  The harness raises it with its
other waits (``electron_stub.machine.HARNESS_WAIT_S``): its own client connects at once by design,
so only a loaded machine could reach 10 s, and a replay then failed to start."""
from __future__ import annotations

import asyncio

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from electron_stub import machine
from sidecar.config import Settings
from tests.integration.sidecar_proc import SidecarProcess
from tests.waits import HANDSHAKE_S


async def _closed_after_silence(port: int) -> int | None:
    """Open a connection, finish the handshake, send nothing: the close code the sidecar sends."""
    async with connect(f"ws://127.0.0.1:{port}/", open_timeout=HANDSHAKE_S, proxy=None) as ws:
        with pytest.raises(ConnectionClosed) as info:
            async with asyncio.timeout(60):  # a hang guard only: the setting fires long before
                await ws.recv()
    return None if info.value.rcvd is None else info.value.rcvd.code


async def test_the_handshake_timeout_is_a_setting(tmp_path, monkeypatch):
    monkeypatch.setenv("SIDECAR_HANDSHAKE_TIMEOUT_S", "0.3")
    async with SidecarProcess(tmp_path / "d") as sc:
        assert await _closed_after_silence(sc.port) == 4408  # no auth frame: closed
        # the line names the wait it kept (the default's 10 s would close it too, later)
        assert "within 0.3 s" in await sc.wait_for_stderr("no auth frame", within_s=60)
        await sc.stop()


def test_the_default_is_ten_seconds_and_the_harness_raises_it():
    assert Settings(token="t").handshake_timeout_s == 10.0
    assert "SIDECAR_HANDSHAKE_TIMEOUT_S" in machine.HARNESS_WAITS


def test_the_handshake_timeout_refuses_what_is_no_wait():
    for bad in (0, -1, float("inf"), float("nan")):
        with pytest.raises(ValueError):
            Settings(token="t", handshake_timeout_s=bad)
