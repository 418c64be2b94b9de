"""Channels against the loopback receivers and the reference Stack: telegram (sendMessage,
retry_after, bad chat / token), journal (file + table), stack (single and POST /v1/batch with
per-write results), and the config (env + router.toml, secrets never from the file, never in
rows or logs) — DESIGN §9, §10."""
from __future__ import annotations

import json
import logging

import httpx
import pytest

from electron_stub.receivers import Receivers
from electron_stub.stack_server import StackServer
from sidecar.router.flood import FLOOD_CRITICAL_LEAD_S
from sidecar.router.io.channels import JournalChannel, TelegramChannel
from sidecar.router.config import ConfigError, Target, load_config
from sidecar.router.model import RoutingEvent, StackWrite
from sidecar.router.io.pump import DeliveryPump
from sidecar.router.io.stack_channel import StackChannel
from sidecar.stack.client import StackClient

from routerhelp import T0, emit, make_state


@pytest.fixture
def receivers():
    r = Receivers(seed=3, now_fn=lambda: 7.0)
    r.add_target("ops-telegram", "telegram", {"chat_id": "-100200300"})
    r.start()
    yield r
    r.stop()


async def test_telegram_through_the_pump(receivers, rstore, caplog):
    caplog.set_level(logging.DEBUG)
    cfg = receivers.target_config("ops-telegram")
    tg = TelegramChannel("ops-telegram", Target(**cfg))
    st = make_state({"name": "r", "actions": [{"target": "ops-telegram", "template": "host={{ payload.host }} !"}]})
    pump = DeliveryPump(rstore, {"ops-telegram": tg})
    try:
        await emit(rstore, st, [RoutingEvent(source="electron", subject="a", action="b", payload={"n": 1})], T0)
        await pump.run_due(T0)
        assert [r["text"] for r in receivers.records("telegram.received")] == ["host= !"]
        receivers.set_fault("ops-telegram", "rate_limit", 45)
        await emit(rstore, st, [RoutingEvent(source="electron", subject="a", action="b", payload={"host": "x"})], T0 + 1)
        res = await pump.run_due(T0 + 1)
        # flood control: retry_after 45 s honoured, then the row is next (a critical would be first)
        assert res.next_due == pytest.approx(T0 + 46 + FLOOD_CRITICAL_LEAD_S)
        pending = [r for r in await rstore.deliveries(target="ops-telegram") if r.status == "pending"]
        assert [r.attempts for r in pending] == [0]  # a 429 is not an attempt
        receivers.set_fault("ops-telegram", "up")
        await pump.run_due(res.next_due)
        assert [r["text"] for r in receivers.records("telegram.received")] == ["host= !", "host=x !"]
        assert (await tg.probe(0)).ok
    finally:
        await pump.close()
    # a wrong chat and a wrong token are terminal; the token never shows
    bad_chat = TelegramChannel("ops-telegram", Target(**{**cfg, "chat_id": "-1"}))
    bad_tok = TelegramChannel("ops-telegram", Target(**{**cfg, "bot_token": "123:nope"}))
    row = (await rstore.deliveries())[0]
    try:
        assert (await bad_chat.send(row, 0)).kind == "terminal"
        out = await bad_tok.send(row, 0)
        assert out.kind == "terminal" and "bad target" in (out.error or "")
    finally:
        await bad_chat.close()
        await bad_tok.close()
    # secrets never reach rows or logs — even when the Bot API is unreachable (URL holds the token)
    receivers.stop()
    down = TelegramChannel("ops-telegram", Target(**cfg))
    out = await down.send(row, 0)
    await down.close()
    token = cfg["bot_token"]
    assert out.kind == "retryable" and token not in (out.error or "")
    rows = await rstore.deliveries()
    assert all(token not in repr(r) for r in rows)
    assert token not in caplog.text
    assert token not in repr(Target(**cfg)) and token not in repr(load_config(None, targets={"t": cfg}))


async def test_journal_file_and_table(tmp_path, rstore):
    jc = JournalChannel("audit", Target(channel="journal", max_bytes=2048, backups=2), tmp_path)
    st = make_state({"name": "r", "actions": [{"target": "audit"}]})
    pump = DeliveryPump(rstore, {"audit": jc})
    events = [RoutingEvent(source="electron", subject="s", action="a", payload={"i": i, "pad": "x" * 200})
              for i in range(20)]
    await emit(rstore, st, events, T0)
    while (res := await pump.run_due(T0)).settled:
        pass
    await pump.close()
    rows = await rstore.journal("audit")
    assert [r["body"]["data"]["payload"]["i"] for r in rows] == list(range(20))
    files = sorted(p.name for p in (tmp_path / "journal").iterdir())
    assert files == ["audit.jsonl", "audit.jsonl.1", "audit.jsonl.2"]  # rotated, two backups kept
    last = [json.loads(x) for x in (tmp_path / "journal" / "audit.jsonl").read_text().splitlines()]
    assert last[-1]["delivery_id"] == "ev-20.0" and last[-1]["type"] == "electron.s.a"
    assert all(d.status == "delivered" for d in await rstore.deliveries())


def marker(i: int, ru: str, value: object) -> RoutingEvent:
    return RoutingEvent(source="markers", subject="followUpChat", action="set", priority="high", payload={},
                 write=StackWrite(pair=f"g/{ru}", idem_key=f"followUpChat:g:{ru}:src:{i}:set", method="PUT",
                                  path=f"/v1/tus/g/favorites/{ru}/markers/followUpChat",
                                  body=json.dumps({"value": value}).encode()))


