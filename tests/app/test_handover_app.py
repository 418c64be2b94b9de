"""Handed-over deliveries in the app (issue 21 item 5; DESIGN §9, §10): a non-Stack delivery
knows the TU its event names; without a Stack a logout hands nothing over (the rows stay and go
out while this machine runs); the close lists what stays with the machine, process-wide ones
apart (DESIGN §10 "Process-wide deliveries stay with their machine and are listed at
shutdown")."""
from __future__ import annotations

import asyncio
import json
import logging

import pytest

from sidecar.router.io.storage import RouterStore
from tests.app.test_app_steps import T0, TU, Run

# "hook" answers nothing (the discard port refuses): its rows stay pending on the retry ladder
TARGETS = json.dumps({"hook": {"channel": "webhook", "url": "http://127.0.0.1:9/",
                               "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}})
RULE = {"name": "crm", "conditions": {"source": "electron"}, "actions": [{"target": "hook"}]}


@pytest.fixture(autouse=True)
def _hook_target(monkeypatch):
    monkeypatch.setenv("SIDECAR_ROUTER_TARGETS", TARGETS)


async def _logged_in_with_a_tus_delivery(tmp_path) -> Run:
    """A started app: the TU logged in, the CRM rule, one ``sync`` event naming the TU."""
    run = await Run(tmp_path).start()
    await run.call("clock.advance_to", {"t": T0})
    await run.call("session.login", {"tu": TU, "project": "golden", "operator": "op"})
    await run.call("rules.create", RULE)
    await run.call("events.emit", {"source": "electron", "subject": "crm", "action": "sync",
                                   "payload": {"tu": TU}})
    return run


async def _close_line(run: Run, caplog) -> logging.LogRecord:
    """Stop the app; the close's one "stay with this machine" record."""
    with caplog.at_level(logging.INFO, logger="sidecar.app.root"):
        await run.stop()
    (rec,) = [r for r in caplog.records if "stay with this machine" in r.getMessage()]
    return rec


def test_without_stack_nothing_is_handed_over_and_the_close_lists_what_stays(tmp_path, caplog):
    async def main():
        run = await _logged_in_with_a_tus_delivery(tmp_path)
        await run.call("events.emit", {"source": "electron", "subject": "crm", "action": "ping",
                                       "payload": {"tu": 7}})  # not a TU's name: process-wide
        await run.call("session.logout", {"tu": TU})
        rows = await RouterStore(run.store).deliveries()
        assert [(r.action, r.tu, r.status) for r in rows] == [("sync", TU, "pending"), ("ping", None, "pending")]
        rec = await _close_line(run, caplog)
        line = rec.getMessage()
        assert rec.levelno == logging.INFO
        assert line.startswith("2 pending deliveries stay with this machine (1 process-wide, 1 of TUs, 0 of them handed over through Stack): ")
        assert f"{rows[0].id} (TU {TU})" in line and f"{rows[1].id}" in line
    asyncio.run(main())


def test_a_handover_stack_never_took_is_a_warning_at_close(tmp_path, caplog):
    """Breaker G1 (issue 21): a logout while Stack is down queues the handover's PUT, then the
    machine stops — no other machine will ever continue those rows, only this one when it runs
    again.  The close says so at WARNING, naming them."""
    from sidecar.router import handover

    async def main():
        run = await _logged_in_with_a_tus_delivery(tmp_path)
        store = RouterStore(run.store)
        # what a logout with a configured but unreachable Stack commits (sidecar.app.inputs)
        await store.commit(handover.handover_ops(await store.pending_kept(TU), TU, T0 + 1))
        (row,) = [d for d in await store.deliveries() if d.target == "hook"]
        rec = await _close_line(run, caplog)
        assert rec.levelno == logging.WARNING
        assert f"1 whose handover Stack has not taken: they go out only when this machine runs again): {row.id} (TU {TU}, handover waiting for Stack)" in rec.getMessage()
    asyncio.run(main())
