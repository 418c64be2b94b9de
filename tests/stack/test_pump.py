"""OutboxPump against a real loopback Stack and a real SQLite store (DESIGN §9, §10)."""
from __future__ import annotations

import logging

import pytest

from sidecar.core.rng import KeyedRandom
from sidecar.stack.client import StackClient
from sidecar.stack.errors import StackRejected, StackUnavailable
from sidecar.stack.outbox import OutboxPump
from sidecar.stack.writes import followup_chat_key, marker_write
from sidecar.store.db import Store

NOW = 1_796_025_600.0


async def put(store: Store, ru: str, step: int, at: float = NOW, tu: str = "tu") -> str:
    """Queue a followUpChat marker write for (tu, ru) at ``step``; return its key."""
    key = followup_chat_key(tu, ru, "src", step)
    w = marker_write(tu, ru, "followUpChat", {"sourceUnansweredTaskId": "src", "step": step}, key)
    await store.commit([w.enqueue(at)])
    return key


def keys(rows) -> list[str]:
    return [r.idem_key for r in rows]


def arrivals(server) -> dict[str, list[str]]:
    """Keys in the order the server got them, per pair (pairs of one round race each other)."""
    out: dict[str, list[str]] = {}
    for s in server.writes():
        out.setdefault(s.path.split("/")[5], []).append(s.headers["idempotency-key"])
    return out


async def test_delivers_everything_in_pair_order(store, client, stack_server):
    a0, b0, a1, a2 = [await put(store, ru, s) for ru, s in (("A", 0), ("B", 0), ("A", 1), ("A", 2))]
    res = await OutboxPump(store, client).run_due(NOW)
    # round 1: heads A0, B0; round 2: A1 (unblocked by A0's ack); round 3: A2
    assert keys(res.acked) == [a0, b0, a1, a2]
    assert (res.failed, res.next_due, res.stalled) == ([], None, False)
    assert await store.outbox_size() == 0
    assert arrivals(stack_server) == {"A": [a0, a1, a2], "B": [b0]}
    for s in stack_server.writes():
        assert s.headers["content-type"] == "application/json"
        assert s.method == "PUT" and s.path.startswith("/v1/tus/tu/favorites/")


async def test_failing_head_blocks_only_its_pair(store, client, stack_server):
    a0, a1 = await put(store, "A", 0), await put(store, "A", 1)
    b0, b1 = await put(store, "B", 0), await put(store, "B", 1)
    stack_server.fail(500, path_contains="/favorites/A/")
    res = await OutboxPump(store, client).run_due(NOW)
    assert keys(res.acked) == [b0, b1]
    [(row, err)] = res.failed
    assert row.idem_key == a0 and isinstance(err, StackUnavailable) and err.status == 500
    assert arrivals(stack_server) == {"A": [a0], "B": [b0, b1]}  # A1 never sent
    [head, second] = await store.outbox_rows(pair="tu/A")
    assert (head.idem_key, head.attempts, head.next_at) == (a0, 1, NOW + 5)
    assert head.last_error == ("StackUnavailable 500: "
                               "PUT /v1/tus/tu/favorites/A/markers/followUpChat: HTTP 500")
    assert (second.idem_key, second.attempts, second.next_at) == (a1, 0, NOW)
    assert res.next_due == NOW + 5
    # A1 is due but its head is not: nothing goes out before NOW + 5
    res = await OutboxPump(store, client).run_due(NOW + 4.9)
    assert (res.acked, res.failed, res.next_due) == ([], [], NOW + 5)
    assert len(stack_server.writes()) == 3


async def test_backoff_ladder_exact_then_recovery(store, client, stack_server):
    a0, a1 = await put(store, "A", 0), await put(store, "A", 1)
    stack_server.fail(503)
    pump = OutboxPump(store, client)
    t, seen = NOW, []
    for _ in range(7):
        res = await pump.run_due(t)
        [(row, _err)] = res.failed
        head = (await store.outbox_rows(pair="tu/A"))[0]
        seen.append((head.attempts, head.next_at - t))
        assert res.next_due == head.next_at
        t = head.next_at
    assert seen == [(1, 5), (2, 15), (3, 30), (4, 60), (5, 120), (6, 120), (7, 120)]
    assert len(stack_server.writes()) == 7 and {s.headers["idempotency-key"]
                                               for s in stack_server.writes()} == {a0}
    stack_server.heal()
    res = await pump.run_due(t)
    assert keys(res.acked) == [a0, a1] and res.next_due is None
    assert [s.headers["idempotency-key"] for s in stack_server.applied] == [a0, a1]


