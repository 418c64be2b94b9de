"""Logs over the bridge against a real sidecar process (issue 20 item 3): subscribe at INFO, a
known line arrives as a ``log`` notification (no ``seq``: outside the stream, never replayed);
the level changed live to ERROR, the same line no longer arrives; unsubscribed, nothing does; a
reconnecting client's subscription is gone until it subscribes again.

The known INFO line: the bridge logs ``<method> failed: <error>`` for every refused request, before
its answer is queued — so a record it sends precedes that answer on the wire, and "no record
before the answer" proves the record was not sent (no sleep, no timing)."""
from __future__ import annotations

import msgspec

from bridge.client import BridgeClient
from bridge.errors import RemoteError
from sidecar import PROTOCOL_VERSION
from sidecar.protocol.answers import ANSWERS
from sidecar.protocol.outbound import LogNote
from tests.integration.sidecar_proc import SidecarProcess


class Wire:
    """A client that records every notification, in order, with the answers as markers."""

    def __init__(self) -> None:
        self.frames: list[tuple[str, dict]] = []
        self.c: BridgeClient | None = None

    async def connect(self, sc: SidecarProcess) -> BridgeClient:
        self.c = await BridgeClient.connect(sc.port, sc.token, on_notification=self._note)
        return self.c

    def _note(self, method: str, params: dict) -> None:
        self.frames.append((method, params))

    async def refused(self, marker: str) -> list[dict]:
        """Send a request the sidecar refuses (the known INFO line names ``marker``); return the
        ``log`` records that arrived before its answer and name it."""
        assert self.c is not None
        start = len(self.frames)
        try:
            await self.c.call("session.login", {"tu": "g-1", "project": marker})  # a bad enum value
        except RemoteError as exc:
            assert exc.code == -32602
        else:
            raise AssertionError(f"project {marker!r} was accepted")
        return [p for m, p in self.frames[start:] if m == "log" and marker in p["msg"]]


async def test_subscribe_receive_change_the_level_live_unsubscribe(tmp_path):
    async with SidecarProcess(tmp_path) as sc:
        w = Wire()
        c = await w.connect(sc)
        assert "logs" in c.hello["capabilities"] and c.hello["protocol"] == PROTOCOL_VERSION
        answer = await c.call("logs.subscribe", {"level": "INFO"})
        msgspec.convert(answer, ANSWERS["logs.subscribe"])
        assert (answer["ok"], answer["level"], answer["process_level"]) == (True, "INFO", "INFO")
        [record] = await w.refused("tu-info-1")
        msgspec.convert(record, LogNote)  # the schema's closed record
        assert record["level"] == "INFO" and record["logger"] == "bridge.server" and "seq" not in record
        assert record["msg"].startswith("session.login failed") and record["ts"] > 1e9
        assert (await c.call("logs.subscribe", {"level": "ERROR"}))["level"] == "ERROR"  # live
        assert await w.refused("tu-info-2") == []
        assert (await c.call("logs.subscribe", {"level": "INFO"}))["ok"] is True
        assert len(await w.refused("tu-info-3")) == 1
        assert await c.call("logs.unsubscribe", {}) == {"ok": True, "next_due": None}
        assert await w.refused("tu-info-4") == []
        # the records were never on the stream: nothing to ack, nothing replayed
        assert c.hello["last_seq"] == 0 and all(m == "log" for m, _ in w.frames)
        await c.close()
        assert await sc.stop() == 0


async def test_a_subscription_ends_with_its_connection(tmp_path):
    async with SidecarProcess(tmp_path) as sc:
        w = Wire()
        c = await w.connect(sc)
        await c.call("logs.subscribe", {"level": "INFO"})
        assert len(await w.refused("tu-before")) == 1
        await c.close()
        w2 = Wire()
        c2 = await w2.connect(sc)  # a reconnecting client: not subscribed until it asks again
        assert await w2.refused("tu-after") == []
        await c2.call("logs.subscribe", {"level": "WARNING"})
        assert await w2.refused("tu-again") == []  # INFO is below WARNING
        # a WARNING line: an error answer to a request the sidecar never made
        await c2._ws.send(b'{"jsonrpc":"2.0","id":987654,"error":{"code":-32000,"message":"tu-warn"}}')
        assert (await c2.call("status", {}))["protocol"] == 1
        warned = [p for m, p in w2.frames if m == "log" and "987654" in p["msg"]]
        assert [p["level"] for p in warned] == ["WARNING"]
        await c2.close()
        assert await sc.stop() == 0
