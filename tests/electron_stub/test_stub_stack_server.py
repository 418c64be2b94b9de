"""The reference Stack over real HTTP: startup shape, idempotency, faults, counters."""
from __future__ import annotations

import json

import httpx
import pytest
from stubhelp import HEADER

from electron_stub import scenario as sc
from electron_stub.stack_server import StackServer

WORLD = [
    {"kind": "favorite", "project": "golden", "tu": "g", "ru": "r1", "active": True, "is_white": False,
     "spend_30d_usd": 650.0, "spend_total_usd": 900.0, "paid_actions": 4, "paid_with_bonuses_only": False,
     "chat_limit": None, "mail_limit": None, "markers": {"followUpChat": {"sourceUnansweredTaskId": "h1", "step": 0,
                                                                          "nextCheckAt": "2026-11-30T07:59:30Z"}}},
    {"kind": "history", "project": "golden", "tu": "g", "ru": "r1", "task": {"task_id": "h1", "type": "unanswered_message",
     "source": "socket", "created_at": -150, "closed_at": -120, "reason": "answered"}},
]


@pytest.fixture
def stack():
    s = sc.parse_lines([HEADER] + [json.dumps(x) for x in WORLD], "x.jsonl")
    st = StackServer(seed=3, now_fn=lambda: s.start + 42)
    st.seed_from_scenario(s)
    url = st.start()
    st.scenario = s
    with httpx.Client(base_url=url, timeout=5) as c:
        st.http = c
        yield st
    st.stop()


def put(st, value, key="k1", ru="r1", name="followUpChat"):
    h = {"Idempotency-Key": key} if key else {}
    return st.http.put(f"/v1/tus/g/favorites/{ru}/markers/{name}", json={"value": value}, headers=h)


def test_startup_shape(stack):
    d = stack.http.get("/v1/tus/g/startup").json()
    assert d["tu"] == "g"
    (f,) = d["favorites"]
    assert set(f) == {"ru", "project", "active", "is_white", "spend_30d_usd", "spend_total_usd", "paid_actions",
                      "paid_with_bonuses_only", "chat_limit", "mail_limit", "blocked_by_tu", "blocked_by_ru", "markers"}
    assert f["markers"]["followUpChat"]["step"] == 0
    (h,) = d["history"]
    t0 = stack.scenario.start
    assert h == {"task_id": "h1", "type": "unanswered_message", "project": "golden", "tu": "g", "ru": "r1",
                 "source": "socket", "created_at": t0 - 150, "deadline": t0 - 30, "closed_at": t0 - 120,
                 "reason": "answered", "vip": "yellow"}
    assert stack.http.get("/v1/tus/nobody/startup").json() == {"tu": "nobody", "favorites": [], "history": [],
                                                                "capabilities": ["batch"]}  # DESIGN §9


def test_favorite_updates_are_served(stack):
    stack.update_favorite("golden", "g", "r1", {"active": False, "blocked_by_ru": True})
    f = stack.http.get("/v1/tus/g/startup").json()["favorites"][0]
    assert f["active"] is False and f["blocked_by_ru"] is True


def test_marker_write_idempotency_and_clear(stack):
    assert put(stack, {"step": 1}, key=None).status_code == 400
    r1 = put(stack, {"step": 1}, key="a")
    assert r1.status_code == 200 and stack.marker("g", "r1", "followUpChat") == {"step": 1}
    r2 = put(stack, {"step": 1}, key="a")  # same write again: first answer, nothing changes
    assert r2.status_code == 200 and r2.json() == r1.json() and stack.marker("g", "r1", "followUpChat") == {"step": 1}
    assert put(stack, None, key="b").status_code == 200 and stack.marker("g", "r1", "followUpChat") is None
    assert stack.counters["acked"] == 2 and stack.counters["duplicates"] == 1
    acks = stack.acked_markers()
    assert [(a["value"], a["at"]) for a in acks] == [({"step": 1}, stack.scenario.start + 42), (None, stack.scenario.start + 42)]


