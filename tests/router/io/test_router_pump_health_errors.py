"""A sender-health error in a pump pass never loses the round's other outcomes (issue 9, a
breaker's find: one delivery's health update raised after the journal line of another was
written, and the whole batch was abandoned — rows left "in flight", resent later).  Outcomes and
health's records commit in one transaction; the part that failed is logged and skipped (the
outcome still counts as an attempt of the row); a health error asking "may it send?" makes the
row wait, never stops the other targets."""
from __future__ import annotations

import logging

from sidecar.router.attempt import DELIVERED, YES, Admission, Attempts, Report, retryable
from sidecar.router.io.channels import JournalChannel
from sidecar.router.config import Target
from sidecar.router.model import RoutingEvent
from sidecar.router.io.pump import DeliveryPump

from routerhelp import T0, Scripted, emit, make_state

ALERT = RoutingEvent(source="electron", subject="alert", action="fired", priority="normal", payload={})


class Broken:
    """Sender health that raises for one target (``report``, ``may_send`` or the probe)."""

    def __init__(self, bad: str, where: str) -> None:
        self.bad, self.where = bad, where
        self.reports: list[tuple[str, str]] = []
        self.probed: list[str] = []

    def may_send(self, target, channel, now) -> Admission:
        if target == self.bad and self.where == "may_send":
            raise KeyError(target)
        return YES

    def report(self, target, channel, outcome, now, *, final) -> Report:
        if target == self.bad and self.where == "report":
            raise RuntimeError(f"health of {target} is broken")
        self.reports.append((target, outcome.kind))
        return Report()

    def probes_due(self, now):
        return ["crm-hook", "audit"] if self.where == "probe" and not self.probed else []

    def probe_result(self, target, outcome, now) -> Report:
        self.probed.append(target)
        if target == self.bad:
            raise RuntimeError("probe bookkeeping broken")
        return Report()


def setup(tmp_path, rstore, health):
    st = make_state({"name": "r", "actions": [{"target": "audit"}, {"target": "crm-hook"},
                                              {"target": "ops-telegram"}]})
    audit = JournalChannel("audit", Target(channel="journal"), tmp_path)
    hook = Scripted("crm-hook")
    tg = Scripted("ops-telegram", lambda r, n: retryable("HTTP 503", 503))
    pump = DeliveryPump(rstore, {"audit": audit, "crm-hook": hook, "ops-telegram": tg},
                        attempts=Attempts(health))
    return st, pump, audit


async def test_a_failing_health_report_keeps_every_outcome(tmp_path, rstore, caplog):
    health = Broken("crm-hook", "report")
    st, pump, audit = setup(tmp_path, rstore, health)
    await emit(rstore, st, [ALERT], T0)
    with caplog.at_level(logging.ERROR, logger="sidecar.router.io.pump"):
        res = await pump.run_due(T0)  # never raises
    rows = {r.target: r for r in await rstore.deliveries()}
    assert (rows["audit"].status, rows["audit"].attempts) == ("delivered", 1)
    assert (rows["crm-hook"].status, rows["crm-hook"].attempts) == ("delivered", 1)  # its outcome stands
    assert (rows["ops-telegram"].status, rows["ops-telegram"].attempts) == ("pending", 1)
    assert rows["ops-telegram"].next_attempt_at == T0 + 30
    assert [j["delivery_id"] for j in await rstore.journal("audit")] == [rows["audit"].id]
    assert sorted(health.reports) == [("audit", "delivered"), ("ops-telegram", "retryable")]
    assert res.health_errors == ["crm-hook"]
    assert "health of crm-hook is broken" in caplog.text
    await pump.run_due(T0 + 1)  # nothing is resent
    assert len(audit.path.read_text().splitlines()) == 1
    await pump.close()


async def test_a_failing_admission_makes_only_that_row_wait(tmp_path, rstore, caplog):
    health = Broken("crm-hook", "may_send")
    st, pump, _ = setup(tmp_path, rstore, health)
    await emit(rstore, st, [ALERT], T0)
    with caplog.at_level(logging.ERROR, logger="sidecar.router.io.pump"):
        res = await pump.run_due(T0)
    rows = {r.target: r for r in await rstore.deliveries()}
    assert rows["audit"].status == "delivered"
    hook = rows["crm-hook"]
    assert (hook.status, hook.attempts, hook.next_attempt_at) == ("pending", 0, T0 + 30)
    assert hook.last_error.startswith("waiting: sender health error")
    assert res.health_errors == ["crm-hook"] and "KeyError" in caplog.text
    health.where = "fixed"
    await pump.run_due(T0 + 30)
    assert {r.target: r.status for r in await rstore.deliveries()}["crm-hook"] == "delivered"
    await pump.close()


async def test_a_failing_probe_result_keeps_the_other_probes(tmp_path, rstore):
    health = Broken("crm-hook", "probe")
    st, pump, _ = setup(tmp_path, rstore, health)
    res = await pump.run_due(T0)
    assert sorted(health.probed) == ["audit", "crm-hook"] and res.health_errors == ["crm-hook"]
    await pump.close()
    assert DELIVERED.ok
