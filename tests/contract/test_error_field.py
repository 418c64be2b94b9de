"""Every -32602 names the refused field in ``error.data.field`` (issue 20 item 1; DESIGN §4
"always ``data.field``; a JSON pointer for raw events"): a client shows the operator which value
was wrong without parsing the message.  Against a real sidecar, and statically: no
``InvalidParams`` is raised in ``sidecar/`` without a ``data`` (the class of the bug)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from bridge.client import BridgeClient
from bridge.errors import RemoteError
from tests.contract.frames import problems
from tests.integration.sidecar_proc import SidecarProcess

ROOT = Path(__file__).resolve().parents[2]
T0 = 1796025600.0
MSG = {"messageId": "m1", "senderId": "g-ru-1", "recipientId": "g-tu-1", "sentAt": T0 + 1, "text": "hi"}
BAD = [  # (method, params, the field named)
    ("session.login", {"tu": "g-tu-1", "project": "goldn"}, "project"),
    ("session.login", {"project": "golden"}, "tu"),
    ("session.login", [], "params"),
    ("platform.event", {"project": "golden", "tu": "nobody", "name": "receivePrivateMessage", "data": MSG}, "tu"),
    ("platform.event", {"project": "prime", "tu": "g-tu-1", "name": "receivePrivateMessage", "data": MSG}, "project"),
    ("platform.event", {"project": "golden", "tu": "g-tu-1", "name": "Send", "data": MSG}, "name"),
    ("platform.event", {"project": "golden", "tu": "g-tu-1", "name": "receivePrivateMessage",
                        "data": {**MSG, "sentAt": 1.7e12}}, "/data/sentAt"),
    ("platform.event", {"project": "golden", "tu": "g-tu-1", "name": "receivePrivateMessage",
                        "data": {k: v for k, v in MSG.items() if k != "senderId"}}, "/data/senderId"),
    ("platform.poll", {"project": "golden", "tu": "nobody", "pass": "online"}, "tu"),
    ("platform.poll", {"project": "golden", "tu": "g-tu-1", "pass": "nope"}, "pass"),
    ("task.close", {"task_id": "t-1", "reason": "gone"}, "reason"),
    ("tasks.list", {"tu": "g-tu-1", "cursor": "not-ours"}, "cursor"),
    ("tasks.list", {"tu": "g-tu-1", "limit": 0}, "limit"),
    ("stream.ack", {"seq": 10 ** 9}, "seq"),  # beyond the last issued: the bridge's own refusal
    ("stream.ack", {"seq": -1}, "seq"),
    ("stream.ack", [], "params"),
]


async def test_every_refusal_names_its_field(tmp_path):
    async def answer(method, params):
        return {"dialogs": [], "mails": [], "online": []}

    async with SidecarProcess(tmp_path) as sc:
        c = await BridgeClient.connect(sc.port, sc.token, on_request=answer)
        await c.call("clock.advance_to", {"t": T0})
        await c.call("session.login", {"tu": "g-tu-1", "project": "golden"})
        got = []
        for method, params, field in BAD:
            with pytest.raises(RemoteError) as info:
                await c.call(method, params)
            err = info.value
            got.append((method, err.code, (err.data or {}).get("field")))
            error_frame = {"jsonrpc": "2.0", "id": 1, "error": {"code": err.code, "message": err.message,
                                                                   **({} if err.data is None else {"data": err.data})}}
            assert not problems(f"in.{method}.error", error_frame)
        assert got == [(m, -32602, f) for m, _, f in BAD]
        await c.close()


def test_no_invalid_params_without_data():
    """A new ``InvalidParams("…")`` with no ``data`` (or an engine / raw-event refusal with no
    ``field=``) would answer without the field."""
    missing = []
    for path in sorted([*(ROOT / "sidecar").rglob("*.py"), *(ROOT / "platform_clients").rglob("*.py")]):
        text = path.read_text()
        # raised or built to be sent; the engine's and the raw-event refusals carry field=
        for m in re.finditer(r"(?<![\w.])(?:InvalidParams|EngineError|UnknownRawEvent)\((?!\))", text):
            if text[text.rfind("\n", 0, m.start()) + 1:m.start()].lstrip().startswith("class "):
                continue  # the class itself
            call = text[m.end():m.end() + 400]
            depth, end = 1, 0
            for end, ch in enumerate(call):
                depth += {"(": 1, ")": -1}.get(ch, 0)
                if depth == 0:
                    break
            if "data=" not in call[:end] and "field=" not in call[:end]:
                missing.append(f"{path.relative_to(ROOT)}:{text[:m.start()].count(chr(10)) + 1}")
    assert missing == []


async def test_a_wall_clock_refusal_names_its_field_too(tmp_path):
    """On the wall clock ``platform.event`` runs in step groups (another path to the answer)."""
    async def answer(method, params):
        return {"dialogs": [], "mails": [], "online": []}

    async with SidecarProcess(tmp_path, clock="wall") as sc:
        c = await BridgeClient.connect(sc.port, sc.token, on_request=answer)
        await c.call("session.login", {"tu": "g-tu-1", "project": "golden"})
        with pytest.raises(RemoteError) as info:
            await c.call("platform.event", {"project": "golden", "tu": "g-tu-1", "name": "receivePrivateMessage",
                                            "data": {**MSG, "sentAt": 1.7e12}})
        assert (info.value.code, info.value.data) == (-32602, {"field": "/data/sentAt"})
        await c.close()
