"""End to end: the replay driver against the real sidecar (``python -m sidecar serve``).

Skipped when the sidecar runtime cannot be imported; the seed scenarios also need ../shared."""
from __future__ import annotations

import asyncio
import json
import os
import stat

import pytest

from electron_stub import report
from electron_stub import scenario as sc
from electron_stub.machine import MachineError
from electron_stub.replay import Replay

try:
    import sidecar.app.root  # noqa: F401
    HAVE_SIDECAR = True
except Exception:  # noqa: BLE001 - being written in parallel
    HAVE_SIDECAR = False

needs_sidecar = pytest.mark.skipif(not HAVE_SIDECAR, reason="sidecar runtime (sidecar.app.root) not importable yet")

LIFECYCLE = [
    {"kind": "header", "format": 1, "name": "lifecycle", "start": "2026-11-30T08:00:00Z", "seed": 3, "duration_s": 200,
     "operator": {"chat_answer_p": 1.0, "chat_delay_s": [10, 10], "mail_answer_p": 0.0, "mail_delay_s": [60, 60]}},
    {"kind": "tu", "project": "golden", "tu": "g1", "operator": "op-1"},
    {"kind": "favorite", "project": "golden", "tu": "g1", "ru": "r1", "active": True, "is_white": False,
     "spend_30d_usd": 50.0, "spend_total_usd": 400.0, "paid_actions": 40, "paid_with_bonuses_only": False,
     "chat_limit": None, "mail_limit": None, "markers": {}},
    {"t": 0, "kind": "login", "project": "golden", "tu": "g1", "operator": "op-1"},
    {"t": 5, "kind": "online", "project": "golden", "ru": "r1", "online": True},
    {"t": 10, "kind": "message", "project": "golden", "tu": "g1", "ru": "r1", "from": "ru", "id": "m1", "body": "hi"},
    {"t": 21, "kind": "expect", "what": "task_closed", "type": "unanswered_message", "tu": "g1", "ru": "r1",
     "reason": "answered"},
    {"t": 30, "kind": "crash"},
    {"t": 40, "kind": "message", "project": "golden", "tu": "g1", "ru": "r1", "from": "ru", "id": "m2", "body": "?"},
    {"t": 41, "kind": "expect", "what": "task_created", "type": "unanswered_message", "tu": "g1", "ru": "r1",
     "between": [40, 41]},
    {"t": 100, "kind": "logout", "project": "golden", "tu": "g1", "operator": "op-1"},
    {"t": 110, "kind": "login", "project": "golden", "tu": "g1", "operator": "op-2", "fresh": True},
    {"t": 120, "kind": "message", "project": "golden", "tu": "g1", "ru": "r1", "from": "ru", "id": "m3", "body": "!"},
    {"t": 121, "kind": "expect", "what": "task_created", "type": "unanswered_message", "tu": "g1", "ru": "r1",
     "between": [120, 121]},
]


def run(scenario, tmp_path, **kw):
    rp = Replay(scenario, data_dir=tmp_path / "data", **kw)
    asyncio.run(rp.run())
    return rp, rp.verdict()


@needs_sidecar
def test_lifecycle_crash_and_shift_change(tmp_path):
    s = sc.parse_lines([json.dumps(x) for x in LIFECYCLE], "lifecycle.jsonl")
    rp, violations = run(s, tmp_path)
    text = report.render(rp.rec, rp.results, violations, rp.stats)
    assert [r.ok for r in rp.results] == [True, True, True], text
    assert not violations, text
    assert [(e.machine, e.how, e.clean) for e in rp.stats.exits] == [
        ("m1", "crash", True), ("m1", "stdin-eof", True), ("m2", "stdin-eof", True)], text
    assert report.exit_code(rp.results, violations, rp.stats) == 0
    events = [x["event"] for x in rp.rec.sorted_lines()]
    assert {"crash", "login", "logout", "operator.sent", "task.created", "task.closed"} <= set(events)
    assert (tmp_path / "data" / "m1").is_dir() and (tmp_path / "data" / "m2").is_dir()
    assert (tmp_path / "data" / "m1.stderr.log").read_text().count("==== launch") == 2


@needs_sidecar
@pytest.mark.parametrize("name", ["t01_unanswered_overdue_one_task_per_burst", "s01_chain_starts_at_close",
                                  "t02_like_prime"])
def test_seed_scenarios(tmp_path, name, shared_dir):
    path = shared_dir / "scenarios" / "seed" / f"{name}.jsonl"
    rp, violations = run(sc.load(path), tmp_path)
    text = report.render(rp.rec, rp.results, violations, rp.stats)
    assert report.exit_code(rp.results, violations, rp.stats) == 0, text


