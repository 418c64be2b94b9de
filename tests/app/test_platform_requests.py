"""``platform.requests`` (issue 11 item 3): on the virtual clock the platform requests ONE step
makes go to Electron in one round trip, and their answers still run as steps in request order —
so the sidecar does exactly what asking one by one does (same notes, same SQLite)."""
from __future__ import annotations

import asyncio
import sqlite3
from typing import Any

from bridge.errors import AnswerTooLarge, RemoteError
from sidecar.app import requests as app_requests
from sidecar.runtime.step import Request

from tests.app.test_app_steps import T0, TU, Run

PAGE = {"dialogs": [], "next_cursor": None}


def _answer(method: str) -> Any:
    """Electron's platform answers: empty Prime lists; ``inbox_unanswered`` fails."""
    if method == "inbox_unanswered":
        raise RemoteError(-32000, "the platform is down")
    return PAGE if method == "dialogs" else {}


def _dump(path) -> list:
    with sqlite3.connect(path) as c:
        return [line for line in c.iterdump() if "meta" not in line]


async def _run(path, *, together: bool) -> tuple[Run, list[tuple[str, Any]]]:
    """A Prime TU's login (one step asks five lists) and ten minutes of its passes.  Returns
    the stopped Run and the round trips it made."""
    run = await Run(path).start()
    trips: list[tuple[str, Any]] = []

    async def request(method: str, params: Any, timeout: float | None = None) -> Any:
        trips.append((method, params))
        if method == "platform.requests":
            results = []
            for r in params.requests:
                try:
                    results.append({"result": _answer(r.method)})
                except RemoteError as exc:
                    results.append({"error": {"code": exc.code, "message": exc.message}})
            return {"results": results}
        return _answer(params.method)
    run.app.bridge.request = request  # type: ignore[method-assign]
    if not together:
        run.app.perform_many = None  # type: ignore[assignment,method-assign]  # one by one
    try:
        await run.call("clock.advance_to", {"t": T0})
        await run.call("session.login", {"tu": "p-1", "project": "prime", "operator": "op"})
        await run.call("clock.advance_to", {"t": T0 + 600})
    finally:
        await run.stop()
    return run, trips


def test_one_steps_requests_go_in_one_round_trip_and_change_nothing(tmp_path):
    async def main() -> None:
        (tmp_path / "one").mkdir()
        (tmp_path / "many").mkdir()
        one, one_trips = await _run(tmp_path / "one", together=False)
        many, many_trips = await _run(tmp_path / "many", together=True)
        assert {m for m, _ in one_trips} == {"platform.request"}
        batches = [p for m, p in many_trips if m == "platform.requests"]
        assert batches and all(len(b.requests) > 1 for b in batches)
        # each batch is one step's requests: one instant
        assert all(len({r.at for r in b.requests}) == 1 for b in batches)
        assert any(r.method == "inbox_unanswered" for b in batches for r in b.requests)  # an error item
        asked = [p for m, p in many_trips if m == "platform.request"] + [r for b in batches for r in b.requests]
        assert sorted((r.at, r.method, str(r.params)) for r in asked) == \
            sorted((r.at, r.method, str(r.params)) for _, r in one_trips)
        assert len(many_trips) < len(one_trips)
        assert many.sent == one.sent
        assert _dump(many.store.path) == _dump(one.store.path)
    asyncio.run(main())


class _Bridge:
    """A client: ``many`` answers ``platform.requests`` (an exception is raised), ``one``
    answers each ``platform.request``."""

    def __init__(self, many: Any, one: Any = None) -> None:
        self.many, self.one_answer, self.calls = many, one, []
        self.client = object()  # the connection's auth params: a new object per connection

    async def request(self, method: str, params: Any, timeout: float | None = None) -> Any:
        self.calls.append(method)
        answer = self.many if method == "platform.requests" else self.one_answer
        if isinstance(answer, Exception):
            raise answer
        return answer


def _reqs() -> list:
    return [app_requests.params_of(Request("passes", "online_ru", {}, "t", tu=TU, project="golden", at=T0),
                                   2, [1]) for _ in range(2)]


