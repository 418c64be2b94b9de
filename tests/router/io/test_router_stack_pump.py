"""The ``stack`` channel through the delivery pump, against a real loopback Stack
(``tests/stack/fake_stack.py``) and a real store, one request per write (Stack without
``POST /v1/batch``) — the behaviours the old ``OutboxPump`` guaranteed, now the router's
(DESIGN §9 "nothing is dropped", per-pair order; §10 the Stack ladder, outage stop).

Not ported: the old pump's optional keyed jitter — the app never enabled it, and the router's
retry times are exact so that the schedule is testable to the second (issue 9)."""
from __future__ import annotations

import logging

import pytest
from fake_stack import serve

from sidecar.router.attempt import STACK_LADDER
from sidecar.router.io.stack_channel import StackChannel
from sidecar.router.io.pump import DeliveryPump
from sidecar.router.io.storage import RouterStore
from sidecar.stack.client import StackClient
from sidecar.stack.writes import followup_chat_key, marker_write

from routerhelp import T0, emit, make_state

NOW = T0


@pytest.fixture
def stack_server():
    yield from serve()


@pytest.fixture
async def client(stack_server):
    c = StackClient(stack_server.url, timeout=2.0)
    yield c
    await c.close()


@pytest.fixture
def state():
    return make_state()


async def put(rstore: RouterStore, st, ru: str, step: int, at: float = NOW, tu: str = "tu") -> str:
    """Route a followUpChat marker write for (tu, ru) at ``step`` at ``at``; return its key."""
    key = followup_chat_key(tu, ru, "src", step)
    w = marker_write(tu, ru, "followUpChat", {"sourceUnansweredTaskId": "src", "step": step}, key)
    await emit(rstore, st, [w.event("followUpChat", "set", {"ru": ru})], at)
    return key


def pump_of(rstore, client, concurrency: int = 8) -> DeliveryPump:
    return DeliveryPump(rstore, {}, stack=StackChannel(client, batch=False), concurrency=concurrency)


def arrivals(server) -> dict[str, list[str]]:
    """Keys in the order the server got them, per RU (pairs of one round race each other)."""
    out: dict[str, list[str]] = {}
    for s in server.writes():
        out.setdefault(s.path.split("/")[5], []).append(s.headers["idempotency-key"])
    return out


async def rows_of(rstore, ru: str):
    return [d for d in await rstore.deliveries() if d.ru == ru]


def delivered(res) -> list[str]:
    return [row.idem_key for row, nxt in res.settled if nxt.status == "delivered"]


async def test_delivers_everything_in_pair_order(rstore, state, client, stack_server):
    a0, b0, a1, a2 = [await put(rstore, state, ru, s) for ru, s in (("A", 0), ("B", 0), ("A", 1), ("A", 2))]
    res = await pump_of(rstore, client).run_due(NOW)
    # round 1: heads A0, B0; round 2: A1 (its head acknowledged); round 3: A2
    assert delivered(res) == [a0, b0, a1, a2]
    assert (res.next_due, res.stack_requests) == (None, 4)
    assert arrivals(stack_server) == {"A": [a0, a1, a2], "B": [b0]}
    for s in stack_server.writes():
        assert s.headers["content-type"] == "application/json"
        assert s.method == "PUT" and s.path.startswith("/v1/tus/tu/favorites/")


async def test_failing_head_blocks_only_its_pair(rstore, state, client, stack_server):
    a0, a1 = await put(rstore, state, "A", 0), await put(rstore, state, "A", 1)
    b0, b1 = await put(rstore, state, "B", 0), await put(rstore, state, "B", 1)
    stack_server.fail(500, path_contains="/favorites/A/")
    pump = pump_of(rstore, client)
    res = await pump.run_due(NOW)
    assert delivered(res) == [b0, b1]
    assert arrivals(stack_server) == {"A": [a0], "B": [b0, b1]}  # A1 never sent
    head, second = await rows_of(rstore, "A")
    assert (head.idem_key, head.status, head.attempts, head.next_attempt_at) == (a0, "pending", 1, NOW + 5)
    assert head.last_error.startswith("retryable: HTTP 500")
    assert (second.idem_key, second.attempts, second.next_attempt_at) == (a1, 0, NOW)
    assert res.next_due == NOW + 5
    # A1 is due but its head is not: nothing goes out before NOW + 5
    res = await pump.run_due(NOW + 4.9)
    assert (res.settled, res.next_due) == ([], NOW + 5)
    assert len(stack_server.writes()) == 3


