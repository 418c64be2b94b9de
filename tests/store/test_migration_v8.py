"""Schema v8: group send intervals stored in seconds become minutes (issue 21 item 4 e; seed 000
§6 «хвилини»), so a group paces exactly as it did before the upgrade."""
from __future__ import annotations

import json
import sqlite3

from sidecar.store.migrations import MIGRATIONS, migrate


def test_stored_second_intervals_convert_to_minutes(tmp_path):
    conn = sqlite3.connect(tmp_path / "s.db", isolation_level=None)
    migrate(conn, MIGRATIONS[:7])
    conn.execute("INSERT INTO sender_groups (id, priority, data) VALUES (?,?,?)",
                 ("g", 1, json.dumps({"id": "g", "name": "slow", "priority": 1,
                                      "send_from_message_interval": 90,
                                      "send_to_message_interval": 300})))
    conn.execute("INSERT INTO sender_groups (id, priority, data) VALUES (?,?,?)",
                 ("h", 2, json.dumps({"id": "h", "name": "unpaced", "priority": 2})))
    assert migrate(conn) == (7, len(MIGRATIONS))
    data = {i: json.loads(d) for i, d in conn.execute("SELECT id, data FROM sender_groups")}
    assert (data["g"]["send_from_message_interval"], data["g"]["send_to_message_interval"]) == (1.5, 5.0)
    assert data["g"]["name"] == "slow"
    assert (data["h"]["send_from_message_interval"], data["h"]["send_to_message_interval"]) == (0, 0)
    conn.close()
