"""The pump per batch on the wall clock (issue 21 item 2; docs/decisions.md "The pump per
batch"): a detached pass claims up to ``per_target`` due rows of a target and sends them one
after another (after a failure the rest are held, not attempts); the journal is written inline;
the pass's reads go through the ``deliveries_head`` index with a LIMIT, so the statements and
transactions of a pass do not grow with a backlog elsewhere (counted, not timed)."""
from __future__ import annotations

import asyncio

from sidecar.router.attempt import DELIVERED, retryable
from sidecar.router.config import Target
from sidecar.router.io.channels import JournalChannel
from sidecar.router.io.pump import DeliveryPump
from sidecar.router.io.storage import _HEAD
from sidecar.router.model import Delivery
from sidecar.router.ops import PutDelivery

from routerhelp import T0, Scripted


def _row(i: int, target: str, channel: str) -> Delivery:
    if channel == "stack":
        return Delivery(f"ev-s{i}.0", f"ev-s{i}", T0 - 10, "sidecar", "stack", "write", "normal", None,
                        "stack", "stack", "pending", b"{}", 0, T0 - 10, None, None, None, None,
                        f"tu/ru-{i}", f"k-{i}", "PUT", f"/v1/x/{i}", "tu", f"ru-{i}")
    return Delivery(f"ev-{target}{i}.1", f"ev-{target}{i}", T0 - 5 + i * 1e-3, "electron", "a", "b",
                    "normal", "r", channel, target, "pending", b'{"n":1}', 0, T0 - 5 + i * 1e-3, None)


async def _settle_all(pump: DeliveryPump, woke: asyncio.Event, now: float) -> None:
    async with asyncio.timeout(10):
        while pump.in_flight:
            await woke.wait()
            woke.clear()
        await pump.run_due(now, detach=True)


async def test_a_target_sends_a_batch_per_pass_and_holds_the_rest_after_a_failure(rstore):
    bad = "ev-crm-hook2.1"
    ch = Scripted("crm-hook", lambda r, n: retryable("HTTP 503", 503) if r.id == bad else DELIVERED)
    await rstore.commit([PutDelivery(_row(i, "crm-hook", "webhook")) for i in range(6)])
    woke = asyncio.Event()
    pump = DeliveryPump(rstore, {"crm-hook": ch}, wake=woke.set, per_target=4)
    res = await pump.run_due(T0, detach=True)
    assert res.claimed == 4
    async with asyncio.timeout(10):
        while pump.in_flight:
            await woke.wait()
            woke.clear()
    assert [c[0] for c in ch.calls] == ["ev-crm-hook0.1", "ev-crm-hook1.1", bad]  # one at a time
    await pump.run_due(T0, detach=True)  # settles the landing; the next batch: rows 3..5
    rows = {r.id: r for r in await rstore.deliveries(target="crm-hook")}
    assert rows[bad].attempts == 1 and rows[bad].next_attempt_at == T0 + 30
    await _settle_all(pump, woke, T0)
    assert [c[0] for c in ch.calls][3:] == ["ev-crm-hook3.1", "ev-crm-hook4.1", "ev-crm-hook5.1"]
    rows = {r.id: r for r in await rstore.deliveries(target="crm-hook")}
    # claimed with the first batch but never sent: not an attempt (it was sent once, later)
    assert (rows["ev-crm-hook3.1"].status, rows["ev-crm-hook3.1"].attempts) == ("delivered", 1)
    await pump.close()


async def test_the_journal_is_written_inline_without_a_task(rstore, tmp_path):
    chan = JournalChannel("audit", Target(channel="journal"), tmp_path)
    await rstore.commit([PutDelivery(_row(i, "audit", "journal")) for i in range(5)])
    pump = DeliveryPump(rstore, {"audit": chan}, per_target=16)
    res = await pump.run_due(T0, detach=True)
    assert not pump.in_flight and res.claimed == 5 and len(res.settled) == 5
    assert {r.status for r in await rstore.deliveries(target="audit")} == {"delivered"}
    assert len(chan.path.read_text().splitlines()) == 5
    await pump.close()


async def _count_pass(store, rstore, tmp_path, backlog: int) -> tuple[int, int, int]:
    await rstore.commit([PutDelivery(_row(i, "stack", "stack")) for i in range(backlog)])
    await rstore.commit([PutDelivery(_row(i, "audit", "journal")) for i in range(20)])
    pump = DeliveryPump(rstore, {"audit": JournalChannel("audit", Target(channel="journal"), tmp_path)},
                        per_target=8)
    await pump.run_due(T0, detach=True)  # the first pass asks for orphans once: not counted
    seen: list[str] = []
    steps = [0]  # SQLite VM instructions, in hundreds: the work, whatever the machine's speed

    def step() -> int:
        steps[0] += 1
        return 0
    writer = store._writer.conn if store._writer is not None else None  # commits on the loop
    for on in (True, False):
        if not on:
            await pump.run_due(T0, detach=True)
        await store._run(lambda c: (c.set_trace_callback(seen.append if on else None),
                                    c.set_progress_handler(step if on else None, 100)))
        if writer is not None:
            writer.set_trace_callback(seen.append if on else None)
            writer.set_progress_handler(step if on else None, 100)
    await pump.close()
    return len(seen), sum(1 for s in seen if s.lstrip().upper().startswith("BEGIN")), steps[0]


