"""A guarded insert run as its probe and a plain insert (``sidecar.store.writer._guarded``) against
the one statement its string is (``INSERT … SELECT … WHERE NOT (…)``; sidecar.store.ops Rule 5):
random sequences of plans — Stack rows with repeated, NULL or settled keys, rows of other channels,
settles in between, a plan that fails half-way — leave the same rows, seqs and
``sqlite_sequence`` on the real schema, and a failed plan leaves nothing of itself either way."""
from __future__ import annotations

import sqlite3

import msgspec
from hypothesis import HealthCheck, given, settings, strategies as st

from sidecar.router.model import Delivery
from sidecar.router.ops import PutDelivery, SettleDelivery
from sidecar.store import writer as wmod
from sidecar.store.migrations import migrate
from sidecar.store.ops import compile_ops

T0 = 1796025600.0
KEYS = st.sampled_from(["k1", "k2", "k3", None])
CHANNELS = st.sampled_from(["stack", "stack", "journal", "telegram"])
STATUSES = st.sampled_from(["pending", "pending", "pending", "duplicate", "skipped"])


def _delivery(n: int, channel: str, key: str | None, status: str) -> Delivery:
    return Delivery(f"ev-{n}.0", f"ev-{n}", T0 + n, "markers", "followUpChat", "set", "high", None,
                    channel, "stack" if channel == "stack" else "audit", status, b"{}",
                    next_attempt_at=T0 + n if status == "pending" else None,
                    pair="g/a" if channel == "stack" else None, idem_key=key,
                    method="PUT" if channel == "stack" else None, path="/p" if channel == "stack" else None)


# one plan's steps: ("put", channel, key, status) | ("settle", index of an earlier put) | ("clash",)
# — a put whose id repeats the plan's first id, so SQLite refuses it (UNIQUE) after rows went in;
# one plan in four may clash
PUT = st.tuples(st.just("put"), CHANNELS, KEYS, STATUSES)
SETTLE = st.tuples(st.just("settle"), st.integers(0, 40))
CLASH = st.tuples(st.just("clash"))
PLAIN = st.lists(st.one_of(PUT, PUT, PUT, SETTLE), min_size=1, max_size=8)
FAILING = st.lists(st.one_of(PUT, PUT, SETTLE, CLASH), min_size=1, max_size=8)
PLANS = st.lists(st.one_of(PLAIN, PLAIN, PLAIN, FAILING), min_size=1, max_size=10)


def _run(plans: list, one_statement: bool) -> tuple:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    migrate(conn)
    n = 0
    failed = []
    for plan in plans:
        ops: list = []
        first = None
        for step in plan:
            if step[0] == "put":
                n += 1
                d = _delivery(n, *step[1:])
                first = first or d.id
                ops.append(PutDelivery(d))
            elif step[0] == "settle" and n:
                ops.append(SettleDelivery(f"ev-{step[1] % n + 1}.0", "delivered", 1, None, None, T0, T0))
            elif step[0] == "clash" and first is not None:
                n += 1
                ops.append(PutDelivery(_clash(n, first)))
        compiled = compile_ops(ops)
        if one_statement:
            compiled = [(str(sql), rows) for sql, rows in compiled]  # the Guarded string as it is
        try:
            wmod.apply_plan(conn, compiled)
            failed.append(False)
        except sqlite3.IntegrityError:
            failed.append(True)
        assert not conn.in_transaction
    return (conn.execute("SELECT * FROM deliveries ORDER BY seq").fetchall(),
            conn.execute("SELECT * FROM sqlite_sequence").fetchall(), failed)


def _clash(n: int, first_id: str) -> Delivery:
    return msgspec.structs.replace(_delivery(n, "journal", None, "pending"), id=first_id)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(PLANS)
def test_the_probe_and_insert_store_what_the_one_statement_stores(plans):
    assert _run(plans, one_statement=False) == _run(plans, one_statement=True)
