"""The router's tables through the real store: ops in the step's one transaction, reload after a
restart (rules, dedup, throttle windows, event ids), Stack pairs' runs, the audit's filters."""
from __future__ import annotations

import msgspec
import pytest

from sidecar.router.model import RoutingEvent, StackWrite, parse_rule
from sidecar.router.state import RouterState
from sidecar.router.route import route
from sidecar.router.ops import DeleteRule, PutDelivery, PutRule, SettleDelivery, prune_ops
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


async def _stored_after(tmp_path, name: str, one_statement: bool, monkeypatch) -> tuple[list, list]:
    from sidecar.router.io.storage import RouterStore
    from sidecar.store import Store
    from sidecar.store import writer as wmod
    with monkeypatch.context() as m:
        if one_statement:  # what the Guarded string says as it is: INSERT … SELECT … WHERE NOT (…)
            m.setattr(wmod, "_guarded", lambda conn, sql, rows: conn.executemany(str(sql), rows))
        store = await Store.open(tmp_path / name)
        try:
            base = route(make_state(), [marker(1, "a")], T0, TARGETS).deliveries[0]

            def row(n: int, key: str | None, **kw) -> PutDelivery:
                return PutDelivery(msgspec.structs.replace(base, id=f"ev-{n}.0", idem_key=key, **kw))

            rs = RouterStore(store)
            await rs.commit([row(1, "k1"), row(2, "k1"), row(3, "k2")])  # a key twice in one plan
            await rs.commit([row(4, "k1"), row(5, "k1", status="duplicate", next_attempt_at=None),
                             row(6, "k1", channel="journal", target="audit"),  # not a Stack row
                             row(7, None), row(8, None), row(9, "k4")])
            await store.commit([SettleDelivery("ev-1.0", "delivered", 1, None, None, T0 + 1, T0 + 1)])
            await rs.commit([row(10, "k1"), row(11, "k2"), row(12, "k1")])  # k1 settled: stored again
            return await store.read(lambda c: (
                c.execute("SELECT * FROM deliveries ORDER BY seq").fetchall(),
                c.execute("SELECT * FROM sqlite_sequence").fetchall()))
        finally:
            await store.close()


async def test_a_guarded_insert_stores_what_its_one_statement_stores(tmp_path, monkeypatch):
    """The deliveries insert runs as its probe and a plain insert (sidecar.store.ops, Rule 5):
    the same rows, columns and seqs as the one ``INSERT … SELECT … WHERE NOT (…)`` statement —
    a Stack key repeated in one plan or still pending is skipped without spending a seq, a
    settled key or a row of another channel is stored."""
    two = await _stored_after(tmp_path, "two.db", False, monkeypatch)
    one = await _stored_after(tmp_path, "one.db", True, monkeypatch)
    assert two == one
    rows, seqs = two
    assert [(r[0], r[1]) for r in rows] == [(1, "ev-1.0"), (2, "ev-3.0"), (3, "ev-6.0"), (4, "ev-7.0"),
                                            (5, "ev-8.0"), (6, "ev-9.0"), (7, "ev-10.0")]
    assert seqs == [("deliveries", 7)]
