"""A TU without a favorites list, end to end (issue 22 item 2; DESIGN §9, §12.5, §10): a real
``sidecar serve`` process over the real websocket, the reference Stack (electron-stub's
``StackServer``) serving startup data with **no** ``favorites`` key.  The login answer says so,
the router delivers one ``sidecar/tu/no_favorites`` alert to the shift lead's target, and
``sidecar why`` shows the TU-wide row; a TU with ``[]`` and a login with Stack unreachable raise
nothing."""
from __future__ import annotations

import json

from bridge.client import BridgeClient
from electron_stub.stack_server import StackServer
from tests.integration.sidecar_proc import SidecarProcess
from tests.integration.test_why import cli

T0 = 1796025600.0
BARE, EMPTY, RU = "g-tu-bare", "g-tu-empty", "g-ru-1"


async def _answer(method, params):
    return {"dialogs": [], "mails": [], "online": []}


async def test_a_tu_stack_has_no_list_for_is_visible(tmp_path, monkeypatch):
    monkeypatch.setenv("SIDECAR_ROUTER_TARGETS", json.dumps({"lead": {"channel": "journal"}}))
    stack = StackServer()
    stack.no_favorites.add(BARE)
    stack.start()
    try:
        async with SidecarProcess(tmp_path, clock="virtual", extra=("--stack-url", stack.url)) as sc:
            c = await BridgeClient.connect(sc.port, sc.token, on_request=_answer)
            await c.call("clock.advance_to", {"t": T0})
            await c.call("rules.create", {"name": "lead", "conditions": {"source": "sidecar", "subjects": ["tu"]},
                                          "actions": [{"target": "lead"}]})
            bare = await c.call("session.login", {"tu": BARE, "project": "golden", "operator": "op"})
            assert bare["restored_from_stack"] is True and bare["no_favorites_list"] is True
            assert bare["favorites"] == 0
            empty = await c.call("session.login", {"tu": EMPTY, "project": "golden", "operator": "op"})
            assert empty["restored_from_stack"] is True and empty["no_favorites_list"] is False
            # a re-login the same day: still said, alerted once
            await c.call("clock.advance_to", {"t": T0 + 60})
            await c.call("session.logout", {"tu": BARE})
            again = await c.call("session.login", {"tu": BARE, "project": "golden", "operator": "op"})
            assert again["no_favorites_list"] is True
            await c.call("clock.advance_to", {"t": T0 + 61})
            rows = (await c.call("deliveries.list", {"target": "lead"}))["deliveries"]
            assert [(r["subject"], r["action"], r["priority"], r["status"]) for r in rows] == [
                ("tu", "no_favorites", "high", "delivered"), ("tu", "no_favorites", "high", "duplicate")]
            assert BARE in rows[0]["message"]
            why = await c.call("why", {"tu": BARE, "ru": RU})
            assert [(d["type"], d["source"], d["outcome"]) for d in why["decisions"]] == [
                ("favorites", "login", "no_list")] * 2
            assert (await c.call("why", {"tu": EMPTY, "ru": RU}))["decisions"] == []
            # Stack unreachable: the local cache stands in and nobody knows Stack has no list
            stack.stop()
            await c.call("session.logout", {"tu": BARE})
            down = await c.call("session.login", {"tu": BARE, "project": "golden", "operator": "op"})
            assert down["restored_from_stack"] is False and down["no_favorites_list"] is False
            await c.close()
        table = cli("why", BARE, RU, "--data-dir", str(tmp_path))
        assert table.returncode == 0, table.stderr
        assert "no_list" in table.stdout and "no favorites list" in table.stdout
    finally:
        stack.stop()