@pytest.fixture
def stack_server():
    s = StackServer(seed=1)
    s.start()
    yield s
    s.stop()


async def test_stack_batch_against_the_reference_stack(stack_server, rstore):
    client = StackClient(stack_server.url)
    ch = StackChannel(client)
    ch.note_startup(await client.startup("g"))
    assert ch.batch
    st = make_state()
    pump = DeliveryPump(rstore, {}, stack=ch)
    events = [marker(i, f"r{i % 40}", {"step": i}) for i in range(600)]
    await emit(rstore, st, events, T0)
    res = await pump.run_due(T0)
    assert res.stack_requests == 2 and ch.requests_batch == 2 and ch.requests_single == 0
    assert stack_server.counters["batches"] == 2 and stack_server.counters["batched_writes"] == 600
    assert all(d.status == "delivered" for d in await rstore.deliveries())
    assert stack_server.marker("g", "r0", "followUpChat") == {"step": 560}  # the pair's last write won

    # one bad write fails only itself and the later writes of its pair (held, not attempts)
    bad = RoutingEvent(source="markers", subject="followUpChat", action="set", priority="high", payload={},
                write=StackWrite(pair="g/r1", idem_key="bad", method="PUT",
                                 path="/v1/tus/g/favorites/r1/markers/followUpChat", body=b'{"nothing":1}'))
    await emit(rstore, st, [bad, marker(1000, "r1", {"step": 1000}), marker(1001, "r2", {"step": 1001})], T0 + 10)
    await pump.run_due(T0 + 10)
    rows = {d.idem_key: d for d in await rstore.deliveries(since=T0 + 10)}
    # a terminal Stack answer fails that write with Stack's status and body (DESIGN §10 as
    # revised); its pair's later write was held in this batch and goes with the next pass
    assert (rows["bad"].status, rows["bad"].attempts, rows["bad"].next_attempt_at) == ("failed", 1, None)
    assert rows["bad"].last_error == 'terminal: HTTP 400: {"error":"body needs value (null clears)"}'
    later = rows["followUpChat:g:r1:src:1000:set"]
    assert (later.status, later.attempts) == ("pending", 0) and later.last_error.startswith("held")
    assert rows["followUpChat:g:r2:src:1001:set"].status == "delivered"
    await pump.run_due(later.next_attempt_at)
    assert {d.idem_key: d for d in await rstore.deliveries(since=T0 + 10)}[later.idem_key].status == "delivered"
    await client.close()


async def test_stack_single_writes_without_batch_capability(rstore):
    server = StackServer(seed=1, batch=False)
    server.start()
    client = StackClient(server.url)
    try:
        ch = StackChannel(client)
        ch.note_startup(await client.startup("g"))
        assert not ch.batch
        pump = DeliveryPump(rstore, {}, stack=ch, concurrency=4)
        await emit(rstore, make_state(), [marker(i, f"r{i % 3}", {"step": i}) for i in range(9)], T0)
        res = await pump.run_due(T0)
        assert res.stack_requests == 9 and server.counters["batches"] == 0
        assert [d.status for d in await rstore.deliveries()] == ["delivered"] * 9
        assert server.marker("g", "r0", "followUpChat") == {"step": 6}
        assert (await ch.probe(0)).ok
        # and the reference Stack refuses /v1/batch when it does not advertise it
        assert httpx.post(f"{server.url}/v1/batch", json={"writes": []}).status_code == 404
    finally:
        await client.close()
        server.stop()


def test_config_env_and_file_secrets_only_from_env(tmp_path, monkeypatch):
    (tmp_path / "router.toml").write_text(
        'match_mode = "first"\ndedup_window_s = 600\n[targets.crm-hook]\nchannel = "webhook"\n'
        'url = "http://127.0.0.1:9/hook"\n[targets.audit]\nchannel = "journal"\n')
    monkeypatch.setenv("SIDECAR_ROUTER_TARGETS", '{"crm-hook": {"secret": "whsec_c2VjcmV0"}}')
    cfg = load_config(tmp_path)
    assert (cfg.match_mode, cfg.dedup_window_s) == ("first", 600)
    assert cfg.channels() == {"stack": "stack", "crm-hook": "webhook", "audit": "journal"}
    assert cfg.targets["crm-hook"].read_secret() == "whsec_c2VjcmV0"
    assert "c2VjcmV0" not in repr(cfg)
    monkeypatch.delenv("SIDECAR_ROUTER_TARGETS")
    with pytest.raises(ConfigError, match="targets.crm-hook"):
        load_config(tmp_path)  # a webhook without its secret
    (tmp_path / "router.toml").write_text('[targets.crm-hook]\nchannel = "webhook"\nurl = "http://x/"\nsecret = "s"\n')
    with pytest.raises(ConfigError, match="secrets come only from the environment"):
        load_config(tmp_path)
    (tmp_path / "router.toml").write_text('[targets.stack]\nchannel = "journal"\n')
    with pytest.raises(ConfigError, match="reserved"):
        load_config(tmp_path)
    (tmp_path / "router.toml").write_text("match_mode = 'some'\n")
    with pytest.raises(ConfigError, match="match_mode"):
        load_config(tmp_path)
    sf = tmp_path / "secret"
    sf.write_text("whsec_ZmlsZQ==\n")
    (tmp_path / "router.toml").write_text(f'[targets.h]\nchannel = "webhook"\nurl = "http://x/"\nsecret_file = "{sf}"\n')
    assert load_config(tmp_path).targets["h"].read_secret() == "whsec_ZmlsZQ=="