async def test_rejected_write_is_kept_retried_at_last_step_and_logged(store, client, stack_server,
                                                                      caplog):
    a0, a1 = await put(store, "A", 0), await put(store, "A", 1)
    b0 = await put(store, "B", 0)
    stack_server.fail(400, path_contains="/favorites/A/")
    pump = OutboxPump(store, client)
    with caplog.at_level(logging.ERROR, logger="sidecar.stack.outbox"):
        res = await pump.run_due(NOW)
    assert keys(res.acked) == [b0]
    [(row, err)] = res.failed
    assert row.idem_key == a0 and isinstance(err, StackRejected) and err.status == 400
    assert [r.levelname for r in caplog.records] == ["ERROR"]
    assert "STACK REJECTED" in caplog.text and a0 in caplog.text
    head = (await store.outbox_rows(pair="tu/A"))[0]
    assert (head.idem_key, head.attempts, head.next_at) == (a0, 1, NOW + 120)
    res = await pump.run_due(NOW + 120)
    assert res.failed[0][0].idem_key == a0
    assert (await store.outbox_rows(pair="tu/A"))[0].next_at == NOW + 240
    stack_server.heal()  # fixed on Stack's side: the kept writes go out, in order
    res = await pump.run_due(NOW + 240)
    assert keys(res.acked) == [a0, a1] and await store.outbox_size() == 0


async def test_outage_stops_the_pass_then_recovers(store, client, stack_server):
    ks = [await put(store, f"R{i}", 0) for i in range(5)]
    stack_server.stop()
    pump = OutboxPump(store, client, concurrency=2)
    res = await pump.run_due(NOW)
    assert res.stalled and res.acked == [] and res.next_due == NOW + 5
    assert keys(r for r, _ in res.failed) == ks[:2]
    rows = await store.outbox_rows()
    assert [(r.attempts, r.next_at) for r in rows] == [(1, NOW + 5)] * 2 + [(0, NOW)] * 3
    stack_server.start()
    res = await pump.run_due(NOW + 5)
    assert keys(res.acked) == ks  # every head due again, by id
    assert not res.stalled and res.next_due is None


async def test_dropped_connections_count_as_outage(store, client, stack_server):
    await put(store, "A", 0)
    await put(store, "B", 0)
    stack_server.fail("down")
    res = await OutboxPump(store, client, concurrency=1).run_due(NOW)
    assert res.stalled and len(res.failed) == 1 and res.next_due == NOW + 5


async def test_resend_after_lost_ack_is_harmless(store, client, stack_server):
    key = await put(store, "A", 0)
    [row] = await store.outbox_due(NOW)
    await client.send(row.method, row.path, row.body, row.idem_key)  # sent, then "crashed"
    res = await OutboxPump(store, client).run_due(NOW)
    assert keys(res.acked) == [key]
    assert [s.outcome for s in stack_server.writes()] == ["applied", "replayed"]
    assert len(stack_server.applied) == 1


async def test_concurrency_bound(store, stack_server):
    for i in range(8):
        await put(store, f"R{i}", 0)
    stack_server.fail("delay", seconds=0.1)
    async with StackClient(stack_server.url, timeout=2.0) as c:
        res = await OutboxPump(store, c, concurrency=4).run_due(NOW)
    assert len(res.acked) == 8 and stack_server.max_in_flight == 4


async def test_rows_not_yet_due_and_new_rows(store, client, stack_server):
    await put(store, "A", 0, at=NOW + 30)
    res = await OutboxPump(store, client).run_due(NOW)
    assert (res.acked, res.next_due) == ([], NOW + 30)
    assert stack_server.writes() == []


async def test_keyed_jitter_is_deterministic(store, client, stack_server):
    await put(store, "A", 0)
    stack_server.fail(500)
    rng = KeyedRandom(7)
    res = await OutboxPump(store, client, rng=rng, jitter=0.5).run_due(NOW)
    row = res.failed[0][0]
    expect = NOW + 5 * (1 + 0.5 * KeyedRandom(7).unit("outbox", row.idem_key, 0))
    assert res.next_due == expect and NOW + 5 <= expect < NOW + 7.5


def test_bad_settings(store, client):
    with pytest.raises(ValueError):
        OutboxPump(store, client, concurrency=0)
    with pytest.raises(ValueError):
        OutboxPump(store, client, ladder=(5, 0))
    with pytest.raises(ValueError):
        OutboxPump(store, client, jitter=0.1)


async def test_unexpected_client_exception_keeps_the_row(store):
    class Broken:
        async def send(self, *args):
            raise RuntimeError("bug")

    key = await put(store, "A", 0)
    res = await OutboxPump(store, Broken(), ladder=(5, 60)).run_due(NOW)  # type: ignore[arg-type]
    [(row, err)] = res.failed
    assert row.idem_key == key and str(err) == "RuntimeError: bug" and not res.stalled
    [kept] = await store.outbox_rows()
    assert (kept.attempts, kept.next_at, kept.last_error) == (1, NOW + 60,
                                                              "StackError: RuntimeError: bug")
