"""Sender health in SQLite: load/save round trips; a restart ×10 during a cooldown keeps its end."""
from __future__ import annotations

import pytest

from sidecar.core.rng import KeyedRandom
from sidecar.senders import health as h
from sidecar.senders import manage as m
from sidecar.senders.store import registry_ops, result_ops
from sidecar.senders.io.storage import load_history, load_registry
from sidecar.store import Store, StoreError

T0 = 1_780_000_000.0


async def test_restart_x10_during_cooldown_keeps_its_end(tmp_path):
    path = tmp_path / "sidecar.db"
    machine = h.HealthMachine(KeyedRandom(42))
    s = h.SenderState(sender="hook")
    async with await Store.open(path) as store:
        for i in range(2):
            step = machine.handle(s, h.Failed(T0 + i, T0 + i - 1))
            await store.commit(result_ops(step))
            s = step.state
    assert s.state == h.COOLDOWN
    planned = (s.cooldown_end, s.exit_at, s.probe_at)
    now = T0 + 60
    for _ in range(10):  # restart: a fresh machine, state only from disk, a later clock
        async with await Store.open(path) as store:
            reg = await store.read(load_registry)
            s = reg.senders["hook"]
            assert (s.cooldown_end, s.exit_at, s.probe_at) == planned
            machine = h.HealthMachine(KeyedRandom(42))
            now += 120
            step = machine.handle(s, h.Tick(now))
            await store.commit(result_ops(step))
    async with await Store.open(path) as store:
        reg = await store.read(load_registry)
        s = reg.senders["hook"]
        assert s.cooldown_end == planned[0] and s.state == h.COOLDOWN
        rows = await store.read(load_history, "hook")
        assert [r.code for r in rows] == [109, 109, 101]


async def test_registry_round_trip_and_unique_priority(tmp_path):
    r0 = m.with_senders(m.Registry(), ["stack", "hook"])
    r1 = m.groups_create(r0, "g1", {"name": "fast", "priority": 10, "cooldown_delay_from": 15,
                                    "cooldown_delay_to": 45, "from_time": "22:00", "to_time": "06:00"})
    r2 = m.assignments(r1, "set", [{"sender": "hook", "groups": ["g1"]}])
    async with await Store.open(tmp_path / "d.db") as store:
        await store.commit(registry_ops(m.Registry(), r2))
        loaded = await store.read(load_registry)
        assert loaded == r2
        r3 = m.groups_delete(r2, "g1")
        await store.commit(registry_ops(r2, r3))
        assert await store.read(load_registry) == r3
        # the table guards uniqueness too: a write that slipped past validation is refused whole
        from sidecar.store.ops import PutGroup
        with pytest.raises(StoreError):
            await store.commit(registry_ops(m.Registry(), r2) + [PutGroup("g9", 10, {})])
        assert await store.read(load_registry) == r3
