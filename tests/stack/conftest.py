"""Stack test fixtures: a real loopback Stack stand-in (``fake_stack``), a client, a store."""
from __future__ import annotations

from pathlib import Path

import pytest
from fake_stack import StackServer, serve

from sidecar.stack.client import StackClient
from sidecar.store.db import Store


@pytest.fixture
def stack_server():
    yield from serve()


@pytest.fixture
async def client(stack_server: StackServer):
    c = StackClient(stack_server.url, timeout=2.0)
    yield c
    await c.close()


@pytest.fixture
async def store(tmp_path: Path):
    s = await Store.open(tmp_path / "data" / "sidecar.db")
    yield s
    await s.close()
