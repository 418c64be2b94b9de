"""The loopback receivers' fault modes and fake Bot API answers (scenarios README
``target_fault``; electron_stub/receivers.py)."""
from __future__ import annotations

import time

import httpx
import pytest

from electron_stub.receivers import Receivers


@pytest.fixture
def rx():
    r = Receivers(seed=11, now_fn=lambda: 1.5)
    r.add_target("tg", "telegram", {"chat_id": "-100"})
    r.add_target("hook", "webhook")
    r.start()
    yield r
    r.stop()


def send(rx: Receivers, method: str = "sendMessage", token: str | None = None, **body) -> httpx.Response:
    token = token or rx.bot_token("tg")
    return httpx.post(f"{rx.url}/bot{token}/{method}", json=body or {"chat_id": "-100", "text": "hi"})


def test_bot_api_answers_like_telegram(rx):
    r = send(rx)
    assert r.status_code == 200 and r.json()["ok"] is True
    assert rx.records("telegram.received") == [{"at": 1.5, "event": "telegram.received", "target": "tg",
                                                "chat_id": "-100", "text": "hi"}]
    assert send(rx, "getMe").json()["result"]["is_bot"] is True
    bad = send(rx, token="1:nope")
    assert (bad.status_code, bad.json()["error_code"]) == (401, 401)
    wrong = send(rx, chat_id="-5", text="x")
    assert wrong.status_code == 400 and "chat not found" in wrong.json()["description"]


def test_fault_modes(rx):
    rx.set_fault("tg", "terminal")
    assert send(rx).status_code == 400
    rx.set_fault("tg", "up")
    rx.set_fault("tg", "probe_fail")
    assert send(rx).status_code == 200 and send(rx, "getMe").status_code == 500
    rx.set_fault("tg", "up")
    rx.set_fault("tg", "rate_limit", 7)
    r = send(rx)
    assert r.status_code == 429 and r.json()["parameters"]["retry_after"] == 7
    rx.set_fault("tg", "up")
    rx.set_fault("tg", "error_rate", 0.5)
    codes = [send(rx).status_code for _ in range(40)]
    assert 5 < codes.count(500) < 35 and set(codes) == {200, 500}
    rx.set_fault("tg", "up")
    rx.set_fault("tg", "latency", 0.3)
    t = time.monotonic()
    assert send(rx).status_code == 200 and time.monotonic() - t >= 0.3
    rx.set_fault("tg", "up")
    rx.set_fault("tg", "down")
    with pytest.raises(httpx.TransportError):
        send(rx)
    rx.set_fault("tg", "up")
    assert send(rx).status_code == 200
    with pytest.raises(ValueError):
        rx.set_fault("tg", "sideways")
    with pytest.raises(KeyError):
        rx.set_fault("nobody", "down")


def test_an_answer_fault_replaces_the_one_before(rx):
    """k06: ``down`` at 0 then ``terminal`` at 600 means 400s from 600 on (not still down);
    latency adds to whatever answers."""
    rx.set_fault("tg", "down")
    rx.set_fault("tg", "terminal")
    assert send(rx).status_code == 400
    rx.set_fault("tg", "error_rate", 1.0)
    assert send(rx).status_code == 500
    rx.set_fault("tg", "latency", 0.1)
    assert send(rx).status_code == 500  # still the error rate, now late
    rx.set_fault("tg", "down")
    with pytest.raises(httpx.TransportError):
        send(rx)


def test_error_rate_draws_are_keyed_by_seed_target_and_request_number():
    def run() -> list[int]:
        r = Receivers(seed=4)
        r.add_target("tg", "telegram", {"chat_id": "-1"})
        r.start()
        try:
            r.set_fault("tg", "error_rate", 0.5)
            return [send(r, chat_id="-1", text="x").status_code for _ in range(20)]
        finally:
            r.stop()

    assert run() == run()


def test_secrets_are_per_target_and_never_in_a_scenario(rx):
    cfg = rx.target_config("hook")
    assert cfg["url"].endswith("/hooks/hook") and cfg["secret"].startswith("whsec_")
    assert rx.secret("hook") != Receivers(seed=12).secret("hook")
    tg = rx.target_config("tg")
    assert tg == {"channel": "telegram", "base_url": rx.url, "bot_token": rx.bot_token("tg"), "chat_id": "-100"}
    with pytest.raises(ValueError):
        rx.add_target("j", "journal")


def test_a_scenario_tunes_the_senders_timeout_but_never_where_it_sends():
    r = Receivers(seed=3)
    r.add_target("slow", "webhook", {"timeout_s": 1, "url": "http://elsewhere", "secret": "whsec_x"})
    r.add_target("bot", "telegram", {"chat_id": "-5", "timeout_s": 2.5})
    r.start()
    try:
        hook, bot = r.target_config("slow"), r.target_config("bot")
        assert hook["timeout_s"] == 1 and hook["url"].startswith(r.url) and hook["secret"] == r.secret("slow")
        assert bot["timeout_s"] == 2.5 and bot["chat_id"] == "-5"
        r.add_target("plain", "webhook")
        assert "timeout_s" not in r.target_config("plain")
    finally:
        r.stop()
