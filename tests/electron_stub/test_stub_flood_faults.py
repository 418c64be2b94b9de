"""The harness plays issue 21's receiver faults and reads their outcome (scenarios README
"Additions (format 1, revision 2)"): ``rate_limit`` answers 429 with the channel's retry-after
(Telegram's ``parameters.retry_after``, a webhook's ``Retry-After``), ``hang`` holds the
connection until ``up``, the ``received`` expectation counts distinct ``webhook-id`` s, and
``delivery`` trace lines carry the machine and an expiry's reason."""
from __future__ import annotations

import threading
import time

import httpx
import msgspec
import pytest

from electron_stub import scenario as sc
from electron_stub.receivers import Receivers
from electron_stub.routing_world import evaluate_received
from electron_stub.trace import Recorder

START = 1_000.0


@pytest.fixture
def rx():
    r = Receivers(seed=11, now_fn=lambda: 1.5)
    r.add_target("tg", "telegram", {"chat_id": "-100"})
    r.add_target("hook", "webhook")
    r.start()
    yield r
    r.stop()


def test_rate_limit_gives_each_channel_its_retry_after(rx):
    rx.set_fault("hook", "rate_limit", 7.5)
    r = httpx.post(f"{rx.url}/hooks/hook", content=b"{}")
    assert (r.status_code, r.headers["Retry-After"]) == (429, "8")  # delay-seconds: an integer
    rx.set_fault("tg", "rate_limit", 30)
    r = httpx.post(f"{rx.url}/bot{rx.bot_token('tg')}/sendMessage", json={"chat_id": "-100", "text": "x"})
    assert r.status_code == 429 and r.json()["parameters"] == {"retry_after": 30}
    assert r.json()["error_code"] == 429


def test_rate_limit_of_zero_seconds_is_a_fault_too(rx):
    """``value`` 0 is a retry-after of 0 s (the sidecar's floor of 1 s then paces it), not
    "no fault": the harness read a falsy value as none and the receiver answered 200."""
    rx.set_fault("hook", "rate_limit", 0)
    r = httpx.post(f"{rx.url}/hooks/hook", content=b"{}")
    assert (r.status_code, r.headers["Retry-After"]) == (429, "0")
    rx.set_fault("tg", "rate_limit", 0)
    r = httpx.post(f"{rx.url}/bot{rx.bot_token('tg')}/sendMessage", json={"chat_id": "-100", "text": "x"})
    assert r.status_code == 429 and r.json()["parameters"] == {"retry_after": 0}
    rx.set_fault("hook", "up")
    assert httpx.post(f"{rx.url}/hooks/hook", content=b"{}").status_code != 429


def test_hang_holds_the_connection_until_up(rx):
    rx.set_fault("hook", "hang")
    out: list[BaseException | httpx.Response] = []

    def call() -> None:
        try:
            out.append(httpx.post(f"{rx.url}/hooks/hook", content=b"{}", timeout=30))
        except httpx.HTTPError as exc:
            out.append(exc)

    th = threading.Thread(target=call)
    th.start()
    deadline = time.monotonic() + 20
    while rx.hanging.get("hook", 0) == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert rx.hanging["hook"] == 1 and out == []  # accepted, not answered
    rx.set_fault("hook", "up")
    th.join(20)
    assert len(out) == 1 and isinstance(out[0], httpx.TransportError)  # dropped, never answered
    assert rx.hanging["hook"] == 0


def test_the_parser_accepts_the_revision_2_faults_and_received():
    lines = [
        {"kind": "header", "format": 1, "name": "x", "start": "2026-11-30T08:00:00Z", "seed": 1, "duration_s": 10},
        {"kind": "target", "name": "crm-hook", "channel": "webhook", "config": {}},
        {"t": 0, "kind": "target_fault", "target": "crm-hook", "mode": "rate_limit", "value": 60},
        {"t": 0, "kind": "target_fault", "target": "crm-hook", "mode": "hang"},
        {"t": 5, "kind": "expect", "what": "received", "target": "crm-hook", "between": [0, 5], "min": 1, "max": 1},
    ]
    s = sc.parse_lines([msgspec.json.encode(x).decode() for x in lines])
    assert [getattr(line, "mode", None) for line in s.timeline][:2] == ["rate_limit", "hang"]
    with pytest.raises(sc.ScenarioError, match="received needs"):
        sc.parse_lines([msgspec.json.encode(x).decode() for x in lines[:4] + [
            {"t": 5, "kind": "expect", "what": "received", "target": "crm-hook", "between": [0, 5]}]])


def test_received_counts_distinct_webhook_ids_of_events_in_the_window():
    e = sc.Expect(what="received", target="crm-hook", between=(0.0, 100.0), min=2, max=2, lineno=9)
    rows = [{"id": "a", "target": "crm-hook", "event_at": START + 10},   # m1
            {"id": "b", "target": "crm-hook", "event_at": START + 50},   # m2, after a shift change
            {"id": "c", "target": "crm-hook", "event_at": START + 150},  # outside the window
            {"id": "d", "target": "other", "event_at": START + 10}]
    rec = [{"target": "crm-hook", "webhook_id": i, "verified": True} for i in ("a", "a", "b", "c", "ping-x")]
    rec.append({"target": "crm-hook", "webhook_id": "a", "verified": False})
    res = evaluate_received(e, rec, rows, START)
    assert res.ok and "2 distinct (+1 repeated)" in res.detail
    assert not evaluate_received(e, rec[:1], rows, START).ok


def test_delivery_lines_carry_the_machine_and_an_expiry_reason():
    r = Recorder(START)
    r.delivery({"at": START + 5, "delivery_id": "x", "target": "t", "status": "failed", "attempt": 0,
                "error": "expired: ttl passed at 1004.000, not sent"}, START + 5, machine="m2")
    line = r.lines[-1]
    assert (line["machine"], line["status"], line["reason"]) == ("m2", "failed", "expired")
