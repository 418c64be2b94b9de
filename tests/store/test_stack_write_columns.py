"""Stack writes carry structured columns (schema v5, issue 12): a login reads its unacknowledged
marker writes by (tu, ru, marker), never by splitting an HTTP path; rows queued by an older
sidecar are filled by the migration (or, when their ids were quoted, read from their path), and
schema v6 carries them onto the router's ``stack`` channel (issue 9) with those columns."""
from __future__ import annotations

import sqlite3

import msgspec

from sidecar.router.state import RouterState

from sidecar.router.route import route
from sidecar.router.io.storage import RouterStore
from sidecar.stack import writes
from sidecar.store.db import Store
from sidecar.store.migrations import MIGRATIONS, migrate

T = 1796025600.0


async def test_a_marker_write_is_read_back_by_its_columns(tmp_path):
    async with await Store.open(tmp_path / "sidecar.db") as s:
        ru = "ru/with slash"  # quoted in the path; the columns keep it as is
        st = RouterState(prefix="ev-")
        events = [
            writes.marker_write("tu-1", ru, "followUpChat", "2026-11-30T08:00:00Z", "k1").event("followUpChat", "set", {}),
            writes.marker_write("tu-1", ru, "followUpChat", None, "k2").event("followUpChat", "clear", {}),
            writes.marker_write("tu-2", "ru-9", "followUpMail", "x", "k3").event("followUpMail", "set", {}),
        ]
        await s.commit(route(st, events, T, {"stack": "stack"}).ops())
        assert await s.pending_markers("tu-1") == {(ru, "followUpChat"): None}
        assert await s.pending_markers("tu-2") == {("ru-9", "followUpMail"): "x"}
        rows = await RouterStore(s).deliveries()
        assert [(r.tu, r.ru, r.subject) for r in rows][:1] == [("tu-1", ru, "followUpChat")]


async def test_the_migration_fills_the_columns_of_rows_queued_before_it(tmp_path):
    path = tmp_path / "sidecar.db"
    conn = sqlite3.connect(path, isolation_level=None)
    migrate(conn, MIGRATIONS[:4])
    body = msgspec.json.encode({"value": "v"})
    for key, p in (("a", "/v1/tus/tu-1/favorites/ru-1/markers/followUpChat"),
                   ("b", "/v1/tus/tu-1/favorites/ru%2F2/markers/followUpChat")):
        conn.execute("INSERT INTO outbox (pair, idem_key, method, path, body, kind, created_at,"
                     " next_at) VALUES ('p', ?, 'PUT', ?, ?, 'marker', 0, 0)", (key, p, body))
    conn.close()
    async with await Store.open(path) as s:
        # schema v6 carried both rows onto the router's stack channel, in order, columns kept
        assert await s.read(lambda c: c.execute("SELECT COUNT(*) FROM outbox").fetchone()[0]) == 0
        rows = await RouterStore(s).deliveries()
        assert [(r.tu, r.ru, r.subject, r.idem_key, r.status, r.channel) for r in rows] == [
            ("tu-1", "ru-1", "followUpChat", "a", "pending", "stack"),
            (None, None, "marker", "b", "pending", "stack")]
        assert await s.pending_markers("tu-1") == {("ru-1", "followUpChat"): "v",
                                                   ("ru/2", "followUpChat"): "v"}
        assert await s.pending_markers("tu-2") == {}
