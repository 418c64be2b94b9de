"""Handed-over deliveries (DESIGN §9 "Handed-over deliveries"; issue 21 item 5): the hand-over
decision at a logout, its Stack PUT rows, the release (Stack DELETE) queued by the store in the
transaction that settles a row — through the real pump too — and the restore on another
machine's store (same id, attempts, next attempt; one row on a re-login)."""
from __future__ import annotations

import base64
import json

import msgspec

from sidecar.router import handover
from sidecar.router.attempt import DELIVERED, retryable
from sidecar.router.io.pump import DeliveryPump
from sidecar.router.io.storage import RouterStore
from sidecar.router.model import RoutingEvent, StackWrite
from sidecar.router.ops import SettleDelivery
from sidecar.store.db import Store

from routerhelp import T0, Scripted, emit, make_state


def crm(tu: str | None, n: int = 0) -> RoutingEvent:
    payload = {"n": n} if tu is None else {"tu": tu, "n": n}
    return RoutingEvent(source="electron", subject="crm", action="sync", payload=payload)


def marker(tu: str) -> RoutingEvent:
    return RoutingEvent(source="markers", subject="followUpChat", action="set", priority="high",
                        write=StackWrite(f"{tu}/r1", f"k-{tu}", "PUT",
                                         f"/v1/tus/{tu}/favorites/r1/markers/followUpChat", b"{}", tu, "r1"))


RULE = {"name": "crm", "conditions": {"source": "electron"}, "actions": [{"target": "crm-hook"}]}


async def test_a_logout_hands_over_only_the_tus_pending_non_stack_rows(rstore):
    st = make_state(RULE)
    await emit(rstore, st, [crm("tu-a", 1), crm("tu-b", 2), crm(None, 3), marker("tu-a")], T0)
    rows = await rstore.deliveries()
    assert [(d.channel, d.tu) for d in rows] == [("webhook", "tu-a"), ("webhook", "tu-b"),
                                                 ("webhook", None), ("stack", "tu-a")]
    mine = await rstore.pending_kept("tu-a")
    assert [d.id for d in handover.to_hand_over(mine, "tu-a")] == ["ev-1.0"]
    assert handover.to_hand_over(rows, "tu-a") == [rows[0]]  # not tu-b's, not process-wide, not Stack's
    ops = handover.handover_ops(mine, "tu-a", T0 + 60)
    await rstore.commit(ops)
    (put,) = [d for d in await rstore.deliveries() if d.source == handover.SOURCE]
    assert (put.channel, put.method, put.path) == ("stack", "PUT", "/v1/tus/tu-a/deliveries/ev-1.0")
    assert put.idem_key == put.id == f"handover:tu-a:ev-1.0:put@{T0 + 60:.3f}"
    assert put.pair == "tu-a/delivery:ev-1.0" and put.status == "pending"
    body = json.loads(put.message)
    assert (body["id"], body["target"], body["attempts"], body["next_attempt_at"]) == ("ev-1.0", "crm-hook", 0, T0)
    assert base64.b64decode(body["message_b64"]) == bytes(rows[0].message)
    # the original row stays pending here: this machine keeps sending it itself
    assert (await rstore.deliveries(target="crm-hook"))[0].status == "pending"


async def test_any_terminal_outcome_queues_the_release_after_the_put(rstore):
    st = make_state(RULE)
    await emit(rstore, st, [crm("tu-a", 1), crm("tu-a", 2), crm("tu-a", 3)], T0)
    await rstore.commit(handover.handover_ops(await rstore.pending_kept("tu-a"), "tu-a", T0 + 1))
    for i, status in enumerate(("delivered", "failed")):
        await rstore.commit([SettleDelivery(f"ev-{i + 1}.0", status, 1, None, None, None, T0 + 5)])
    releases = [d for d in await rstore.deliveries() if d.method == "DELETE"]
    assert [(d.path, d.pair, d.status) for d in releases] == [
        ("/v1/tus/tu-a/deliveries/ev-1.0", "tu-a/delivery:ev-1.0", "pending"),
        ("/v1/tus/tu-a/deliveries/ev-2.0", "tu-a/delivery:ev-2.0", "pending")]
    assert releases[0].idem_key == f"handover:tu-a:ev-1.0:delete@{T0 + 5:.3f}"
    assert json.loads(releases[0].message) == {}
    runs = await rstore.due_stack(T0 + 5, 500)  # each lane: its PUT, then its DELETE
    assert [[d.method for d in run] for run in runs] == [["PUT", "DELETE"], ["PUT", "DELETE"], ["PUT"]]
    # released once: settling again (it is not pending) queues nothing more
    await rstore.commit([SettleDelivery("ev-1.0", "failed", 2, None, None, None, T0 + 9)])
    assert len([d for d in await rstore.deliveries() if d.method == "DELETE"]) == 2


