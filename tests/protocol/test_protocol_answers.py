"""``sidecar schema`` covers answers as well as requests (issue 7 item 5), and the real answers of
a running sidecar match those schemas, so the schema the Electron team reads cannot drift."""
from __future__ import annotations

import json
import subprocess
import sys

import msgspec

from bridge.client import BridgeClient
from sidecar.protocol.inbound import INBOUND
from sidecar.protocol.answers import ANSWERS
from tests.integration.sidecar_proc import ROOT, SidecarProcess

T0 = 1796025600.0


def test_every_request_method_has_an_answer_schema():
    assert set(ANSWERS) == set(INBOUND)
    r = subprocess.run([sys.executable, "-m", "sidecar", "schema"], cwd=ROOT, capture_output=True, text=True,
                       check=True)
    schema = json.loads(r.stdout)
    assert set(schema["answers"]) == set(INBOUND)
    assert "platform.request" in schema["outbound_answers"]
    assert schema["answers"]["session.login"]["$ref"].endswith("LoginAnswer")


async def test_real_answers_match_the_schema(tmp_path):
    async def answer(method, params):
        return {"dialogs": [], "online": []}

    async with SidecarProcess(tmp_path) as sc:
        c = await BridgeClient.connect(sc.port, sc.token, on_request=answer)
        msgspec.convert(c.hello, ANSWERS["auth"])
        calls = [
            ("status", {}),
            ("clock.advance_to", {"t": T0}),
            ("session.login", {"tu": "c-1", "project": "chathouse"}),
            ("platform.event", {"project": "chathouse", "tu": "c-1", "name": "Send",
                                "data": {"id": "m1", "type": "message", "from": "r-1", "to": "c-1",
                                         "at": T0, "body": "hi"}}),
            ("platform.reconnected", {"project": "chathouse", "tu": "c-1"}),
            ("platform.poll", {"project": "chathouse", "tu": "c-1", "pass": "check_chat", "data": {"dialogs": []}}),
            ("favorite.update", {"tu": "c-1", "ru": "r-1", "project": "chathouse", "active": True}),
            ("tasks.list", {"tu": "c-1"}),
            ("stream.ack", {"seq": 1}),
            ("status", {}),
            ("why", {"tu": "c-1", "ru": "r-1"}),
        ]
        for method, params in calls:
            result = await c.call(method, params)
            msgspec.convert(result, ANSWERS[method])  # raises on any drift
        why = await c.call("why", {"tu": "c-1", "ru": "r-1"})
        assert any(d["outcome"] == "created" for d in why["decisions"]), why  # rows, not vacuous
        [task] = await c.call("tasks.list", {"tu": "c-1"})
        msgspec.convert(await c.call("task.close", {"task_id": task["task_id"], "reason": "answered"}),
                        ANSWERS["task.close"])
        msgspec.convert(await c.call("session.logout", {"tu": "c-1", "project": "chathouse"}),
                        ANSWERS["session.logout"])
        await c.close()
