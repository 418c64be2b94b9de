"""The gate's one exchange per round with sender health (sidecar.router.exchange,
Attempts.admit / tell; DESIGN §10; seed 000 §1–§3): a round's rows are decided with ONE
admission — the same answers, in the same order, as asking "may it send?" row by row — and a
health that answers only per row is adapted call for call.  Pure: no store, no clock."""
from __future__ import annotations

from sidecar.router.attempt import (DELIVERED, Admission, AlwaysOpen, Attempts, DeferDelivery, Report,
                                    flooded, retryable)
from sidecar.router.exchange import Grant, PerCall, Told, Want, admit_each, as_batch
from sidecar.router.model import Delivery
from sidecar.router.ops import ClaimDelivery, SettleDelivery

T0 = 1_796_025_600.0


def _row(i: int, target: str = "crm-hook", channel: str = "webhook", *, ttl: float | None = None,
         attempts: int = 0) -> Delivery:
    return Delivery(f"ev-{target}{i}.1", f"ev-{target}{i}", T0 - 5 + i, "electron", "a", "b", "normal", "r",
                    channel, target, "pending", b"{}", attempts, T0 - 5 + i,
                    expires_at=None if ttl is None else T0 - 5 + ttl)


class Paced(AlwaysOpen):
    """Per-row health: each target may send ``budget[target]`` rows, then "not before +60 s"."""

    def __init__(self, **budget: int) -> None:
        self.budget = dict(budget)
        self.asked: list[str] = []
        self.told: list[tuple[str, str, bool]] = []

    def may_send(self, target, channel, now):
        self.asked.append(target)
        if target == "broken":
            raise KeyError(target)
        if self.budget.get(target, 99) <= 0:
            return Admission(allowed=False, not_before=now + 60, reason="paced")
        self.budget[target] = self.budget.get(target, 99) - 1
        return Admission(allowed=True)

    def report(self, target, channel, outcome, now, *, final):
        if target == "broken":
            raise RuntimeError("broken bookkeeping")
        self.told.append((target, outcome.kind, final))
        return Report(ops=(DeferDelivery(f"op-{target}", None, "x", now),))


def test_admit_each_stops_at_a_targets_first_no_or_error():
    health = Paced(a=2)
    grants = admit_each(health.may_send, [Want("a", "webhook", 5), Want("b", "webhook", 3),
                                          Want("broken", "webhook", 2)], T0)
    assert grants[:2] == [Grant("a", 2, refusal=Admission(allowed=False, not_before=T0 + 60, reason="paced")),
                          Grant("b", 3)]
    assert grants[2].admitted == 0 and isinstance(grants[2].error, KeyError)
    assert health.asked == ["a", "a", "a", "b", "b", "b", "broken"]  # the per-row calls, in order


def test_a_per_row_health_is_adapted_and_a_batch_one_is_used_as_is():
    per_row = Paced()
    assert isinstance(as_batch(per_row), PerCall)
    adapted = as_batch(per_row)
    assert as_batch(adapted) is adapted
    told = [Told(target="a", channel="webhook", outcome=DELIVERED, at=T0),
            Told(target="broken", channel="webhook", outcome=retryable("x"), at=T0, about="delivery d"),
            Told(target="b", channel="webhook", outcome=retryable("y"), at=T0 + 1, final=True)]
    got = adapted.settle(told, T0 + 2)
    assert per_row.told == [("a", "delivered", False), ("b", "retryable", True)]
    assert [o.delivery_id for o in got.ops] == ["op-a", "op-b"]  # type: ignore[attr-defined]
    assert [f.told.target for f in got.faults] == ["broken"] and "broken" in str(got.faults[0].error)


def test_one_admission_decides_a_round_as_the_rows_would_one_by_one():
    """Expired rows end without health; the paced target's third row waits (and its later rows,
    expired one included, stay behind it, undecided); health is asked once for both targets."""
    health = Paced(a=2)
    calls: list[list[Want]] = []
    gate = Attempts(health)
    inner = gate.batch

    class Count:
        def admit(self, wants, now):
            calls.append(list(wants))
            return inner.admit(wants, now)

        def settle(self, told, now):
            return inner.settle(told, now)

        def probes_due(self, now):
            return []
    gate.batch = Count()
    rows = [_row(0, "a", ttl=1), _row(1, "a"), _row(2, "a"), _row(3, "a"), _row(4, "a", ttl=1), _row(5, "b")]
    decided, faults = gate.admit(rows, T0)
    assert calls == [[Want("a", "webhook", 3), Want("b", "webhook", 1)]] and faults == []
    assert [(r.id, b.action) for r, b in decided] == [
        ("ev-a0.1", "expired"), ("ev-a1.1", "send"), ("ev-a2.1", "send"), ("ev-a3.1", "wait"),
        ("ev-b5.1", "send")]
    assert decided[1][1].ops == (ClaimDelivery("ev-a1.1", 1, T0 + 30, T0),)
    assert decided[3][1].ops == (DeferDelivery("ev-a3.1", T0 + 60, "paced", T0),)
    assert isinstance(decided[0][1].ops[0], SettleDelivery) and decided[0][1].next is not None


def test_stack_rows_are_each_decided_after_a_refusal():
    health = Paced(stack=1)
    decided, _ = Attempts(health).admit([_row(i, "stack", "stack") for i in range(3)], T0)
    assert [b.action for _, b in decided] == ["send", "wait", "wait"]
    assert health.asked == ["stack", "stack"]  # asked until the first "no"; the rest share it


def test_flood_control_holds_a_target_without_asking_health():
    health = Paced()
    gate = Attempts(health)
    gate.settle(_row(9, "a"), flooded("HTTP 429", 120.0), T0, attempt=1)
    decided, _ = gate.admit([_row(1, "a"), _row(2, "a"), _row(3, "b")], T0 + 1)
    assert [(r.id, b.action) for r, b in decided] == [("ev-a1.1", "wait"), ("ev-b3.1", "send")]
    assert health.asked == ["b"]


def test_health_errors_make_rows_wait_and_are_handed_back():
    gate = Attempts(Paced())
    decided, faults = gate.admit([_row(1, "broken"), _row(2, "broken"), _row(3, "a")], T0)
    assert [(r.id, b.action) for r, b in decided] == [("ev-broken1.1", "wait"), ("ev-a3.1", "send")]
    assert [(r.id, type(e).__name__) for r, e in faults] == [("ev-broken1.1", "KeyError")]
    assert decided[0][1].ops[0].reason.startswith("sender health error (KeyError)")  # type: ignore[attr-defined]

    class Down(AlwaysOpen):
        def admit(self, wants, now):
            raise RuntimeError("the whole admission broke")

        def settle(self, told, now):
            raise RuntimeError("never asked")
    decided, faults = Attempts(Down()).admit([_row(1, "a"), _row(2, "b")], T0)
    assert [b.action for _, b in decided] == ["wait", "wait"] and len(faults) == 2


def test_what_health_is_told():
    row = _row(1, "a", attempts=4)
    gate = Attempts()
    nxt, _ = gate.settle(row, retryable("HTTP 503", 503), T0, attempt=5)
    t = gate.told(row, retryable("HTTP 503", 503), nxt, T0, attempt=5)
    assert t is not None and t.final and t.about == "delivery ev-a1.1"
    assert gate.told(row, flooded("HTTP 429"), nxt, T0, attempt=5) is None  # not a failure
    req = gate.request_told("stack", "stack", [retryable("x"), DELIVERED], T0)
    assert req is not None and req.outcome == DELIVERED and not req.final
    assert gate.tell([], T0).ops == ()  # nothing told: health is not asked