async def test_a_row_never_handed_over_is_not_released_and_a_settled_one_is_not_handed_over(rstore):
    st = make_state(RULE)
    await emit(rstore, st, [crm("tu-a", 1), crm("tu-a", 2)], T0)
    stale = await rstore.pending_kept("tu-a")  # read before ev-2 settled (a race with the pump)
    await rstore.commit([SettleDelivery("ev-2.0", "delivered", 1, None, None, T0 + 1, T0 + 1)])
    await rstore.commit(handover.handover_ops(stale, "tu-a", T0 + 2))
    puts = [d.path for d in await rstore.deliveries() if d.method == "PUT"]
    assert puts == ["/v1/tus/tu-a/deliveries/ev-1.0"]  # the delivered one has nothing to continue
    assert not [d for d in await rstore.deliveries() if d.method == "DELETE"]


async def test_the_pumps_delivery_releases_the_handover(rstore):
    st = make_state(RULE)
    hook = Scripted("crm-hook", lambda r, n: retryable("HTTP 503", 503) if n < T0 + 30 else DELIVERED)
    pump = DeliveryPump(rstore, {"crm-hook": hook})
    await emit(rstore, st, [crm("tu-a", 1)], T0)
    await pump.run_due(T0)
    await rstore.commit(handover.handover_ops(await rstore.pending_kept("tu-a"), "tu-a", T0 + 10))
    await pump.run_due(T0 + 30)
    rows = await rstore.deliveries()
    assert [(d.target, d.method, d.status) for d in rows] == [
        ("crm-hook", None, "delivered"), ("stack", "PUT", "pending"), ("stack", "DELETE", "pending")]


def listed(rows, tu="tu-a") -> list[dict]:
    """Stack's startup ``deliveries``: the bodies of the PUT rows, as Stack stores them."""
    return [json.loads(d.message) for d in rows if d.method == "PUT" and d.tu == tu]


async def test_another_machine_continues_them_with_id_attempts_and_next_attempt(rstore, tmp_path):
    st = make_state(RULE)
    pump = DeliveryPump(rstore, {"crm-hook": Scripted("crm-hook", lambda r, n: retryable("HTTP 503", 503))})
    await emit(rstore, st, [crm("tu-a", 1)], T0)
    await pump.run_due(T0)  # attempt 1 failed: next at +30 s
    (old,) = await rstore.pending_kept("tu-a")
    await rstore.commit(handover.handover_ops([old], "tu-a", T0 + 10))
    items = listed(await rstore.deliveries())
    other = await Store.open(tmp_path / "machine-2" / "sidecar.db")
    try:
        rs2 = RouterStore(other)
        ops, skipped = handover.restored("tu-a", items, T0 + 500)
        await rs2.commit(ops)
        await rs2.commit(ops)  # a repeated login (or Stack listing it twice) keeps one row
        (row,) = await rs2.deliveries()
        assert skipped == 0
        assert (row.id, row.status, row.attempts, row.next_attempt_at) == (old.id, "pending", 1, T0 + 30)
        assert (row.target, row.channel, row.tu, bytes(row.message)) == ("crm-hook", "webhook", "tu-a", bytes(old.message))
        assert "handover" in (row.note or "")
        hook2 = Scripted("crm-hook")  # this machine's own health: judged afresh, it sends at once
        await DeliveryPump(rs2, {"crm-hook": hook2}).run_due(T0 + 500)
        assert hook2.calls == [(old.id, T0 + 500, 1)]  # same id = same webhook-id
        rows = await rs2.deliveries()
        assert [(d.method, d.path) for d in rows[1:]] == [("DELETE", "/v1/tus/tu-a/deliveries/ev-1.0")]
    finally:
        await other.close()


async def test_a_relogin_on_the_same_machine_keeps_its_one_row(rstore):
    st = make_state(RULE)
    await emit(rstore, st, [crm("tu-a", 1)], T0)
    await rstore.commit(handover.handover_ops(await rstore.pending_kept("tu-a"), "tu-a", T0 + 1))
    ops, _ = handover.restored("tu-a", listed(await rstore.deliveries()), T0 + 2)
    await rstore.commit(ops)
    assert [d.id for d in await rstore.deliveries(target="crm-hook")] == ["ev-1.0"]


def test_restore_skips_what_is_not_a_handover_of_this_tu():
    good = json.loads(handover.handover_body(msgspec.structs.replace(
        _row(), tu="tu-a")))
    items = [good, {**good, "tu": "tu-b"}, {**good, "channel": "stack"}, {**good, "message_b64": "%%"},
             {"id": "x"}, "nonsense", {**good, "next_attempt_at": None, "id": "ev-9.0"}]
    ops, skipped = handover.restored("tu-a", items, T0 + 100)
    rows = [o.delivery for o in ops if isinstance(o, handover.RestoreDelivery)]
    assert skipped == 5
    assert [(d.id, d.next_attempt_at) for d in rows] == [("ev-5.0", T0 + 7), ("ev-9.0", T0 + 100)]
    assert handover.restored("tu-a", None, T0) == ([], 0)  # a Stack that lists none


