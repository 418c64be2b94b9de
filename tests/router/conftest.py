"""Router test fixtures: a real store on a temporary data dir."""
from __future__ import annotations

import pytest

from sidecar.router.storage import RouterStore
from sidecar.store.db import Store


@pytest.fixture
async def store(tmp_path):
    s = await Store.open(tmp_path / "sidecar.db")
    yield s
    await s.close()


@pytest.fixture
def rstore(store) -> RouterStore:
    return RouterStore(store)