async def test_statements_and_transactions_per_pass_do_not_grow_with_a_stack_backlog(tmp_path):
    from sidecar.router.io.storage import RouterStore
    from sidecar.store.db import Store
    counts = []
    for backlog in (10, 2000):
        store = await Store.open(tmp_path / f"b{backlog}.db")
        try:
            counts.append(await _count_pass(store, RouterStore(store), tmp_path / f"j{backlog}", backlog))
        finally:
            await store.close()
    assert counts[0][:2] == counts[1][:2], counts
    assert counts[1][2] <= counts[0][2] * 1.2 + 10, counts  # the work does not follow the backlog
    statements, transactions, _ = counts[0]
    assert transactions == 1  # the batch's claims and settles together: not one per row
    assert statements < 8 * 6, statements  # 8 rows: a claim and a settle each, plus the reads


async def test_the_due_head_read_goes_through_the_index(store):
    plan = await store._run(lambda c: c.execute("EXPLAIN QUERY PLAN " + _HEAD, ("audit", T0, 8)).fetchall())
    text = " ".join(str(r[-1]) for r in plan)
    assert "USING INDEX deliveries_head" in text and "SCAN" not in text.replace("SCAN TABLE", "x"), text


async def test_the_pass_that_settles_a_landing_plans_the_next_from_the_settled_rows(rstore):
    """Breaker (issue 21, wall clock): a landing settled by a pass that claimed nothing was
    committed AFTER that pass had read its end — so the next due instant came from the row as
    claimed (its 30 s in-flight lease), not as settled: a 429 asking for 5 s was retried at
    30 s (a 503's retry, sender health's news, the same).  The end is read after the commit."""
    from sidecar.router.attempt import flooded

    ch = Scripted("crm-hook", lambda r, n: flooded("HTTP 429", retry_after=5.0))
    await rstore.commit([PutDelivery(_row(0, "crm-hook", "webhook"))])
    woke = asyncio.Event()
    pump = DeliveryPump(rstore, {"crm-hook": ch}, wake=woke.set)
    res = await pump.run_due(T0, detach=True)
    assert res.claimed == 1
    async with asyncio.timeout(10):
        while pump.in_flight:
            await woke.wait()
            woke.clear()
    res = await pump.run_due(T0 + 0.1, detach=True)  # settles the landing, claims nothing
    (row,) = await rstore.deliveries(target="crm-hook")
    assert row.attempts == 0 and T0 + 5.0 <= row.next_attempt_at < T0 + 5.2  # settled at T0 + 0.1
    assert res.claimed == 0 and res.next_due == res.other_due == row.next_attempt_at
    await pump.close()


class _Gated(Scripted):
    """Answers DELIVERED once ``gate`` is set (a slow receiver)."""

    def __init__(self, name: str, gate: asyncio.Event) -> None:
        super().__init__(name)
        self.gate = gate

    async def send(self, row, now):  # type: ignore[no-untyped-def]
        await self.gate.wait()
        return await super().send(row, now)


async def test_an_attempt_that_lands_after_another_pass_settled_a_landing_is_settled_too(rstore):
    """Breaker (issue 21, wall clock; 3 of 7 targets in 3 of 5 runs): a detached attempt bound
    the pump's landing list when it started (``self._landed.append(await send…)``); a pass that
    settled another target's landing meanwhile swapped the list, so the slow attempt's outcome
    went to the old one and was lost — its row stayed "in flight" until the 30 s claim lease."""
    gate = asyncio.Event()
    fast, slow = Scripted("fast"), _Gated("slow", gate)
    await rstore.commit([PutDelivery(_row(0, "fast", "webhook")), PutDelivery(_row(0, "slow", "webhook"))])
    woke = asyncio.Event()
    pump = DeliveryPump(rstore, {"fast": fast, "slow": slow}, wake=woke.set)
    assert (await pump.run_due(T0, detach=True)).claimed == 2
    async with asyncio.timeout(10):
        while "fast" in pump.in_flight:
            await woke.wait()
            woke.clear()
    await pump.run_due(T0 + 0.1, detach=True)  # settles the fast landing while slow still flies
    assert pump.in_flight == ("slow",)
    gate.set()
    await _settle_all(pump, woke, T0 + 0.2)
    rows = {r.target: r for r in await rstore.deliveries()}
    assert (rows["fast"].status, rows["slow"].status) == ("delivered", "delivered")
    assert rows["slow"].attempts == 1 and not (rows["slow"].last_error or "").startswith("in flight")
    await pump.close()
