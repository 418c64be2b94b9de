"""Router test fixtures: a real store on a temporary data dir."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from sidecar.router.io.storage import RouterStore
from sidecar.store.db import Store


@pytest.fixture
async def store(tmp_path):
    s = await Store.open(tmp_path / "sidecar.db")
    yield s
    await s.close()


@pytest.fixture
def rstore(store) -> RouterStore:
    return RouterStore(store)


# the loopback Stack stand-in of the Stack client tests (faults per path, in-flight count, a
# real stop/start on the same port) drives the stack channel's tests too
_STACK_TESTS = str(Path(__file__).resolve().parents[1] / "stack")
if _STACK_TESTS not in sys.path:
    sys.path.insert(0, _STACK_TESTS)
