"""Bad input never reaches -32603 (issue 18 item 4, the fuzzer's finds): a list or object where
an enum goes (``events.emit`` ``priority``, ``rules.create`` ``conditions.priority_min``), an
integer past int64 — each is a -32602 naming the field (``data.field``), decided by the method's
msgspec type, before any handler code runs.  The property test over every method is
:mod:`tests.sidecar.test_params_fuzz`; the websocket cases are in
:mod:`tests.integration.test_bad_input`."""
from __future__ import annotations

import asyncio
import json

import msgspec
import pytest

from bridge.errors import InvalidParams
from sidecar.app.root import SidecarApp
from sidecar.config import Settings
from sidecar.store.db import Store

T0 = 1796025600.0
HUGE = msgspec.Raw(b"9" * 5000)  # a 5,000-digit integer literal


def _raw(**fields) -> msgspec.Raw:
    """Params as the frame carries them (Raw values are spliced in as they are)."""
    return msgspec.Raw(msgspec.json.encode(fields))


@pytest.fixture(autouse=True)
def _journal_target(monkeypatch):
    monkeypatch.setenv("SIDECAR_ROUTER_TARGETS", json.dumps({"audit": {"channel": "journal"}}))


async def _app(tmp_path):
    """A virtual-clock app with TU ``t`` logged in and a rule ``r0``."""
    store = await Store.open(tmp_path / "sidecar.db")
    app = SidecarApp(Settings(token="t", clock="virtual", data_dir=tmp_path), store)
    app.bridge.notify = lambda m, p=None: 0  # type: ignore[method-assign]
    await app.handle("clock.advance_to", {"t": T0})
    await app.handle("session.login", {"tu": "t", "project": "golden"})
    await app.handle("rules.create", {"name": "r0", "actions": [{"target": "audit"}]})
    return app, store


BAD = [
    ("events.emit", {"source": "ui", "subject": "s", "action": "a", "priority": ["high"]}, "priority"),
    ("events.emit", {"source": "ui", "subject": "s", "action": "a", "priority": {"p": 1}}, "priority"),
    ("events.emit", {"source": "ui", "subject": "s", "action": "a", "priority": "urgent"}, "priority"),
    ("rules.create", {"name": "r", "conditions": {"priority_min": []},
                      "actions": [{"target": "audit"}]}, "conditions.priority_min"),
    ("rules.create", {"name": "r", "conditions": {"priority_min": {}},
                      "actions": [{"target": "audit"}]}, "conditions.priority_min"),
    ("rules.patch", {"name": "r0", "changes": {"conditions": {"priority_min": [1]}}},
     "changes.conditions.priority_min"),
    ("rules.create", {"name": "r", "weight": HUGE, "actions": [{"target": "audit"}]}, "weight"),
    ("favorite.update", {"tu": "t", "ru": "r", "chat_limit": HUGE}, "chat_limit"),
    ("favorite.update", {"tu": "t", "ru": "r", "paid_actions": 2 ** 63}, "paid_actions"),
    ("groups.create", {"name": "g", "priority": HUGE}, "priority"),
    ("groups.create", {"name": "g", "priority": 1, "failed_in_row": 2 ** 64}, "failed_in_row"),
    ("deliveries.list", {"status": ["pending"]}, "status"),
    ("why", {"tu": "t", "ru": "r", "after_id": HUGE}, "after_id"),
]


@pytest.mark.parametrize(("method", "params", "field"), BAD, ids=[f"{m}:{f}" for m, _, f in BAD])
def test_a_bad_scalar_is_invalid_params_naming_the_field(tmp_path, method, params, field):
    async def main():
        app, store = await _app(tmp_path)
        try:
            raw = msgspec.Raw(msgspec.json.encode(params))
            with pytest.raises(InvalidParams) as e:
                await app.handle(method, raw)
            assert e.value.data == {"field": field}, e.value
            assert method in e.value.message
        finally:
            await app.close()
            await store.close()
    asyncio.run(main())


def test_the_priorities_are_the_seed_s_four_and_valid_ones_still_route(tmp_path):
    """Seed 002 ``PRIORITY_ORDER``: low | normal | high | critical; absent or null = normal."""
    async def main():
        app, store = await _app(tmp_path)
        try:
            for prio in ("low", "normal", "high", "critical", None):
                res = await app.handle("events.emit", {"source": "ui", "subject": "s", "action": "a",
                                                       "priority": prio})
                assert res["ok"] is True
            res = await app.handle("rules.create", {"name": "r", "conditions": {"priority_min": "high"},
                                                    "actions": [{"target": "audit"}]})
            assert res["rule"]["conditions"]["priority_min"] == "high"
        finally:
            await app.close()
            await store.close()
    asyncio.run(main())
