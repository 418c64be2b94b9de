"""``why`` end to end: a real sidecar process logs its decisions in SQLite; the bridge method and
the CLI (reading the data dir beside the running process) show them in order (DESIGN §13)."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from bridge.client import BridgeClient
from bridge.errors import RemoteError
from tests.integration.sidecar_proc import ROOT, SidecarProcess

T0 = 1796025600.0
TU, RU = "g-tu-1", "g-ru-1"


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sidecar", *args], cwd=ROOT, capture_output=True, check=False,
                          text=True, timeout=60, env={"PYTHONPATH": str(ROOT), "COLUMNS": "200",
                                                      "PATH": "/usr/bin:/bin"})


async def test_why_on_the_bridge_and_the_cli(tmp_path):
    async with SidecarProcess(tmp_path) as sc:
        async def answer(method, params):
            return {"dialogs": [], "mails": [], "online": []}
        c = await BridgeClient.connect(sc.port, sc.token, on_request=answer)
        assert (await c.call("why", {"tu": TU, "ru": RU}))["decisions"] == []  # no clock needed
        await c.call("clock.advance_to", {"t": T0})
        await c.call("session.login", {"tu": TU, "project": "golden"})
        msg = {"messageId": "m1", "senderId": RU, "recipientId": TU, "sentAt": T0 + 5, "text": "hi"}
        await c.call("clock.advance_to", {"t": T0 + 5})
        await c.call("platform.event", {"project": "golden", "tu": TU, "name": "receivePrivateMessage",
                                        "data": msg})
        await c.call("clock.advance_to", {"t": T0 + 6})
        await c.call("platform.event", {"project": "golden", "tu": TU, "name": "receivePrivateMessage",
                                        "data": {**msg, "messageId": "m2", "sentAt": T0 + 6}})
        got = await c.call("why", {"tu": TU, "ru": RU})
        assert [(d["at"], d["type"], d["source"], d["outcome"]) for d in got["decisions"]] == [
            (T0 + 5, "unanswered_message", "socket", "created"),
            (T0 + 6, "unanswered_message", "socket", "refused:stronger_task_open")]
        assert got["decisions"][0]["task_id"] and "created as task" in got["decisions"][0]["text"]
        assert (await c.call("why", {"tu": TU, "ru": RU, "since": T0 + 6}))["decisions"][0]["at"] == T0 + 6
        with pytest.raises(RemoteError) as e:
            await c.call("why", {"tu": TU})
        assert e.value.code == -32602

        # the CLI reads the data dir while the sidecar runs (read-only, no lock)
        table = cli("why", TU, RU, "--data-dir", str(tmp_path))
        assert table.returncode == 0, table.stderr
        assert "2026-11-30 08:00:05" in table.stdout and "refused:stronger_task_open" in table.stdout
        assert "already open" in table.stdout
        lines = cli("why", TU, RU, "--data-dir", str(tmp_path), "--json")
        story = [json.loads(x) for x in lines.stdout.splitlines()]
        # the pair's whole story: its decisions with their outcomes, and the task they made
        assert [e["details"]["outcome"] for e in story if "outcome" in e["details"]] == [
            "created", "refused:stronger_task_open"]
        assert [e["kind"] for e in story if e["kind"] == "created"] == ["created"]
        since = cli("why", TU, RU, "--data-dir", str(tmp_path), "--since", "2026-11-30T08:00:06Z", "--json")
        assert len(since.stdout.splitlines()) == 1
        await c.close()


def test_cli_why_bad_input_is_one_line_and_exit_2(tmp_path):
    missing = cli("why", TU, RU, "--data-dir", str(tmp_path / "none"))
    assert missing.returncode == 2 and "no sidecar database" in missing.stderr
    assert len(missing.stderr.strip().splitlines()) == 1
    bad = cli("why", TU, RU, "--data-dir", str(tmp_path), "--since", "yesterday-ish")
    assert bad.returncode == 2 and "--since" in bad.stderr
    assert cli("why", TU).returncode == 2  # argparse: RU missing
