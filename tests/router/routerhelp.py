"""Router test helpers: a router state, and a scripted channel on a virtual clock."""
from __future__ import annotations

from collections.abc import Callable

from sidecar.router.io.channels import Channel
from sidecar.router.model import Delivery, RoutingEvent, parse_rule
from sidecar.router.attempt import DELIVERED, Outcome
from sidecar.router.state import RouterState
from sidecar.router.route import route
from sidecar.router.io.storage import RouterStore

T0 = 1_764_489_600.0
TARGETS = {"stack": "stack", "audit": "journal", "ops-telegram": "telegram", "crm-hook": "webhook"}


class Scripted(Channel):
    """A channel whose outcomes are scripted: ``answer(row, now) -> Outcome``; records calls."""

    kind = "scripted"

    def __init__(self, name: str, answer: Callable[[Delivery, float], Outcome] = lambda r, n: DELIVERED) -> None:
        super().__init__(name)
        self.answer = answer
        self.calls: list[tuple[str, float, int]] = []  # (delivery id, now, attempts before)

    async def send(self, row: Delivery, now: float) -> Outcome:
        self.calls.append((row.id, now, row.attempts))
        return self.answer(row, now)

    async def probe(self, now: float) -> Outcome:
        return DELIVERED


def make_state(*rules: dict) -> RouterState:
    return RouterState(prefix="ev-", rules={r["name"]: parse_rule(r, TARGETS) for r in rules})


async def emit(rstore: RouterStore, st: RouterState, events: list[RoutingEvent], now: float,
               targets: dict[str, str] = TARGETS):
    """What a step does: route, commit the ops in one transaction, then evolve the state."""
    r = route(st, events, now, targets)
    await rstore.commit(r.ops())
    st.apply(r)
    return r
