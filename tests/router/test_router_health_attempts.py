"""Sender health counts ATTEMPTS — one HTTP request — not deliveries (seed 000 §1 "+1 per failed
send"; DESIGN §9 "a write's failure fails only that write"; breaker finding F4: a dropped batch
of N writes counted N failures and started Stack's cooldown at once).  The pump over a real
store, the real :class:`~sidecar.senders.gate.HealthGate` (the built-in Stack group: threshold
3) and a scripted Stack client whose answers are set per test."""
from __future__ import annotations

import pytest

from sidecar.core.rng import KeyedRandom
from sidecar.core.scheduler import Scheduler
from sidecar.router.attempt import (DELIVERED, Attempts, request_outcome, held, retryable,
                                    terminal)
from sidecar.router.io.stack_channel import StackChannel
from sidecar.router.io.pump import DeliveryPump
from sidecar.senders import health as h
from sidecar.senders.gate import HealthGate
from sidecar.senders.manage import Registry
from sidecar.senders.io.storage import load_history
from sidecar.stack.client import BatchResult
from sidecar.stack.errors import StackUnavailable
from sidecar.stack.writes import followup_chat_key, marker_write

from routerhelp import T0, emit, make_state


class Scripted:
    """A Stack client: ``mode`` ``down`` (every request fails as a whole), ``up``, or a list of
    per-write statuses for the next batch (cycled)."""

    def __init__(self) -> None:
        self.mode: str | list[int] = "down"
        self.requests = 0

    async def send(self, method, path, body, idem_key):
        self.requests += 1
        if self.mode == "down":
            raise StackUnavailable("POST: ConnectError", None)
        return None

    async def batch(self, writes):
        self.requests += 1
        if self.mode == "down":
            raise StackUnavailable("POST /v1/batch: ConnectError", None)
        if self.mode == "up":
            return [BatchResult(w.key, 200, {}) for w in writes]
        return [BatchResult(w.key, self.mode[i % len(self.mode)], {}) for i, w in enumerate(writes)]

    async def health(self):
        return None


class Rig:
    def __init__(self, store, rstore, *, batch: bool) -> None:
        self.store, self.rstore = store, rstore
        self.gate = HealthGate(h.HealthMachine(KeyedRandom(3)), Scheduler())
        self.gate.load(Registry(), [])
        self.client = Scripted()
        self.pump = DeliveryPump(rstore, {}, stack=StackChannel(self.client, batch=batch),  # type: ignore[arg-type]
                                 attempts=Attempts(self.gate))
        self.state = make_state()

    async def put(self, n: int, at: float = T0) -> None:
        for i in range(n):  # n pairs, one write each
            key = followup_chat_key("tu", f"ru-{i}", "src", 0)
            w = marker_write("tu", f"ru-{i}", "followUpChat", {"sourceUnansweredTaskId": "src", "step": 0}, key)
            await emit(self.rstore, self.state, [w.event("followUpChat", "set", {"ru": f"ru-{i}"})], at)

    async def codes(self) -> list[tuple[float, int]]:
        return [(r.at - T0, r.code) for r in await self.store.read(load_history, "stack", 0.0)]


@pytest.mark.parametrize("batch", [True, False])
async def test_one_failed_request_of_many_writes_is_one_failure(store, rstore, batch):
    rig = Rig(store, rstore, batch=batch)
    await rig.put(6)
    res = await rig.pump.run_due(T0)
    # batch: ONE request; single writes: six sent together in one round — one attempt either way
    assert rig.client.requests == (1 if batch else 6)
    assert sum(1 for _, n in res.settled if n.attempts == 1 and n.status == "pending") == 6
    s = rig.gate.state("stack")
    assert (s.state, s.failed_in_row) == (h.ACTIVE, 1)
    assert await rig.codes() == [(0.0, 109)]
    rig.client.mode = "up"
    res = await rig.pump.run_due(T0 + 5)  # Stack's ladder: +5 s
    assert [n.status for _, n in res.settled] == ["delivered"] * 6
    assert rig.gate.state("stack").failed_in_row == 0


async def test_three_failed_requests_in_a_row_start_the_cooldown(store, rstore):
    rig = Rig(store, rstore, batch=True)
    await rig.put(10)
    for at in (T0, T0 + 5, T0 + 20):  # the ladder's instants: 5 s, then 15 s
        await rig.pump.run_due(at)
    assert rig.client.requests == 3
    s = rig.gate.state("stack")
    assert s.state == h.COOLDOWN and s.cooldown_start == T0 + 20 and s.rest_s == 0
    assert await rig.codes() == [(0.0, 109), (5.0, 109), (20.0, 109), (20.0, 101)]


async def test_an_answered_batch_counts_once_by_its_per_write_results(store, rstore):
    rig = Rig(store, rstore, batch=True)
    await rig.put(4)
    rig.client.mode = [503]  # Stack answered, every write 503: ONE failure
    await rig.pump.run_due(T0)
    assert rig.gate.state("stack").failed_in_row == 1
    rig.client.mode = [400, 400, 503, 503]  # two writes refused (4xx: terminal, they fail and
    await rig.pump.run_due(T0 + 5)  # never count), two 503: the request's ONE failure
    assert rig.gate.state("stack").failed_in_row == 2
    rig.client.mode = [400]  # every write refused: terminal, never counts
    await rig.pump.run_due(T0 + 5 + 15)
    assert rig.gate.state("stack").failed_in_row == 2
    await rig.put(4, at=T0 + 20)  # (the refused writes failed: new ones for the last pass)
    rig.client.mode = [200, 503]  # some acknowledged: the sender delivered (a write's failure
    await rig.pump.run_due(T0 + 5 + 120)  # is that write's, DESIGN §9): back to 0
    assert rig.gate.state("stack").failed_in_row == 0
    assert [c for _, c in await rig.codes()] == [109, 109]


def test_request_outcome_rules():
    bad = retryable("HTTP 503", 503)
    assert request_outcome([bad, DELIVERED, terminal("HTTP 400", 400)]) is DELIVERED
    assert request_outcome([terminal("HTTP 400", 400), bad, held("held")]) is bad
    assert request_outcome([held("held"), terminal("HTTP 422", 422)]).kind == "terminal"
    assert request_outcome([held("held")]) is None and request_outcome([]) is None
