"""Nothing is stranded by a shift change (issue 21 item 5; DESIGN §9 "Handed-over deliveries"):
two real sidecar processes on two data dirs, the reference Stack over HTTP and a loopback
webhook receiver that is down while machine 1 holds the TU.  Machine 1 logs out with the TU's
three CRM deliveries pending (each tried and failed) and hands them to Stack; machine 2, fresh,
logs in, continues them with their ids and delivers them once the receiver is back; the
receiver counts each ``webhook-id`` exactly once.  A process-wide delivery (no TU) stays with
machine 1 and is never received.

The scenario is ``tests/scenarios/o11_…``; ``tests/integration/test_project_scenarios.py`` runs
it as is (its ``received`` expectations); this test replays it without those lines and checks the
same, and more (Stack's PUT/DELETE, which machine's rows were delivered), from the trace and the
two data dirs."""
from __future__ import annotations

import json
import sqlite3
from collections import Counter
from pathlib import Path

from electron_stub.routing_world import read_deliveries
from tests.integration.replay_util import replay

SCENARIO = Path(__file__).resolve().parents[1] / "scenarios" / "o11_shift_change_hands_over_webhook_deliveries.jsonl"


def without_received(src: Path, dst: Path) -> Path:
    lines = [x for x in src.read_text().splitlines()
             if x.strip() and json.loads(x).get("what") != "received"]
    dst.write_text("\n".join(lines) + "\n")
    return dst


def test_a_fresh_shift_change_hands_the_tus_deliveries_over_and_each_is_received_once(tmp_path):
    rp, code = replay(without_received(SCENARIO, tmp_path / "s.jsonl"), tmp_path / "data")
    assert code == 0, [r for r in rp.results if not r.ok]
    m1, m2 = rp.sidecars.machines
    first = {r["id"]: r for r in read_deliveries(m1.data_dir) if r["target"] == "crm-hook"}
    second = {r["id"]: r for r in read_deliveries(m2.data_dir) if r["target"] == "crm-hook"}
    tu_ids = {i for i, r in first.items() if r["action"] == "sync"}
    (wide,) = [i for i, r in first.items() if r["action"] == "heartbeat"]
    assert len(tu_ids) == 3 and all(first[i]["status"] == "pending" for i in tu_ids)
    # machine 2 continued the very same deliveries (same ids) and delivered them
    assert set(second) == tu_ids and all(r["status"] == "delivered" for r in second.values())
    received = [x for x in rp.rec.lines if x["event"] == "webhook.received" and x["target"] == "crm-hook"]
    per_id = Counter(x["webhook_id"] for x in received if x["verified"])
    assert set(per_id) == tu_ids and set(per_id.values()) == {1}  # exactly once each, across machines
    assert wide not in per_id  # process-wide: it stays with machine 1
    # judged afresh: machine 1's crm-hook is cooling down for an hour, machine 2 sends at its login
    done = [x for x in rp.rec.lines if x["event"] == "delivery" and x.get("status") == "delivered"]
    assert {x["delivery_id"] for x in done} == tu_ids  # (machine 1's rows are all still pending)
    assert max(x["at"] for x in done) <= 71
    # Stack held the handovers and was told to release each once delivered
    ops = [(a["op"], a["id"]) for a in rp.stack.acked if a["kind"] == "delivery"]
    assert sorted(i for op, i in ops if op == "put") == sorted(tu_ids)
    assert sorted(i for op, i in ops if op == "delete") == sorted(tu_ids)
    assert rp.stack.deliveries.get("g-tu-1", {}) == {}
    with sqlite3.connect(Path(m2.data_dir) / "sidecar.db") as c:  # nothing left to release
        assert c.execute("SELECT COUNT(*) FROM router_handovers").fetchone()[0] == 0


def test_while_stack_is_down_the_old_machine_keeps_sending_and_stack_is_released_after(tmp_path):
    """The handover waits in the outbox while Stack is down; the old machine delivers the row
    itself (the receiver back), which queues the release behind the handover in its lane: once
    Stack is back it gets the PUT, then the DELETE, and lists nothing — the next machine has
    nothing to continue and the receiver got the delivery once."""
    head = json.loads(SCENARIO.read_text().splitlines()[0])
    lines = [
        {**head, "name": "handover_while_stack_is_down", "duration_s": 2000},
        {"kind": "tu", "project": "golden", "tu": "g-tu-1", "operator": "op-1"},
        {"kind": "target", "name": "crm-hook", "channel": "webhook", "config": {}},
        {"kind": "group", "name": "patient", "priority": 1, "senders": ["crm-hook"], "failed_in_row": 20},
        {"kind": "rule", "name": "to crm", "conditions": {"source": "electron"}, "actions": [{"target": "crm-hook"}]},
        {"t": 0, "kind": "login", "project": "golden", "tu": "g-tu-1", "operator": "op-1"},
        {"t": 1, "kind": "target_fault", "target": "crm-hook", "mode": "down"},
        {"t": 10, "kind": "emit", "source": "electron", "subject": "crm", "action": "sync", "priority": "normal",
         "payload": {"tu": "g-tu-1"}},
        {"t": 20, "kind": "stack", "mode": "down"},
        {"t": 60, "kind": "logout", "project": "golden", "tu": "g-tu-1", "operator": "op-1"},
        {"t": 65, "kind": "target_fault", "target": "crm-hook", "mode": "up"},
        {"t": 200, "kind": "expect", "what": "delivery", "target": "crm-hook", "status": "delivered",
         "between": [10, 10], "min": 1, "max": 1},
        {"t": 300, "kind": "stack", "mode": "up"},
        {"t": 1900, "kind": "login", "project": "golden", "tu": "g-tu-1", "operator": "op-2", "fresh": True},
        {"t": 1990, "kind": "expect", "what": "delivery", "target": "crm-hook", "status": "delivered",
         "between": [10, 10], "min": 1, "max": 1},
    ]
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    rp, code = replay(path, tmp_path / "data")
    assert code == 0, [r for r in rp.results if not r.ok]
    m1, m2 = rp.sidecars.machines
    (row,) = [r for r in read_deliveries(m1.data_dir) if r["target"] == "crm-hook"]
    assert row["status"] == "delivered" and read_deliveries(m2.data_dir) == []
    received = [x["webhook_id"] for x in rp.rec.lines if x["event"] == "webhook.received" and x["verified"]]
    assert received == [row["id"]]
    ops = [(a["op"], a["id"]) for a in rp.stack.acked if a["kind"] == "delivery"]
    assert ops == [("put", row["id"]), ("delete", row["id"])]  # in order, once Stack was back
    assert rp.stack.deliveries.get("g-tu-1", {}) == {}
