"""Poll answers pushed into the frame (sidecar.app.pushed_polls; docs/decisions.md "Poll answers
pushed into the frame"): an advance asked with ``polls_ahead_s`` lists the grid passes ahead; the
next advance may carry their answers, which the passes take instead of a round trip — the sidecar
then does exactly what the round trips made it do (same notes, same SQLite); an answer whose pass
does not run is dropped; a client that pushes nothing is asked as before."""
from __future__ import annotations

import asyncio
import sqlite3
from typing import Any

import msgspec

from tests.app.test_app_steps import T0, TU, Run

PERIOD = 15.0  # Golden's RU Online pass (platform_clients.golden)


def _online(at: float) -> dict:
    """The platform's answer to ``online_ru`` at ``at``: who is online changes every minute."""
    minute = int((at - T0) // 60)
    return {"online": [f"ru-{minute % 3}", "ru-9"] if minute % 2 else ["ru-9"]}


def _dump(path) -> list:
    with sqlite3.connect(path) as c:
        return [line for line in c.iterdump() if "meta" not in line]


async def _run(path, *, push: bool, extra: list[dict] | None = None) -> tuple[Run, list, list, list]:
    """A Golden TU's login and ten minutes of advances of 10 s.  ``push``: ask for the polls
    ahead and push the answer of every one reached (then ``extra`` too).  Returns the stopped
    Run, the round trips (``(at, method)``), the advances' params and their answers."""
    run = await Run(path).start()
    trips: list[tuple[float, str]] = []

    async def request(method: str, params: Any, timeout: float | None = None) -> Any:
        asked = params.requests if method == "platform.requests" else [params]
        trips.extend((r.at, r.method) for r in asked)
        if method == "platform.requests":
            return {"results": [{"result": _online(r.at)} for r in asked]}
        return _online(params.at)
    run.app.bridge.request = request  # type: ignore[method-assign]
    answers: list[dict] = []
    sent: list[dict] = []
    try:
        await run.call("clock.advance_to", {"t": T0})
        await run.call("session.login", {"tu": TU, "project": "golden", "operator": "op"})
        listed: list[dict] = []
        t = T0
        while t < T0 + 600:
            t += 10.0
            params: dict[str, Any] = {"t": t}
            if push:
                params["polls_ahead_s"] = 10.0
                pushed = [{"tu": p["tu"], "pass": p["pass"], "at": p["at"], "result": _online(p["at"])}
                          for p in listed if p["at"] <= t]
                params["poll_answers"] = pushed + (extra or [])
            answer = msgspec.to_builtins(await run.call("clock.advance_to", params))
            sent.append(params)
            answers.append(answer)
            listed = [x for x in listed if x["at"] > t] + answer.get("polls", [])  # each listed once
        run.online = set(run.app.engine.tus[TU].online)  # type: ignore[attr-defined]
    finally:
        await run.stop()
    return run, trips, sent, answers


def test_pushed_poll_answers_change_nothing_but_the_round_trips(tmp_path):
    async def main() -> None:
        (tmp_path / "asked").mkdir()
        (tmp_path / "pushed").mkdir()
        asked, asked_trips, _, asked_answers = await _run(tmp_path / "asked", push=False)
        pushed, pushed_trips, _, pushed_answers = await _run(tmp_path / "pushed", push=True)
        assert all("polls" not in a and "poll_answers_used" not in a for a in asked_answers)
        grid = [at for at, method in asked_trips if method == "online_ru"][1:]  # after the login's
        assert len(grid) >= 38 and all(round(b - a, 6) == PERIOD for a, b in zip(grid, grid[1:]))
        # every grid pass but the first (listed before any answer could be pushed) took its answer
        assert [at for at, _ in pushed_trips] == [at for at, _ in asked_trips[:2]]
        used = sum(len(a["poll_answers_used"]) for a in pushed_answers)
        assert used == len(grid) - 1
        assert pushed.sent == asked.sent
        assert pushed.online == asked.online == set(_online(grid[-1])["online"])  # type: ignore[attr-defined]
        assert _dump(pushed.store.path) == _dump(asked.store.path)
    asyncio.run(main())


def test_each_grid_pass_is_listed_once_by_next_due_plus_the_horizon(tmp_path):
    async def main() -> None:
        run, trips, _, answers = await _run(tmp_path, push=True)
        listed = [p for a in answers for p in a["polls"]]
        for a in answers:
            assert all(p["at"] <= a["next_due"] + 10.0 for p in a["polls"])
            assert [p["at"] for p in a["polls"]] == sorted(p["at"] for p in a["polls"])
        assert {(p["project"], p["tu"], p["pass"], p["method"], str(p["params"])) for p in listed} == {
            ("golden", TU, "online", "online_ru", "{}")}
        ats = [p["at"] for p in listed]
        assert ats == sorted(set(ats)), "a pass listed twice"
        # the very instants the passes then ran at: the grid after the login's first pass
        grid_ran = [at for at, _ in trips[1:]] + [at for at in ats if at <= T0 + 600]
        assert sorted(grid_ran) == [at for at in sorted(set(grid_ran))] and len(grid_ran) >= 39
        assert all(round(b - x, 6) == PERIOD for x, b in zip(ats, ats[1:]))
    asyncio.run(main())


def test_an_answer_whose_pass_does_not_run_is_dropped_and_the_pass_asks(tmp_path):
    async def main() -> None:
        wrong = [{"tu": TU, "pass": "online", "at": T0 + 1.0, "result": {"online": ["ru-x"]}},  # no pass then
                 {"tu": "g-tu-other", "pass": "online", "at": T0 + 5.0, "result": {"online": []}},  # no such TU
                 {"tu": TU, "pass": "nonsense", "at": T0 + 5.0, "result": {}}]
        (tmp_path / "a").mkdir()
        (tmp_path / "b").mkdir()
        plain, plain_trips, _, _ = await _run(tmp_path / "a", push=True)
        odd, odd_trips, sent, answers = await _run(tmp_path / "b", push=True, extra=wrong)
        for params, a in zip(sent, answers):  # the extras come last and are never used
            right = len(params["poll_answers"]) - len(wrong)
            assert a["poll_answers_used"] == list(range(right))
        assert odd.sent == plain.sent and odd_trips == plain_trips
        assert _dump(odd.store.path) == _dump(plain.store.path)
    asyncio.run(main())


def test_prime_lists_its_fixed_passes_and_never_the_active_scroll(tmp_path):
    async def main() -> None:
        run = await Run(tmp_path).start()

        async def request(method: str, params: Any, timeout: float | None = None) -> Any:
            page = {"dialogs": [], "next_cursor": None}
            if method == "platform.requests":
                return {"results": [{"result": page if r.method == "dialogs" else {"mails": []}}
                                    for r in params.requests]}
            return page if params.method == "dialogs" else {"mails": []}
        run.app.bridge.request = request  # type: ignore[method-assign]
        try:
            await run.call("clock.advance_to", {"t": T0})
            await run.call("session.login", {"tu": "p-1", "project": "prime", "operator": "op"})
            a = msgspec.to_builtins(await run.call("clock.advance_to", {"t": T0 + 1, "polls_ahead_s": 3600.0}))
        finally:
            await run.stop()
        names = {(p["pass"], p["method"], str(p["params"])) for p in a["polls"]}
        assert names == {("online", "dialogs", "{'criteria': ['active', 'online']}"),
                         ("check_chat", "dialogs", "{'criteria': ['unanswered']}"),
                         ("likes", "dialogs", "{'criteria': []}")}
        online = [p["at"] for p in a["polls"] if p["pass"] == "online"]
        assert len(online) in (60, 61) and all(round(b - x, 6) == 60.0 for x, b in zip(online, online[1:]))
    asyncio.run(main())


def test_a_long_horizon_is_listed_in_bounded_answers_without_gap_or_repeat(tmp_path):
    """Issue 21 (breaker D2): ``polls_ahead_s`` 86,400 listed every pass of a day in one answer
    (1.2 MB for 12 TUs, over the TypeScript client's 1 MiB frame limit: the connection closed
    1009).  An answer lists at most MAX_POLLS_LISTED, the earliest; the next answers list the
    rest, each pass once, in time order."""
    from sidecar.protocol.polls import MAX_POLLS_LISTED

    async def main() -> None:
        run = await Run(tmp_path).start()
        run.app.bridge.request = lambda method, params, timeout=None: asyncio.sleep(0, _online(T0))  # type: ignore[method-assign]
        try:
            await run.call("clock.advance_to", {"t": T0})
            await run.call("session.login", {"tu": TU, "project": "golden", "operator": "op"})
            ahead = 86_400.0
            answers = [msgspec.to_builtins(await run.call("clock.advance_to", {"t": T0 + 1, "polls_ahead_s": ahead}))]
            while len(answers[-1]["polls"]) == MAX_POLLS_LISTED:  # the same instant asks again
                answers.append(msgspec.to_builtins(
                    await run.call("clock.advance_to", {"t": T0 + 1, "polls_ahead_s": ahead})))
                assert len(answers) < 20
        finally:
            await run.stop()
        assert len(answers[0]["polls"]) == MAX_POLLS_LISTED
        assert max(len(msgspec.json.encode(a)) for a in answers) < 256 * 1024
        ats = [p["at"] for a in answers for p in a["polls"]]
        assert ats == sorted(set(ats)), "a pass listed twice or out of order"
        assert all(round(b - x, 6) == PERIOD for x, b in zip(ats, ats[1:])), "a pass left out"
        assert answers[-1]["next_due"] + ahead - PERIOD < ats[-1] <= answers[-1]["next_due"] + ahead
    asyncio.run(main())
