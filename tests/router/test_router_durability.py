"""Claim, send, settle: a SIGKILL at any point leads to exactly one delivery per (event, target)
at a receiver that dedups on ``webhook-id``, and never two different ids for one delivery
(issue 9 "Durability"; :mod:`sidecar.router.io.pump`).  A real process is killed between claim and
send, then between send and settle, then runs to the end."""
from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from electron_stub.receivers import Receivers

ROOT = Path(__file__).resolve().parents[2]
T0 = 1_764_489_600.0

SCRIPT = r'''
import asyncio, json, os, signal, sys
from sidecar.router.io.channels import WebhookChannel
from sidecar.router.config import Target
from sidecar.router.model import RoutingEvent, parse_rule
from sidecar.router.io.pump import DeliveryPump
from sidecar.router.state import RouterState
from sidecar.router.route import route
from sidecar.router.io.storage import RouterStore
from sidecar.store.db import Store

db, kill_at, now = sys.argv[1], sys.argv[2], float(sys.argv[3])
target = json.loads(os.environ["HOOK"])


class Dying(WebhookChannel):
    async def send(self, row, now):
        if kill_at == "claim":  # the claim is committed; nothing sent yet
            os.kill(os.getpid(), signal.SIGKILL)
        out = await super().send(row, now)
        if kill_at == "settle":  # sent and answered; the outcome not yet recorded
            os.kill(os.getpid(), signal.SIGKILL)
        return out


async def main():
    store = await Store.open(db)
    rs = RouterStore(store)
    loaded = await rs.load(now, 86400)
    st = RouterState(prefix="ev-", rules=loaded.rules, seq=loaded.next_seq)
    if not await rs.deliveries():
        rule = parse_rule({"name": "to crm", "actions": [{"target": "crm-hook"}]})
        st.rules = {rule.name: rule}
        r = route(st, [RoutingEvent(source="electron", subject="alert", action="fired", payload={"n": 1})], now,
                  {"stack": "stack", "crm-hook": "webhook"})
        await rs.commit(r.ops())
    pump = DeliveryPump(rs, {"crm-hook": Dying("crm-hook", Target(**target))})
    await pump.run_due(now)
    await pump.close()
    await store.close()
    print("done")

asyncio.run(main())
'''


def run(db: Path, kill_at: str, now: float, hook: dict) -> subprocess.CompletedProcess:
    env = {**os.environ, "HOOK": json.dumps(hook), "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", SCRIPT, str(db), kill_at, str(now)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)


def row(db: Path) -> tuple:
    with sqlite3.connect(db) as c:
        return c.execute("SELECT id, status, attempts, next_attempt_at FROM deliveries").fetchone()


@pytest.fixture
def receivers():
    r = Receivers(seed=5)
    r.add_target("crm-hook", "webhook")
    r.start()
    yield r
    r.stop()


def test_sigkill_between_claim_send_and_settle_delivers_exactly_once(tmp_path, receivers):
    db = tmp_path / "sidecar.db"
    hook = receivers.target_config("crm-hook")

    p = run(db, "claim", T0, hook)
    assert p.returncode == -9, p.stderr
    assert row(db) == ("ev-1.0", "pending", 1, T0 + 30)  # claimed, counted, re-armed on the ladder
    assert receivers.records("webhook.received") == []

    p = run(db, "claim-free", T0 + 29, hook)  # not due yet: nothing happens
    assert p.returncode == 0 and receivers.records() == []

    p = run(db, "settle", T0 + 30, hook)
    assert p.returncode == -9, p.stderr
    assert row(db) == ("ev-1.0", "pending", 2, T0 + 150)  # sent, outcome lost with the process
    assert [r["webhook_id"] for r in receivers.records("webhook.received")] == ["ev-1.0"]

    p = run(db, "never", T0 + 150, hook)
    assert p.returncode == 0 and p.stdout.strip() == "done", p.stderr
    assert row(db)[:3] == ("ev-1.0", "delivered", 3)
    ids = [r["webhook_id"] for r in receivers.records("webhook.received")]
    assert ids == ["ev-1.0", "ev-1.0"] and set(ids) == {"ev-1.0"}  # one id, seen once after dedup
    assert receivers.duplicates == {"crm-hook": 1}
    with sqlite3.connect(db) as c:  # the secret is nowhere in the database
        dump = "\n".join(c.iterdump())
    assert hook["secret"] not in dump and hook["secret"].removeprefix("whsec_") not in dump
