"""Bad input against a real sidecar process: each gets a clear error and the process (and, where
it is an ordinary frame, the connection) keeps serving."""
from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import pytest
import websockets
from websockets.asyncio.client import connect

from bridge.client import BridgeClient
from bridge.errors import RemoteError
from tests.integration.sidecar_proc import ROOT, SidecarProcess
from tests.waits import HANDSHAKE_S

T0 = 1796025600.0


async def _client(sc: SidecarProcess) -> BridgeClient:
    async def answer(method, params):
        return {"dialogs": [], "mails": [], "online": []}
    return await BridgeClient.connect(sc.port, sc.token, on_request=answer)


async def test_malformed_frames_get_jsonrpc_errors_and_the_connection_lives(tmp_path):
    async with SidecarProcess(tmp_path) as sc:
        async with connect(f"ws://127.0.0.1:{sc.port}/", open_timeout=HANDSHAKE_S) as ws:
            await ws.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "auth",
                                      "params": {"token": sc.token}}))
            assert json.loads(await ws.recv())["result"]["ok"] is True
            cases = [
                ("{not json", -32700),
                (json.dumps([1, 2]), -32600),
                (json.dumps({"jsonrpc": "2.0", "id": 2, "method": "no.such.method", "params": {}}), -32601),
                (json.dumps({"jsonrpc": "2.0", "id": 3, "method": "platform.event",
                             "params": {"project": "golden"}}), -32602),
                (json.dumps({"jsonrpc": "2.0", "id": 4, "method": "session.login",
                             "params": {"tu": "x", "project": "golden"}}), -32602),  # clock not set
                (json.dumps({"jsonrpc": "2.0", "id": 5, "method": "clock.advance_to",
                             "params": {"t": "soon"}}), -32602),
            ]
            for frame, code in cases:
                await ws.send(frame)
                reply = json.loads(await ws.recv())
                assert reply["error"]["code"] == code, (frame, reply)
                assert reply["error"]["message"]
            await ws.send(json.dumps({"jsonrpc": "2.0", "id": 9, "method": "status", "params": {}}))
            assert json.loads(await ws.recv())["result"]["protocol"] == 1


async def test_domain_errors_are_invalid_params_and_change_nothing(tmp_path):
    async with SidecarProcess(tmp_path) as sc:
        c = await _client(sc)
        await c.call("clock.advance_to", {"t": T0})
        with pytest.raises(RemoteError) as e:
            await c.call("platform.event", {"project": "golden", "tu": "nobody", "name": "receivePrivateMessage", "data": {}})
        assert e.value.code == -32602 and "not logged in" in e.value.message
        await c.call("session.login", {"tu": "g-1", "project": "golden"})
        for params, words in [
            # the whole name, quotes balanced (it once read "unknown socket event 'noSuchEvent")
            ({"project": "golden", "tu": "g-1", "name": "noSuchEvent", "data": {}},
             "golden: unknown socket event 'noSuchEvent'"),
            ({"project": "golden", "tu": "g-1", "name": "receivePrivateMessage", "data": {"messageId": 1}}, "receivePrivateMessage"),
            ({"project": "prime", "tu": "g-1", "name": "MessageSent", "data": {}}, "golden profile"),
        ]:
            with pytest.raises(RemoteError) as e:
                await c.call("platform.event", params)
            assert e.value.code == -32602 and words in e.value.message
        with pytest.raises(RemoteError) as e:
            await c.call("session.login", {"tu": "x", "project": "myspace"})
        assert e.value.code == -32602 and "'myspace'" in e.value.message and "project" in e.value.message
        status = await c.call("status", {})
        assert status["open_tasks"] == 0 and status["events_in"] == 0
        await c.close()
        assert await sc.stop() == 0


async def test_wrong_token_and_browser_origin_are_refused_process_keeps_running(tmp_path):
    async with SidecarProcess(tmp_path) as sc:
        with pytest.raises(RemoteError):
            await BridgeClient.connect(sc.port, "wrong-token")
        with pytest.raises(websockets.exceptions.InvalidStatus) as e:
            await BridgeClient.connect(sc.port, sc.token, origin="https://evil.example")
        assert e.value.response.status_code == 403
        c = await _client(sc)  # still serving
        assert (await c.call("status", {}))["protocol"] == 1
        await c.close()


async def test_second_instance_on_the_same_data_dir_refuses(tmp_path):
    async with SidecarProcess(tmp_path):
        r = await asyncio.to_thread(subprocess.run, [sys.executable, "-m", "sidecar", "serve", "--data-dir", str(tmp_path)],
                                    env={"SIDECAR_TOKEN": "t", "PATH": "/usr/bin:/bin"}, cwd=ROOT,
                                    capture_output=True, text=True, timeout=30)
        assert r.returncode == 3 and "another sidecar" in r.stderr and r.stdout == ""