def test_tasks_merge_by_id_and_candidates(stack):
    h = lambda k: {"Idempotency-Key": k}  # noqa: E731
    t = {"task_id": "t1", "type": "like", "project": "golden", "tu": "g", "ru": "r1", "created_at": 1.0}
    assert stack.http.post("/v1/tus/g/tasks", json={"event": "created", "task": t}, headers=h("c")).status_code == 200
    assert stack.http.post("/v1/tus/g/tasks", json={"event": "closed", "task": {"task_id": "t1", "closed_at": 2.0,
                           "reason": "expired"}}, headers=h("d")).status_code == 200
    hist = {x["task_id"]: x for x in stack.http.get("/v1/tus/g/startup").json()["history"]}
    assert hist["t1"]["type"] == "like" and hist["t1"]["reason"] == "expired"
    assert stack.http.post("/v1/tus/g/tasks", json={"event": "opened", "task": t}, headers=h("e")).status_code == 400
    cand = {"ru": "r1", "type": "follow_up_message", "source": "chain", "at": 3.0,
            "outcome": "refused:offline", "task_id": None, "detail": {}}
    assert stack.http.post("/v1/tus/g/candidates", json=cand, headers=h("f")).status_code == 200
    assert stack.candidates["g"] == [cand]
    assert stack.http.post("/v1/tus/g/candidates", json={"ru": "r1"}, headers=h("f2")).status_code == 400
    assert stack.http.post("/v1/tus/g/candidates", json={**cand, "outcome": "maybe"},
                           headers=h("f3")).status_code == 400
    assert stack.http.post("/v1/tus/g/candidates", json={**cand, "at": True}, headers=h("f4")).status_code == 400
    assert stack.http.post("/v1/tus/g/candidates", content=b"not json", headers=h("g")).status_code == 400
    assert stack.http.post("/v1/tus/g/nope", json={}, headers=h("h")).status_code == 404


def test_down_refuses_then_up(stack):
    stack.set_fault("down")
    with pytest.raises(httpx.TransportError):
        stack.http.get("/v1/tus/g/startup")
    with pytest.raises(httpx.TransportError):
        put(stack, {"step": 5}, key="z")
    assert stack.marker("g", "r1", "followUpChat")["step"] == 0 and stack.counters["refused"] == 2
    stack.set_fault("up")
    assert put(stack, {"step": 5}, key="z").status_code == 200


def test_error_rate_is_keyed_per_attempt(stack):
    stack.set_fault("error_rate", 0.5)
    codes = [put(stack, {"step": i}, key=f"k{i}").status_code for i in range(40)]
    assert 5 < codes.count(500) < 35
    # the same (seed, key, attempt) draws the same on another server
    other = StackServer(seed=3)
    other.start()
    other.set_fault("error_rate", 0.5)
    try:
        with httpx.Client(base_url=other.url) as c:
            again = [c.put("/v1/tus/g/favorites/r1/markers/followUpChat", json={"value": {"step": i}},
                           headers={"Idempotency-Key": f"k{i}"}).status_code for i in range(40)]
    finally:
        other.stop()
    assert again == codes
    # retrying a failed key eventually succeeds (a new attempt draws anew)
    failed = codes.index(500)
    for _ in range(30):
        if put(stack, {"step": failed}, key=f"k{failed}").status_code == 200:
            break
    else:
        pytest.fail("a retried write never succeeded")
    assert stack.counters["faulted"] >= codes.count(500)


def test_latency_is_capped(stack):
    import time

    stack.set_fault("latency", 30)
    assert stack.mode["latency"] == 2.0
    stack.set_fault("latency", 0.2)
    t = time.monotonic()
    assert stack.http.get("/v1/tus/g/startup").status_code == 200
    assert time.monotonic() - t >= 0.2
    with pytest.raises(ValueError):
        stack.set_fault("explode")


def test_a_key_reused_for_a_different_write_is_refused_and_recorded(stack):
    assert put(stack, {"step": 1}, key="kx").status_code == 200
    again = put(stack, {"step": 1}, key="kx")  # the same write: the first answer
    assert again.status_code == 200 and stack.counters["duplicates"] == 1
    other = put(stack, {"step": 2}, key="kx")  # the same key, another body: a client bug
    assert other.status_code == 422 and stack.counters["key_conflicts"] == 1
    assert stack.marker("g", "r1", "followUpChat") == {"step": 1}  # nothing changed
    (c,) = stack.conflicts
    assert c["key"] == "kx" and '"step":1' in c["first"] and '"step":2' in c["then"]


def test_a_cleared_marker_is_served_as_null_not_dropped(stack):
    assert put(stack, None, key="clear-1").status_code == 200
    f = stack.http.get("/v1/tus/g/startup").json()["favorites"][0]
    assert "followUpChat" in f["markers"] and f["markers"]["followUpChat"] is None
    assert stack.marker("g", "r1", "followUpChat") is None


