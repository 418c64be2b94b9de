"""The frozen (PyInstaller onedir) binary is tested like the source: built once per session,
then a seed scenario (or, without ../shared, the project's own demo scenario) is replayed
against it through the harness; it must exit cleanly and leave no process behind."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.replay_util import ROOT, SEED_DIR, replay

# one xdist group: the binary (the session fixture ``frozen``) is built once, in one worker
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("frozen")]


def test_frozen_binary_cli(frozen):
    assert subprocess.run([frozen, "version"], capture_output=True, text=True).stdout.strip()
    schema = json.loads(subprocess.run([frozen, "schema"], capture_output=True, text=True, check=True).stdout)
    assert "in.platform.event" in schema["$defs"] and "out.task.created" in schema["$defs"]


def _scenario(tmp_path: Path) -> Path:
    if (SEED_DIR / "s01_chain_starts_at_close.jsonl").exists():
        return SEED_DIR / "s01_chain_starts_at_close.jsonl"
    path = tmp_path / "demo.jsonl"
    subprocess.run([sys.executable, "-m", "electron_stub", "generate", "--preset", "demo", "-o", str(path)],
                   cwd=ROOT, check=True)
    return path


def test_frozen_binary_replays_a_scenario_and_exits_cleanly(frozen, tmp_path):
    rp, code = replay(_scenario(tmp_path), tmp_path / "data", binary=str(frozen))
    assert code == 0
    assert rp.stats.exits and all(e.clean for e in rp.stats.exits), rp.stats.exits
    left = subprocess.run(["pgrep", "-f", str(frozen)], capture_output=True, text=True).stdout.split()
    assert left == [], f"processes left behind: {left}"


def test_frozen_binary_survives_a_crash_scenario(frozen, tmp_path):
    """The project's own demo scenario has a crash, a shift change and a Stack fault."""
    path = tmp_path / "demo.jsonl"
    subprocess.run([sys.executable, "-m", "electron_stub", "generate", "--preset", "demo", "-o", str(path)],
                   cwd=ROOT, check=True)
    rp, code = replay(path, tmp_path / "data", binary=str(frozen))
    assert code == 0


def test_frozen_binary_why_reads_a_data_dir(frozen, tmp_path):
    import asyncio

    from sidecar.store import PutDecision, Store

    async def write():
        async with await Store.open(tmp_path / "sidecar.db") as s:
            await s.commit([PutDecision(tu="g-tu-1", ru="g-ru-1", at=1796025605.0, task_type="follow_up_message",
                                        source="chain", outcome="refused:offline")])
    asyncio.run(write())
    r = subprocess.run([frozen, "why", "g-tu-1", "g-ru-1", "--data-dir", str(tmp_path)], capture_output=True,
                       text=True, env={**os.environ, "COLUMNS": "200"}, check=False)
    assert r.returncode == 0, r.stderr
    assert "refused:offline" in r.stdout and "the customer was offline" in r.stdout


async def test_frozen_binary_holds_what_it_imports_on_first_use(frozen, tmp_path, monkeypatch):
    """Jinja, httpx and standardwebhooks are imported where they are first needed (a sidecar
    with no template and no HTTP target starts without them: issue 11), so nothing at start-up
    proves the frozen build holds them.  This does: a webhook target (httpx, standardwebhooks)
    and a rule whose template (Jinja and the bounded sandbox) renders into the delivery rows."""
    from bridge.client import BridgeClient
    from tests.integration.sidecar_proc import SidecarProcess, answer_no_dialogs

    monkeypatch.setenv("SIDECAR_ROUTER_TARGETS", json.dumps({
        "audit": {"channel": "journal"},
        # Standard Webhooks' own example secret; port 9 (discard) refuses: the rows are what count
        "hook": {"channel": "webhook", "url": "http://127.0.0.1:9/hook",
                 "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}}))
    async with SidecarProcess(tmp_path, binary=str(frozen)) as sc:
        c = await BridgeClient.connect(sc.port, sc.token, on_request=answer_no_dialogs)
        await c.call("clock.advance_to", {"t": 1796025600.0})
        await c.call("rules.create", {"name": "greet", "conditions": {"source": "electron"}, "actions": [
            {"target": "audit", "template": "hello {{ payload.who | upper }}"},
            {"target": "hook", "template": "{% for i in range(2) %}{{ i }}{% endfor %}"}]})
        await c.call("events.emit", {"source": "electron", "subject": "app", "action": "started",
                                     "payload": {"who": "frozen"}})
        rows = {r["target"]: r for r in (await c.call("deliveries.list", {}))["deliveries"]}
        await c.close()
        assert await sc.stop() == 0
    assert json.loads(rows["audit"]["message"])["message"] == "hello FROZEN", rows
    assert json.loads(rows["hook"]["message"])["message"] == "01", rows



async def test_frozen_binary_writes_to_stack_over_plain_http(frozen, tmp_path):
    """Stack over ``http://`` goes through h11 directly (``sidecar/stack/http11.py``, issue 24
    lever 2), not httpx: the frozen build must hold h11.  A login reads Stack's startup data and
    ``stack.flush`` sends the first message's writes; both are answered by a real loopback Stack."""
    from bridge.client import BridgeClient
    from tests.integration.sidecar_proc import SidecarProcess
    from tests.stack.fake_stack import StackServer

    t0, tu = 1796025600.0, "g-tu-1"

    async def answer(method, params):
        return {"users": [], "dialogs": []}

    stack = StackServer()
    stack.startup[tu] = {"favorites": [{"ru": "ru-9"}], "history": []}
    stack.start()
    try:
        async with SidecarProcess(tmp_path, binary=str(frozen), clock="virtual",
                                  extra=("--stack-url", stack.url)) as sc:
            c = await BridgeClient.connect(sc.port, sc.token, on_request=answer)
            await c.call("clock.advance_to", {"t": t0})
            login = await c.call("session.login", {"tu": tu, "project": "golden", "operator": "op"})
            assert login["restored_from_stack"] is True and login["favorites"] == 1, login
            await c.call("clock.advance_to", {"t": t0 + 3})
            await c.call("platform.event", {
                "project": "golden", "tu": tu, "name": "receivePrivateMessage", "received_at": t0 + 3,
                "data": {"messageId": "m-1", "senderId": "ru-1", "recipientId": tu, "sentAt": t0 + 3,
                         "text": "hi"}})
            flushed = await c.call("stack.flush", {})
            await c.close()
            assert await sc.stop() == 0
    finally:
        stack.stop()
    assert flushed["acked"] >= 2 and flushed["failed"] == 0 and flushed["pending"] == 0, flushed
    assert len(stack.writes()) == flushed["acked"]