def test_missing_token_is_a_configuration_error(tmp_path):
    r = subprocess.run([sys.executable, "-m", "sidecar", "serve", "--data-dir", str(tmp_path)],
                       env={"PATH": "/usr/bin:/bin"}, cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "no token" in r.stderr


def test_invalid_scenario_line_is_named_and_exit_is_nonzero(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"kind":"header","format":1,"name":"x","start":"2026-11-30T08:00:00Z","seed":1,"duration_s":10,'
                   '"operator":{"chat_answer_p":0,"chat_delay_s":[1,1],"mail_answer_p":0,"mail_delay_s":[1,1]}}\n'
                   '{"t":1,"kind":"teleport","project":"golden"}\n')
    r = subprocess.run([sys.executable, "-m", "electron_stub", "replay", str(bad)], cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert f"{bad}:2" in r.stderr and "teleport" in r.stderr


def test_corrupted_database_is_a_clear_error_not_a_traceback(tmp_path):
    (tmp_path / "sidecar.db").write_bytes(b"SQLite format 3\x00" + b"\xde\xad\xbe\xef" * 4096)
    r = subprocess.run([sys.executable, "-m", "sidecar", "serve", "--data-dir", str(tmp_path)],
                       env={"SIDECAR_TOKEN": "t", "PATH": "/usr/bin:/bin"}, cwd=ROOT,
                       capture_output=True, text=True, timeout=30)
    # a file that is not a database at all is damaged like one with a bad page: exit 7 (README
    # exit codes), one line that names the file and the way out
    assert r.returncode == 7, r.stderr
    assert "sidecar.db" in r.stderr and "sidecar repair" in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and r.stdout == ""


def test_a_directory_where_the_database_goes_is_one_clear_line(tmp_path):
    (tmp_path / "sidecar.db").mkdir()
    r = subprocess.run([sys.executable, "-m", "sidecar", "serve", "--data-dir", str(tmp_path)],
                       env={"SIDECAR_TOKEN": "t", "PATH": "/usr/bin:/bin"}, cwd=ROOT,
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 4, r.stderr
    assert r.stderr.strip().splitlines() == [
        f"sidecar: {tmp_path / 'sidecar.db'} is a directory, not a database; move it aside and start again"]


def test_data_dir_that_is_a_file_is_a_configuration_error(tmp_path):
    f = tmp_path / "not-a-dir"
    f.write_text("x")
    r = subprocess.run([sys.executable, "-m", "sidecar", "serve", "--data-dir", str(f)],
                       env={"SIDECAR_TOKEN": "t", "PATH": "/usr/bin:/bin"}, cwd=ROOT,
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2, r.stderr
    assert "not-a-dir" in r.stderr and "Traceback" not in r.stderr


async def test_client_gone_mid_advance_stops_the_advance_and_sigterm_works(tmp_path):
    """Found by the breaker: a month-long advance whose client vanished spun through every
    timer without yielding, ignoring SIGTERM."""
    from bridge.client import BridgeClient as _BC

    async with SidecarProcess(tmp_path) as sc:
        c = await _BC.connect(sc.port, sc.token, on_request=lambda m, p: asyncio.sleep(0, {"online": []}))
        await c.call("clock.advance_to", {"t": T0})
        await c.call("session.login", {"tu": "g-1", "project": "golden"})
        await c.notify("clock.advance_to", {"t": T0 + 30 * 86400})
        await asyncio.sleep(0.3)
        await c.close()
        await asyncio.sleep(0.2)
        assert await sc.stop("SIGTERM") == 0  # within 2 s (SidecarProcess fails it otherwise)


async def test_sigterm_with_a_frozen_client_exits_promptly(tmp_path):
    """Found by the breaker: a client that stopped (SIGSTOP) held shutdown for websockets'
    10 s closing handshake."""
    async with SidecarProcess(tmp_path) as sc:
        ws = await connect(f"ws://127.0.0.1:{sc.port}/", open_timeout=HANDSHAKE_S, max_queue=1)
        await ws.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "auth", "params": {"token": sc.token}}))
        await ws.recv()
        ws.transport.pause_reading()  # frozen: never reads the close frame
        assert await sc.stop("SIGTERM") == 0  # within 2 s (SidecarProcess fails it otherwise)
        ws.transport.abort()


async def test_minor_inputs_the_breaker_found(tmp_path):
    async with SidecarProcess(tmp_path) as sc:
        c = await _client(sc)
        await c.call("clock.advance_to", {"t": T0})
        for method, params in [("session.login", {"tu": "", "project": "golden"}),
                               ("task.close", {"task_id": "t-1", "reason": "expired"})]:
            with pytest.raises(RemoteError) as e:
                await c.call(method, params)
            assert e.value.code == -32602
        await c.call("session.login", {"tu": "g-1", "project": "golden"})
        with pytest.raises(RemoteError) as e:
            await c.call("session.login", {"tu": "g-1", "project": "prime"})
        assert e.value.code == -32602 and "golden" in e.value.message
        # the TU's own message on the incoming channel is not an RU message
        await c.call("platform.event", {"project": "golden", "tu": "g-1", "name": "receivePrivateMessage",
                                        "data": {"messageId": "m", "senderId": "g-1", "recipientId": "r-1",
                                                 "sentAt": T0, "text": "hi"}})
        assert (await c.call("status", {}))["open_tasks"] == 0
        await c.close()


async def test_far_future_advance_is_cut_off_and_other_frames_are_served(tmp_path):
    """Found by the breaker: ``clock.advance_to`` a year ahead ran every 15-second RU Online pass
    of the year in one go, and every other frame waited behind it.  One advance runs at most
    MAX_FIRES_PER_ADVANCE timers, then answers -32602 with how far it got."""
    from sidecar.app.root import MAX_FIRES_PER_ADVANCE

    async with SidecarProcess(tmp_path) as sc:
        c = await _client(sc)
        await c.call("clock.advance_to", {"t": T0})
        await c.call("session.login", {"tu": "g-1", "project": "golden"})
        with pytest.raises(RemoteError) as e:
            await c.call("clock.advance_to", {"t": T0 + 365 * 86400})
        assert e.value.code == -32602 and "smaller steps" in e.value.message
        reached = e.value.data["now"]
        assert T0 < reached < T0 + 365 * 86400
        assert reached - T0 >= MAX_FIRES_PER_ADVANCE * 15 / 4  # it did run timers, in order
        status = await c.call("status", {})
        assert status["now"] == reached and "g-1" in status["tus"]
        await c.call("clock.advance_to", {"t": reached + 60})  # the client continues in steps
        await c.close()


async def test_the_fuzzers_finds_are_invalid_params_naming_the_field_and_the_connection_lives(tmp_path):
    """Issue 18 item 4: a list or object ``priority`` (``events.emit``), ``priority_min: []``
    (``rules.create``) answered -32603; a 5,000-digit ``stream.ack`` seq closed the connection
    with 1011.  Each is a -32602 naming the field, and the same connection serves on."""
    huge = "9" * 5000
    frames = [
        ('{"jsonrpc":"2.0","id":1,"method":"events.emit","params":{"source":"ui","subject":"s",'
         '"action":"a","priority":["high"]}}', "priority"),
        ('{"jsonrpc":"2.0","id":2,"method":"events.emit","params":{"source":"ui","subject":"s",'
         '"action":"a","priority":{"level":"high"}}}', "priority"),
        ('{"jsonrpc":"2.0","id":3,"method":"rules.create","params":{"name":"r",'
         '"conditions":{"priority_min":[]},"actions":[{"target":"audit"}]}}', "conditions.priority_min"),
        ('{"jsonrpc":"2.0","id":4,"method":"stream.ack","params":{"seq":%s}}' % huge, "seq"),
        ('{"jsonrpc":"2.0","id":5,"method":"stream.ack","params":{"seq":-1}}', "seq"),
    ]
    async with SidecarProcess(tmp_path) as sc:
        async with connect(f"ws://127.0.0.1:{sc.port}/", open_timeout=HANDSHAKE_S, max_size=None) as ws:
            await ws.send(json.dumps({"jsonrpc": "2.0", "id": 0, "method": "auth",
                                      "params": {"token": sc.token}}))
            assert json.loads(await ws.recv())["result"]["ok"] is True
            await ws.send(json.dumps({"jsonrpc": "2.0", "id": 0, "method": "clock.advance_to",
                                      "params": {"t": T0}}))
            assert "result" in json.loads(await ws.recv())
            for frame, field in frames:
                await ws.send(frame)
                reply = json.loads(await ws.recv())
                assert reply["error"]["code"] == -32602, (frame[:80], reply)
                assert reply["error"]["data"]["field"] == field, reply
            # the same as a notification: nothing to answer, and the reader lives on
            await ws.send('{"jsonrpc":"2.0","method":"stream.ack","params":{"seq":%s}}' % huge)
            await ws.send(json.dumps({"jsonrpc": "2.0", "id": 9, "method": "status", "params": {}}))
            assert json.loads(await ws.recv())["result"]["protocol"] == 1
            assert ws.close_code is None
        assert await sc.stop() == 0