def test_blocks_and_limits_do_not_make_a_favorite(stack):
    stack.update_favorite("golden", "g", "nobody", {"blocked_by_ru": True}, listed_only=True)
    assert [f["ru"] for f in stack.http.get("/v1/tus/g/startup").json()["favorites"]] == ["r1"]
    stack.update_favorite("golden", "g", "r1", {"blocked_by_ru": True}, listed_only=True)
    assert stack.http.get("/v1/tus/g/startup").json()["favorites"][0]["blocked_by_ru"] is True


def test_requests_and_writes_are_counted_by_kind(stack):
    """The benchmarks' "Stack requests by kind" (issue 11 item 7): HTTP requests by route, and
    writes by kind whether sent alone or in a batch."""
    stack.http.get("/v1/tus/g/startup")
    stack.http.get("/v1/health")
    assert put(stack, {"step": 1}, key="kind-1").status_code == 200
    body = {"writes": [
        {"key": "kind-2", "method": "PUT", "path": "/v1/tus/g/favorites/r1/markers/followUpMail",
         "body": {"value": {"a": 1}}},
        {"key": "kind-3", "method": "POST", "path": "/v1/tus/g/candidates",
         "body": {"ru": "r1", "type": "like", "source": "socket", "at": 1.0, "outcome": "miss"}}]}
    assert stack.http.post("/v1/batch", json=body).status_code == 200
    stack.http.get("/v1/nothing")
    requests, writes = stack.requests_by_kind()
    assert requests == {"batch": 1, "health": 1, "marker": 1, "startup": 1, "unknown": 1}
    assert writes == {"candidate": 1, "marker": 2}
    assert sum(requests.values()) == stack.counters["requests"]


def test_a_tu_without_stack_favorites_gets_startup_data_without_the_key():
    """README revision 2 ``stack_favorites: false``: Stack has no list for that TU (the key is
    absent, DESIGN §9/§12.5, unlike ``[]``); its favorite lines are the platform world's only."""
    lines = [{"kind": "tu", "project": "golden", "tu": "n", "stack_favorites": False},
             {**WORLD[0], "tu": "n"}, *WORLD,
             {"t": 1, "kind": "favorite", "project": "golden", "tu": "n", "ru": "r2", "active": True}]
    s = sc.parse_lines([HEADER] + [json.dumps(x) for x in lines], "x.jsonl")
    st = StackServer(seed=3)
    st.seed_from_scenario(s)
    st.update_favorite("golden", "n", "r2", s.timeline[0].changes())
    st.update_favorite("golden", "n", "r1", {"blocked_by_ru": True}, listed_only=True)
    out = st.startup("n")
    assert "favorites" not in out and out["tu"] == "n" and out["history"] == []
    assert [f["ru"] for f in st.startup("g")["favorites"]] == ["r1"]  # the other TU keeps its list


def test_health_answers_200_while_stack_takes_writes_and_not_while_it_is_down(stack):
    """DESIGN §9: ``GET /v1/health`` answers 200 when Stack accepts writes (the Stack sender's
    probe, §10); a scenario's ``stack down`` drops it like every other request."""
    assert stack.http.get("/v1/health").status_code == 200
    stack.set_fault("down")
    with pytest.raises(httpx.TransportError):
        stack.http.get("/v1/health")
    stack.set_fault("up")
    assert stack.http.get("/v1/health").json() == {"ok": True}


def test_refuse_answers_the_next_write_422_once_single_and_in_a_batch(stack):
    """The project's ``stack refuse`` line (electron-stub/README.md): the next ``value`` writes
    (default 1) answer 422 with a body naming the refusal, are not applied and not remembered
    for idempotency; reads, health and later writes are untouched."""
    stack.set_fault("refuse")
    r = put(stack, {"step": 1}, key="r-1")
    assert r.status_code == 422 and r.json()["error"] == "injected refusal"
    assert stack.marker("g", "r1", "followUpChat") is not None  # the seeded one: unchanged
    assert stack.http.get("/v1/health").status_code == 200
    assert put(stack, {"step": 2}, key="r-2").status_code == 200
    stack.set_fault("refuse", 1)
    body = {"writes": [
        {"key": "b-1", "method": "PUT", "path": "/v1/tus/g/favorites/r1/markers/followUpMail", "body": {"value": {"a": 1}}},
        {"key": "b-2", "method": "PUT", "path": "/v1/tus/g/favorites/r1/markers/followUpMail", "body": {"value": {"a": 2}}},
        {"key": "b-3", "method": "PUT", "path": "/v1/tus/g/favorites/r2/markers/followUpMail", "body": {"value": {"a": 3}}}]}
    res = stack.http.post("/v1/batch", json=body).json()["results"]
    assert [x["status"] for x in res] == [422, 424, 200]
    assert stack.counters["refused_writes"] == 2
    assert put(stack, {"step": 1}, key="r-1").status_code == 200  # not remembered: a retry is new