def test_a_failed_round_trip_is_every_items_error_and_an_items_error_reads_as_a_single_one():
    reqs = _reqs()
    assert reqs[0].batch_seen == 2 and reqs[0].batch_skipped == [1]
    asker = app_requests.Asker(_Bridge(TimeoutError("late")), 1.0)  # type: ignore[arg-type]
    assert asyncio.run(asker.many(reqs)) == [(None, "TimeoutError: late")] * 2 and asker.together
    asker = app_requests.Asker(_Bridge({"results": [  # type: ignore[arg-type]
        {"result": {"online": []}}, {"error": {"code": -32601, "message": "no such method"}}]}), 1.0)
    assert asyncio.run(asker.many(reqs)) == [({"online": []}, None), (None, "RemoteError: -32601: no such method")]


def test_a_client_without_platform_requests_is_asked_one_by_one_from_then_on():
    for many in (RemoteError(-32601, "electron-stub does not serve 'platform.requests'"),
                 {"dialogs": []}):  # a test client that answers every method alike
        bridge = _Bridge(many, one={"online": ["ru-1"]})
        asker = app_requests.Asker(bridge, 1.0)  # type: ignore[arg-type]
        assert asyncio.run(asker.many(_reqs())) == [({"online": ["ru-1"]}, None)] * 2
        assert asyncio.run(asker.many(_reqs())) == [({"online": ["ru-1"]}, None)] * 2
        assert not asker.together
        assert bridge.calls == ["platform.requests"] + ["platform.request"] * 4  # asked together once


def test_a_new_connection_is_asked_together_again():
    """F2 (breaker 16): one client's not serving ``platform.requests`` is that connection's fact,
    not the process's — a newer Electron that connects afterwards is asked together again."""
    bridge = _Bridge(RemoteError(-32601, "no platform.requests"), one={"online": []})
    asker = app_requests.Asker(bridge, 1.0)  # type: ignore[arg-type]
    asyncio.run(asker.many(_reqs()))
    assert not asker.together
    bridge.client = object()  # a new client authenticated
    bridge.many = {"results": [{"result": {"online": ["ru-2"]}}] * 2}
    assert asker.together
    assert asyncio.run(asker.many(_reqs())) == [({"online": ["ru-2"]}, None)] * 2
    assert bridge.calls[-1] == "platform.requests"


def test_an_answer_too_large_together_is_asked_one_by_one():
    """F2 (breaker 16): answers that each fit the frame cap may not fit it together; the bridge
    fails the round trip at once (AnswerTooLarge) and the step's requests are asked one by one —
    asking together never fails where one by one succeeds.  The client still serves
    ``platform.requests``: the next step is asked together again."""
    bridge = _Bridge(AnswerTooLarge(1_200_000, 1 << 20, "platform.requests (id 3)"),
                     one={"online": ["ru-1"]})
    asker = app_requests.Asker(bridge, 1.0)  # type: ignore[arg-type]
    assert asyncio.run(asker.many(_reqs())) == [({"online": ["ru-1"]}, None)] * 2
    assert bridge.calls == ["platform.requests", "platform.request", "platform.request"]
    assert asker.together


def test_a_client_that_lists_its_capabilities_is_not_probed():
    """DESIGN §4: an auth that lists ``capabilities`` says whether the client serves
    ``platform.requests`` — one without it is asked one by one from the first step, never probed."""
    from bridge.auth import Hello
    one_by_one = _Bridge({"results": []}, one={"online": ["ru-1"]})
    one_by_one.client = Hello(token="t", capabilities=[])
    asker = app_requests.Asker(one_by_one, 1.0)  # type: ignore[arg-type]
    assert not asker.together
    assert asyncio.run(asker.many(_reqs())) == [({"online": ["ru-1"]}, None)] * 2
    assert one_by_one.calls == ["platform.request"] * 2
    both = _Bridge({"results": [{"result": {"online": []}}] * 2})
    both.client = Hello(token="t", capabilities=["platform.requests"])
    assert app_requests.Asker(both, 1.0).together  # type: ignore[arg-type]