def test_bad_ready_line_fails_clearly(tmp_path):
    fake = tmp_path / "fake-sidecar"
    fake.write_text("#!/bin/sh\necho 'booting…' >&2\necho not-json\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    s = sc.parse_lines([json.dumps(LIFECYCLE[0])], "x.jsonl")
    with pytest.raises(MachineError) as ei:
        run(s, tmp_path, binary=str(fake))
    assert "bad ready line" in str(ei.value) and "booting" in str(ei.value)
    assert os.path.exists(tmp_path / "data" / "m1.stderr.log")


def test_operator_draws_are_keyed_not_streamed():
    from electron_stub import keyed

    a = [keyed.chance(7, 0.5, f"t-{i}", "answer") for i in range(200)]
    assert a == [keyed.chance(7, 0.5, f"t-{i}", "answer") for i in range(200)]
    assert 60 < sum(a) < 140 and keyed.uniform(7, 15, 15, "x") == 15


def test_ready_but_no_bridge_fails_clearly(tmp_path):
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    fake = tmp_path / "fake-sidecar"
    fake.write_text("#!/bin/sh\necho 'bridge failed to bind' >&2\n"
                    f"echo '{{\"event\":\"ready\",\"port\":{port},\"pid\":1,\"version\":\"x\",\"protocol\":1}}'\n"
                    "sleep 30\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    s = sc.parse_lines([json.dumps(LIFECYCLE[0])], "x.jsonl")
    with pytest.raises(MachineError) as ei:
        run(s, tmp_path, binary=str(fake))
    assert "cannot connect" in str(ei.value) and "bridge failed to bind" in str(ei.value)


WHY = [
    {**LIFECYCLE[0], "name": "why", "duration_s": 600},
    LIFECYCLE[1], LIFECYCLE[2],
    {"t": 0, "kind": "login", "project": "golden", "tu": "g1", "operator": "op-1"},
    {"t": 5, "kind": "online", "project": "golden", "ru": "r1", "online": True},
    {"t": 10, "kind": "message", "project": "golden", "tu": "g1", "ru": "r1", "from": "ru", "id": "m1", "body": "hi"},
    {"t": 30, "kind": "online", "project": "golden", "ru": "r1", "online": False},
    {"t": 201, "kind": "expect", "what": "decision", "tu": "g1", "ru": "r1", "type": "follow_up_message",
     "outcome": "refused:offline", "between": [80, 201]},
    {"t": 400, "kind": "online", "project": "golden", "ru": "r1", "online": True},
    {"t": 430, "kind": "expect", "what": "decision", "tu": "g1", "ru": "r1", "type": "follow_up_message",
     "outcome": "created", "between": [400, 430]},
    {"t": 500, "kind": "logout", "project": "golden", "tu": "g1", "operator": "op-1"},
    {"t": 510, "kind": "login", "project": "golden", "tu": "g1", "operator": "op-2", "fresh": True},
    # the first machine is retired: its log is read from its data dir, as `sidecar why` does
    {"t": 520, "kind": "expect", "what": "decision", "tu": "g1", "ru": "r1", "type": "unanswered_message",
     "outcome": "created", "between": [10, 11]},
    {"t": 520, "kind": "expect", "what": "decision", "tu": "g1", "ru": "r1", "outcome": "miss", "between": [0, 520]},
]


@needs_sidecar
def test_decision_expectations_read_every_machines_why(tmp_path):
    s = sc.parse_lines([json.dumps(x) for x in WHY], "why.jsonl")
    rp, violations = run(s, tmp_path)
    assert violations == []
    got = [(r.lineno, r.ok) for r in rp.results]
    assert got == [(8, True), (10, True), (13, True), (14, False)], [r.detail for r in rp.results]
    assert "the pair's log" in rp.results[-1].detail  # a failure shows what the log held
    assert rp.frames["why"] >= 3


@needs_sidecar
def test_no_idempotency_key_is_reused_for_a_different_write_over_a_shift_like_replay(tmp_path):
    """Issue 6 item 2: every Stack write of a shift-like run (chains, misses, blocks, a crash, a
    shift change to a fresh machine, Stack faults with retries) — the reference Stack compares
    each repeated key's write with the first and refuses a different one (422, ``key_conflict``)."""
    from electron_stub.generate import generate
    s = sc.parse_lines([json.dumps(x) for x in generate("demo")], "demo.jsonl")
    rp, violations = run(s, tmp_path)
    text = report.render(rp.rec, rp.results, violations, rp.stats)
    assert rp.stack.counters["key_conflicts"] == 0 and rp.stack.conflicts == [], rp.stack.conflicts[:3]
    assert rp.stack.counters["acked"] > 500 and len(rp.stack.idem_write) == rp.stack.counters["acked"]
    markers = [a for a in rp.stack.acked if a["kind"] == "marker"]
    assert any(a["value"] is None for a in markers) and len({a["key"] for a in markers}) == len(markers)
    assert not violations, text


SLOW_STARTUP = [
    {"kind": "header", "format": 1, "name": "slow_startup", "start": "2026-11-30T08:00:00Z", "seed": 3,
     "duration_s": 163, "operator": {"chat_answer_p": 1.0, "chat_delay_s": [10, 10], "mail_answer_p": 0.0,
                                     "mail_delay_s": [60, 60]}},
    {"kind": "tu", "project": "golden", "tu": "g-tu-1", "operator": "op-1"},
    {"kind": "favorite", "project": "golden", "tu": "g-tu-1", "ru": "g-ru-1", "active": True, "is_white": False,
     "spend_30d_usd": 50.0, "spend_total_usd": 400.0, "paid_actions": 40, "paid_with_bonuses_only": False,
     "chat_limit": None, "mail_limit": None, "markers": {}},
    {"kind": "mail_log", "project": "golden", "tu": "g-tu-1", "ru": "g-ru-1", "from": "tu", "at": -7200, "id": "ml-0"},
    {"t": 0, "kind": "login", "project": "golden", "tu": "g-tu-1", "operator": "op-1"},
    {"t": 5, "kind": "online", "project": "golden", "ru": "g-ru-1", "online": True},
    {"t": 100, "kind": "mail_read", "project": "golden", "tu": "g-tu-1", "ru": "g-ru-1", "mail_id": "ml-0",
     "event_key": "rd-1"},
    {"t": 162, "kind": "expect", "what": "task_created", "tu": "g-tu-1", "type": "follow_up_mail", "ru": "g-ru-1",
     "between": [100, 161], "source": "mail_read"},
]


@needs_sidecar
def test_a_slow_machine_does_not_change_a_virtual_clock_replay(tmp_path, monkeypatch):
    """A loaded machine answers the reference Stack's startup read late — here 3.5 real seconds,
    past the sidecar's production wait (``stack_startup_timeout_s``, 3 s).  The replay's outcome
    must not depend on that: the favorite comes from Stack's startup data (a fresh machine has no
    local state), and losing it lost the follow-up mail — the shift's crash-equivalence test failed
    this way at load 15–20.  The harness gives its sidecars a wait no answer of its own reaches
    (``machine.HARNESS_WAIT_S``); a scenario's ``stack latency`` stays ≤ 2 s."""
    import time

    from electron_stub import stack_server
    real = stack_server.StackServer.startup

    def slow(self, tu):
        time.sleep(3.5)  # a server thread of the harness: the replay's loop runs on meanwhile
        return real(self, tu)
    monkeypatch.setattr(stack_server.StackServer, "startup", slow)
    monkeypatch.delenv("SIDECAR_STACK_STARTUP_TIMEOUT_S", raising=False)
    s = sc.parse_lines([json.dumps(x) for x in SLOW_STARTUP], "slow_startup.jsonl")
    rp, violations = run(s, tmp_path)
    text = report.render(rp.rec, rp.results, violations, rp.stats)
    assert [r.ok for r in rp.results] == [True], text
    assert report.exit_code(rp.results, violations, rp.stats) == 0, text


async def test_the_harness_waits_its_own_wait_for_the_bridge_handshake(tmp_path, monkeypatch):
    """The harness's connection to its sidecar is one more wait on a machine it does not control:
    at load 16–18 an opening handshake took longer than websockets' 10 s and a test failed.  The
    harness waits :data:`machine.HARNESS_WAIT_S` for the handshake and the ``auth`` answer, as for
    the sidecar's waits on it."""
    from bridge import client as bridge_client
    from electron_stub import machine

    seen: dict = {}

    async def connect(port, token, **kwargs):
        seen.update(kwargs, port=port)
        raise OSError("no sidecar here")

    async def no_abort(self):
        return None

    monkeypatch.setattr(bridge_client.BridgeClient, "connect", staticmethod(connect))
    monkeypatch.setattr(machine.Machine, "_abort", no_abort)
    m = machine.Machine("m1", tmp_path / "m1", stack_url="http://127.0.0.1:9", seed=1, binary=None,
                        on_notification=lambda *a: None, on_request=lambda *a: None)
    m.ready = {"port": 1}
    with pytest.raises(machine.MachineError):
        await m._connect("token")
    # (the suite raises the client's default itself, tests/waits.py: compare with production's 10 s)
    assert seen["port"] == 1 and seen["open_timeout"] == machine.HARNESS_WAIT_S > 10.0