def test_a_row_the_old_machines_health_held_is_due_at_once_on_the_new_one():
    """Judged afresh: the old machine's cooldown end is no ladder step of the row's."""
    held = json.loads(handover.handover_body(msgspec.structs.replace(
        _row(), tu="tu-a", next_attempt_at=T0 + 5400, last_error="waiting: cooldown #1 until 09:30")))
    ops, _ = handover.restored("tu-a", [held], T0 + 100)
    (row,) = [o.delivery for o in ops if isinstance(o, handover.RestoreDelivery)]
    assert (row.next_attempt_at, row.attempts) == (T0 + 100, 2)


def _row():
    from sidecar.router.model import Delivery
    return Delivery("ev-5.0", "ev-5", T0, "electron", "crm", "sync", "normal", "crm", "webhook",
                    "crm-hook", "pending", b'{"x":1}', 2, T0 + 7)


def test_what_stays_with_the_machine_is_listed():
    import logging

    from sidecar.router.model import Delivery
    rows = [Delivery(f"ev-{i}.0", f"ev-{i}", T0, "sidecar", "stack", "unreachable", "high", "r",
                     "webhook", "crm-hook", "pending", b"{}", tu=tu) for i, tu in enumerate([None, "tu-a", None, "tu-b"])]
    level, line = handover.stays_summary(rows[:3]) or (0, "")
    assert level == logging.INFO
    assert line.startswith("3 pending deliveries stay with this machine (2 process-wide, 1 of TUs, 0 of them handed over through Stack): ")
    assert "ev-0.0, ev-1.0 (TU tu-a), ev-2.0" in line
    assert handover.stays_summary([]) is None
    level, line = handover.stays_summary(rows[:3], {"ev-1.0": True}) or (0, "")
    assert level == logging.INFO
    assert "1 of TUs, 1 of them handed over through Stack): ev-0.0, ev-1.0 (TU tu-a, handed over)," in line
    # breaker G1: a logout while Stack was down, then a stop — Stack never took the handover,
    # so nobody else will send these: a WARNING that names them first
    level, line = handover.stays_summary(rows, {"ev-1.0": True, "ev-3.0": False}) or (0, "")
    assert level == logging.WARNING
    assert ("(2 process-wide, 2 of TUs, 1 of them handed over through Stack, 1 whose handover Stack"
            " has not taken: they go out only when this machine runs again): ev-3.0 (TU tu-b, handover"
            " waiting for Stack), ev-0.0, ev-1.0 (TU tu-a, handed over), ev-2.0") in line


async def test_the_handed_over_ids_are_read_until_they_settle(rstore):
    st = make_state(RULE)
    await emit(rstore, st, [crm("tu-a", 1)], T0)
    await rstore.commit(handover.handover_ops(await rstore.pending_kept("tu-a"), "tu-a", T0 + 1))
    assert await rstore.handed_over() == {"ev-1.0": False}  # its PUT waits in the outbox
    (put,) = [d for d in await rstore.deliveries() if d.method == "PUT"]
    await rstore.commit([SettleDelivery(put.id, "delivered", 1, None, None, T0 + 2, T0 + 2)])
    assert await rstore.handed_over() == {"ev-1.0": True}  # Stack acknowledged it
    await rstore.commit([SettleDelivery("ev-1.0", "delivered", 1, None, None, T0 + 2, T0 + 2)])
    assert await rstore.handed_over() == {}


async def test_a_refused_handover_is_not_taken(rstore):
    """Breaker D2 (issue 21): Stack refused the handover's PUT (a terminal 4xx: the write is
    ``failed``), and the close still said "handed over through Stack" at INFO — no machine ever
    continued the three deliveries.  Only a delivered PUT is a handover Stack took; a row
    continued from Stack's listing (no PUT of this machine's) is one too."""
    st = make_state(RULE)
    await emit(rstore, st, [crm("tu-a", 1), crm("tu-a", 2), crm("tu-a", 3)], T0)
    await rstore.commit(handover.handover_ops((await rstore.pending_kept("tu-a"))[:2], "tu-a", T0 + 1))
    puts = sorted((d for d in await rstore.deliveries() if d.method == "PUT"), key=lambda d: d.path)
    await rstore.commit([SettleDelivery(puts[0].id, "failed", 1, None, "refused: HTTP 422", None, T0 + 2),
                         SettleDelivery(puts[1].id, "delivered", 1, None, None, T0 + 2, T0 + 2)])
    # ev-3.0 as a delivery continued from Stack's listing: recorded for its release, no PUT here
    await rstore.commit([handover.PutHandover("ev-3.0", "tu-a", handover.lane("tu-a", "ev-3.0"),
                                              "/v1/tus/tu-a/deliveries/ev-3.0", T0)])
    assert await rstore.handed_over() == {"ev-1.0": False, "ev-2.0": True, "ev-3.0": True}


def test_the_handover_puts_are_found_by_an_index_range_not_a_scan():
    import sqlite3

    from sidecar.store import migrations
    c = sqlite3.connect(":memory:")
    migrations.migrate(c)
    (plan,) = c.execute("EXPLAIN QUERY PLAN SELECT status FROM deliveries WHERE id >= ? AND id < ?",
                        ("handover:t:e:put@", "handover:t:e:putA")).fetchall()
    assert "USING INDEX" in plan[3] and "(id>? AND id<?)" in plan[3], plan