async def test_backoff_ladder_exact_one_key_then_recovery(rstore, state, client, stack_server):
    a0, a1 = await put(rstore, state, "A", 0), await put(rstore, state, "A", 1)
    stack_server.fail(503)
    pump = pump_of(rstore, client)
    t, seen = NOW, []
    for _ in range(7):
        res = await pump.run_due(t)
        head = (await rows_of(rstore, "A"))[0]
        seen.append((head.attempts, head.next_attempt_at - t))
        assert res.next_due == head.next_attempt_at
        t = head.next_attempt_at
    assert seen == [(1, 5), (2, 15), (3, 30), (4, 60), (5, 120), (6, 120), (7, 120)]
    assert STACK_LADDER == (5, 15, 30, 60, 120)
    assert len(stack_server.writes()) == 7
    assert {s.headers["idempotency-key"] for s in stack_server.writes()} == {a0}
    stack_server.heal()
    res = await pump.run_due(t)
    assert delivered(res) == [a0, a1] and res.next_due is None
    assert [s.headers["idempotency-key"] for s in stack_server.applied] == [a0, a1]


async def test_rejected_write_fails_is_logged_and_its_pair_goes_on(rstore, state, client,
                                                                   stack_server, caplog):
    """A terminal Stack answer fails that write (DESIGN §10 as revised; docs/decisions.md "A
    refused Stack write"): it is logged at ERROR once, keeps Stack's status, and the pair's later
    write goes out in the same pass — no retry every 2 min for good, no pair held behind it."""
    a0, a1 = await put(rstore, state, "A", 0), await put(rstore, state, "A", 1)
    b0 = await put(rstore, state, "B", 0)
    stack_server.fail(400, key=a0, times=1)
    pump = pump_of(rstore, client, concurrency=1)
    with caplog.at_level(logging.ERROR, logger="sidecar.router.io.stack_channel"):
        res = await pump.run_due(NOW)
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and "STACK REFUSED" in caplog.text and a0 in caplog.text and "HTTP 400" in caplog.text
    head, second = await rows_of(rstore, "A")
    assert (head.idem_key, head.status, head.attempts, head.next_attempt_at) == (a0, "failed", 1, None)
    assert head.last_error.startswith("terminal: HTTP 400")
    assert (second.idem_key, second.status) == (a1, "delivered")
    assert sorted(delivered(res)) == sorted([a1, b0]) and res.next_due is None


async def test_outage_stops_the_pass_and_comes_back_at_the_first_retry(rstore, state, client,
                                                                      stack_server):
    ks = [await put(rstore, state, f"R{i}", 0) for i in range(5)]
    stack_server.stop()
    pump = pump_of(rstore, client, concurrency=2)
    res = await pump.run_due(NOW)
    assert delivered(res) == [] and res.stack_requests == 2
    assert [row.idem_key for row, _ in res.settled] == ks[:2]
    rows = await rstore.deliveries()
    assert [(r.attempts, r.next_attempt_at) for r in rows] == [(1, NOW + 5)] * 2 + [(0, NOW)] * 3
    # the untried rows are due, but Stack is unreachable: come back at the first retry, not now
    # (walking the queue into timeouts pass after pass is what the outage stop prevents)
    assert res.next_due == NOW + 5
    stack_server.start()
    res = await pump.run_due(NOW + 5)
    assert sorted(delivered(res)) == sorted(ks) and res.next_due is None


async def test_dropped_connections_count_as_outage(rstore, state, client, stack_server):
    await put(rstore, state, "A", 0)
    await put(rstore, state, "B", 0)
    stack_server.fail("down")
    res = await pump_of(rstore, client, concurrency=1).run_due(NOW)
    assert len(res.settled) == 1 and res.next_due == NOW + 5


async def test_an_outage_does_not_hold_back_other_targets(rstore, client, stack_server):
    from routerhelp import Scripted
    from sidecar.router.model import RoutingEvent

    st = make_state({"name": "r", "actions": [{"target": "crm-hook"}]})
    await put(rstore, st, "A", 0)
    await emit(rstore, st, [RoutingEvent(source="electron", subject="s", action="a", payload={})], NOW + 2)
    stack_server.stop()
    hook = Scripted("crm-hook")
    pump = DeliveryPump(rstore, {"crm-hook": hook}, stack=StackChannel(client, batch=False))
    res = await pump.run_due(NOW)  # the rule matched the marker's event too: sent at once
    assert res.next_due == NOW + 2  # the webhook's next row, before Stack's retry at NOW + 5
    await pump.run_due(NOW + 2)
    assert [c[1] for c in hook.calls] == [NOW, NOW + 2]