def test_refuse_is_a_scenario_line():
    s = sc.parse_lines([HEADER, json.dumps({"t": 5, "kind": "stack", "mode": "refuse"}),
                        json.dumps({"t": 6, "kind": "stack", "mode": "refuse", "value": 2})], "x.jsonl")
    assert [(x.mode, x.value) for x in s.timeline] == [("refuse", None), ("refuse", 2.0)]
    with pytest.raises(sc.ScenarioError, match="refuse"):
        sc.parse_lines([HEADER, json.dumps({"t": 5, "kind": "stack", "mode": "refuse", "value": 0.5})], "x.jsonl")


def handed(tu="g", delivery_id="ev-1.0", **kw):
    return {"id": delivery_id, "event_id": "ev-1", "event_at": 100.0, "source": "electron", "subject": "crm",
            "action": "sync", "priority": "normal", "rule": "crm", "channel": "webhook", "target": "crm-hook",
            "message_b64": "e30=", "attempts": 2, "next_attempt_at": 150.0, "expires_at": None,
            "last_error": "HTTP 503", "tu": tu, "ru": None, **kw}


def test_handed_over_deliveries_are_held_listed_and_released(stack):
    """DESIGN §9 "Handed-over deliveries": PUT holds one, startup lists it, DELETE releases it
    (a DELETE of one not held is no error); writes keyed like any other, batched too."""
    path = "/v1/tus/g/deliveries/ev-1.0"
    r = stack.http.put(path, json=handed(), headers={"Idempotency-Key": "h1"})
    assert r.status_code == 200 and r.json() == {"ok": True, "tu": "g", "id": "ev-1.0"}
    assert stack.http.put(path, json=handed(attempts=3), headers={"Idempotency-Key": "h1"}).status_code == 422
    assert stack.http.put(path, json=handed(tu="other"), headers={"Idempotency-Key": "h2"}).status_code == 400
    assert stack.http.put("/v1/tus/g/deliveries/ev-9.0", json=handed(), headers={"Idempotency-Key": "h3"}).status_code == 400
    assert stack.http.get("/v1/tus/g/startup").json()["deliveries"] == [handed()]
    assert "deliveries" not in stack.http.get("/v1/tus/nobody/startup").json()
    gone = stack.http.request("DELETE", path, json={}, headers={"Idempotency-Key": "d1"})
    assert gone.json() == {"ok": True, "tu": "g", "id": "ev-1.0", "deleted": True}
    assert "deliveries" not in stack.http.get("/v1/tus/g/startup").json()
    again = stack.http.request("DELETE", path, json={}, headers={"Idempotency-Key": "d2"})
    assert again.json()["deleted"] is False
    batch = stack.http.post("/v1/batch", json={"writes": [
        {"key": "b1", "method": "PUT", "path": "/v1/tus/g/deliveries/ev-2.0", "body": handed(delivery_id="ev-2.0")},
        {"key": "b2", "method": "PUT", "path": "/v1/tus/g/deliveries/ev-3.0", "body": handed(delivery_id="ev-3.0")},
        {"key": "b3", "method": "DELETE", "path": "/v1/tus/g/deliveries/ev-2.0", "body": {}}]}).json()
    assert [x["status"] for x in batch["results"]] == [200, 200, 200]
    assert [d["id"] for d in stack.http.get("/v1/tus/g/startup").json()["deliveries"]] == ["ev-3.0"]
    ops = [(a["op"], a["id"]) for a in stack.acked if a["kind"] == "delivery"]
    assert ops == [("put", "ev-1.0"), ("delete", "ev-1.0"), ("delete", "ev-1.0"), ("put", "ev-2.0"),
                   ("put", "ev-3.0"), ("delete", "ev-2.0")]
