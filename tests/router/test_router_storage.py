"""The router's tables through the real store: ops in the step's one transaction, reload after a
restart (rules, dedup, throttle windows, event ids), Stack pairs' runs, the audit's filters."""
from __future__ import annotations

import msgspec
import pytest

from sidecar.router.model import RoutingEvent, StackWrite, parse_rule
from sidecar.router.state import RouterState
from sidecar.router.route import route
from sidecar.router.ops import DeleteRule, PutDelivery, PutRule, prune_ops
from sidecar.store.errors import StoreError
from sidecar.store.ops import PutMeta

from routerhelp import T0, TARGETS, emit, make_state


def alert(**kw) -> RoutingEvent:
    return RoutingEvent(source="electron", subject="alert", action="fired", payload={}, **kw)


def marker(i: int, ru: str) -> RoutingEvent:
    return RoutingEvent(source="markers", subject="followUpChat", action="set", priority="high",
                 write=StackWrite(pair=f"g/{ru}", idem_key=f"k{i}", method="PUT",
                                  path=f"/v1/tus/g/favorites/{ru}/markers/followUpChat", body=b"{}"))


async def test_restart_keeps_rules_dedup_throttle_and_ids(rstore):
    rule = {"name": "t", "actions": [{"target": "ops-telegram"}], "throttle_seconds": 300}
    st = make_state(rule)
    await rstore.commit([PutRule(st.rules["t"], T0)])
    await emit(rstore, st, [alert(dedup_key="k")], T0)
    loaded = await rstore.load(T0 + 10, 86400)
    again = RouterState.restore("ev-", loaded)
    assert again.rules == st.rules and again.seq == 2
    r = route(again, [alert(dedup_key="k"), alert()], T0 + 10, TARGETS)
    assert [d.status for d in r.deliveries] == ["duplicate", "skipped"]  # neither window was reset
    assert [d.id for d in r.deliveries] == ["ev-2.0", "ev-3.0"]  # ids continue, never repeat
    # a rule change does not reset the throttle window either (it is per target, stored)
    changed = parse_rule({**rule, "conditions": {"source": "electron"}}, TARGETS)
    await rstore.commit([PutRule(changed, T0 + 20)])
    loaded = await rstore.load(T0 + 20, 86400)
    assert loaded.rules["t"] == changed and loaded.last_real == {("telegram", "ops-telegram"): T0}
    await rstore.commit([DeleteRule("t")])
    assert (await rstore.load(T0, 86400)).rules == {}


async def test_routing_ops_share_the_steps_transaction(rstore, store):
    st = make_state({"name": "r", "actions": [{"target": "audit"}]})
    r = route(st, [alert(dedup_key="x")], T0, TARGETS)
    with pytest.raises(StoreError):
        await store.commit([*r.ops(), PutDelivery(r.deliveries[0])])  # the same id twice: SQLite refuses
    assert await rstore.deliveries() == [] and await store.meta("router.next_seq") is None
    await store.commit([*r.ops(), PutMeta("other", "1")])
    assert len(await rstore.deliveries()) == 1


async def test_stack_runs_per_pair_and_one_pending_row_per_key(rstore):
    st = make_state()
    await emit(rstore, st, [marker(1, "a"), marker(2, "b"), marker(3, "a"), marker(3, "a")], T0)
    rows = await rstore.deliveries()
    assert [d.idem_key for d in rows] == ["k1", "k2", "k3"]  # the repeated key was queued once
    runs = await rstore.due_stack(T0, 500)
    assert [[d.idem_key for d in run] for run in runs] == [["k1", "k3"], ["k2"]]
    assert await rstore.due_stack(T0 - 1, 500) == []
    assert [[d.idem_key for d in run] for run in await rstore.due_stack(T0, 2)] == [["k1"], ["k2"]]  # cut, in seq order
    assert await rstore.next_due() == T0


async def test_audit_filters_and_prune(rstore):
    st = make_state({"name": "r", "actions": [{"target": "audit"}, {"target": "crm-hook"}]})
    await emit(rstore, st, [alert()], T0)
    await emit(rstore, st, [alert(dedup_key="d"), alert(dedup_key="d")], T0 + 100)
    assert len(await rstore.deliveries()) == 6
    assert [d.event_at for d in await rstore.deliveries(target="audit", since=T0 + 50)] == [T0 + 100] * 2
    assert len(await rstore.deliveries(status="duplicate")) == 2
    await rstore.commit(prune_ops(T0 + 8 * 86400, 7 * 86400, 86400))
    assert len(await rstore.deliveries()) == 4  # pending rows are never pruned; settled old ones are
    assert (await rstore.load(T0 + 8 * 86400, 86400)).dedup == {}


async def test_a_repeated_stack_key_leaves_no_trace(rstore):
    """The insert's idem-key check runs before the row takes a seq: a repeated Stack write (a
    re-run step) leaves no gap in the audit's seq cursor, and a settled-status Stack row whose key
    is still pending (a dedup duplicate) is not stored either — issue 24 ``ON CONFLICT … DO
    NOTHING`` would change both (an AUTOINCREMENT seq is spent before the conflict is found)."""
    st = make_state()
    await emit(rstore, st, [marker(1, "a")], T0)
    r = route(st, [marker(1, "a")], T0 + 1, TARGETS)
    await rstore.commit([*r.ops(), PutDelivery(msgspec.structs.replace(
        r.deliveries[0], id="ev-9.0", status="duplicate", next_attempt_at=None))])
    st.apply(r)
    await emit(rstore, st, [marker(2, "b")], T0 + 2)
    rows = await rstore.deliveries()
    assert [(d.seq, d.idem_key, d.status) for d in rows] == [(1, "k1", "pending"), (2, "k2", "pending")]