async def test_resend_after_lost_ack_is_harmless(rstore, state, client, stack_server):
    key = await put(rstore, state, "A", 0)
    [row] = await rstore.deliveries()
    await client.send(row.method, row.path, bytes(row.message), key)  # sent, then "crashed"
    res = await pump_of(rstore, client).run_due(NOW)
    assert delivered(res) == [key]
    assert [s.outcome for s in stack_server.writes()] == ["applied", "replayed"]
    assert len(stack_server.applied) == 1


async def test_concurrency_bound(rstore, state, stack_server):
    for i in range(8):
        await put(rstore, state, f"R{i}", 0)
    stack_server.fail("delay", seconds=0.1)
    async with StackClient(stack_server.url, timeout=2.0) as c:
        res = await pump_of(rstore, c, concurrency=4).run_due(NOW)
    assert len(delivered(res)) == 8 and stack_server.max_in_flight == 4


async def test_rows_not_yet_due(rstore, state, client, stack_server):
    await put(rstore, state, "A", 0, at=NOW + 30)
    res = await pump_of(rstore, client).run_due(NOW)
    assert (res.settled, res.next_due) == ([], NOW + 30)
    assert stack_server.writes() == []


def test_bad_settings(rstore, client):
    with pytest.raises(ValueError):
        DeliveryPump(rstore, {}, stack=StackChannel(client), concurrency=0)


@pytest.mark.parametrize("batch", [False, True])
async def test_unexpected_client_exception_keeps_the_row(rstore, state, batch, caplog):
    class Broken:
        async def send(self, *args):
            raise RuntimeError("bug")

        async def batch(self, *args):
            raise RuntimeError("bug")

    a0 = await put(rstore, state, "A", 0)
    b0 = await put(rstore, state, "B", 0)
    pump = DeliveryPump(rstore, {}, stack=StackChannel(Broken(), batch=batch))  # type: ignore[arg-type]
    with caplog.at_level(logging.ERROR):
        res = await pump.run_due(NOW)  # never raises: a bug in the client must not drop a write
    assert sorted(row.idem_key for row, _ in res.settled) == sorted([a0, b0])
    for kept in await rstore.deliveries():
        assert (kept.status, kept.attempts, kept.next_attempt_at) == ("pending", 1, NOW + 5)
        assert "RuntimeError" in kept.last_error
    assert "RuntimeError: bug" in caplog.text


async def test_a_pass_reads_once_per_round_and_its_end_comes_with_the_last_round(
        store, rstore, state, client, stack_server):
    """Store reads per pass (issue 11: each is a hop to aiosqlite's thread): one per round, the
    round that finds nothing bringing the pass's end (next due row, Stack's heads) — no separate
    reads for them; the round's claim and settle are commits (on the loop's own connection)."""
    pump = pump_of(rstore, client)

    def counts() -> tuple[int, int]:
        return store.counters.hops, store.counters.commits

    before = counts()
    res = await pump.run_due(NOW)  # nothing queued: one read
    assert (res.next_due, res.stack_heads) == (None, (None, None, 0))
    assert [a - b for a, b in zip(counts(), before)] == [1, 0]
    a0, b0, a1 = [await put(rstore, state, ru, s) for ru, s in (("A", 0), ("B", 0), ("A", 1))]
    before = counts()
    res = await pump.run_due(NOW)
    assert delivered(res) == [a0, b0, a1]
    assert (res.next_due, res.stack_heads) == (None, (None, None, 0))
    # rounds {A0, B0} and {A1}: a read, a claim and a settle commit each; then the empty read
    assert [a - b for a, b in zip(counts(), before)] == [3, 4]
    stack_server.fail(503)
    await put(rstore, state, "A", 2)
    before = counts()
    res = await pump.run_due(NOW)
    assert res.stack_heads == (None, NOW + 5, 1) and res.next_due == NOW + 5
    # the outage stops Stack's sends: the next round reads the other targets' rows, with the end
    assert [a - b for a, b in zip(counts(), before)] == [2, 2]
