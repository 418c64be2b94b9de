"""Poll answers pushed into the frame (:mod:`electron_stub.pushed_polls`): a replay that pushes
the grid passes' answers writes the SAME trace, byte for byte, as one that asks each by round
trip — the same ``requests`` counts and expectation results — in fewer round trips; a pass of a
TU an earlier item of the frame changes keeps its round trip; a record the sidecar did not use
is taken back."""
from __future__ import annotations

import asyncio
import json

import pytest

from electron_stub import scenario as sc
from electron_stub.batch import Frame, Item
from electron_stub.generate import generate
from electron_stub.pushed_polls import PollPusher
from electron_stub.replay import Replay
from electron_stub.replay_sidecars import ACTION, TIMELINE, VirtualTime
from electron_stub.trace import Recorder
from electron_stub.world import World

T0 = 1_796_025_600.0


def _run(scenario: sc.Scenario, data_dir, push: bool) -> Replay:
    rp = Replay(scenario, data_dir=data_dir, quiet=True, push=push)
    asyncio.run(rp.run())
    return rp


def _same(asked: Replay, pushed: Replay, tmp_path) -> None:
    asked.rec.write(tmp_path / "asked.jsonl")
    pushed.rec.write(tmp_path / "pushed.jsonl")
    assert (tmp_path / "asked.jsonl").read_bytes() == (tmp_path / "pushed.jsonl").read_bytes()
    assert [(r.ok, r.lineno) for r in asked.results] == [(r.ok, r.lineno) for r in pushed.results]
    assert asked.requests == pushed.requests and asked.samples == pushed.samples
    assert asked.verdict() == pushed.verdict() == []
    assert asked.pusher.used == 0 and pushed.pusher.used > 0


def test_pushed_replay_equals_round_trips_on_a_generated_smoke_shift(tmp_path):
    lines = generate("smoke", seed=5)
    scenario = sc.parse_lines([json.dumps(x) for x in lines], "smoke.jsonl")
    asked, pushed = _run(scenario, tmp_path / "a", False), _run(scenario, tmp_path / "p", True)
    _same(asked, pushed, tmp_path)
    trips = sum(pushed.request_frames.values())
    assert trips + pushed.pusher.used == sum(asked.request_frames.values())
    assert pushed.pusher.used > trips  # most poll passes are pushed


@pytest.mark.parametrize("name", ["s03a_restore_under_180s",  # a crash: the new process lists anew
                                  "c02_logout_keeps_the_attempt",  # a logout: its passes stop
                                  "t02_like_prime"])
def test_pushed_replay_equals_round_trips_on_seed_scenarios(tmp_path, name, shared_dir):
    scenario = sc.load(shared_dir / "scenarios" / "seed" / f"{name}.jsonl")
    _same(_run(scenario, tmp_path / "a", False), _run(scenario, tmp_path / "p", True), tmp_path)


# ---- the harness's bookkeeping, without a sidecar ---------------------------------------------

def _world() -> World:
    w = World(T0)
    for project, tu, ru in (("golden", "g-1", "ru-1"), ("golden", "g-2", "ru-2"), ("chathouse", "c-1", "c-ru-1")):
        w.apply_initial(sc.Tu(project=project, tu=tu, operator="op"))
        w.apply_initial(sc.Favorite(project=project, tu=tu, ru=ru))
    return w


def _pusher(world: World, rec: Recorder, frame: Frame | None = None) -> tuple[PollPusher, list]:
    undone: list = []

    def record(at: float, params: dict):
        return rec.platform_request(at, params["project"], params["tu"], params["method"], params["params"])

    def unrecord(handle) -> None:
        undone.append(handle)
        rec.retract_request(handle)
    return PollPusher(VirtualTime(start=T0, now=T0), world, ahead_s=15.0, enabled=True, record=record,
                      unrecord=unrecord, frame_of=lambda: frame), undone


def _poll(tu: str, at: float) -> dict:
    if tu.startswith("c-"):
        return {"project": "chathouse", "tu": tu, "pass": "online", "at": T0 + at, "method": "scroll_all_online",
                "params": {}}
    return {"project": "golden", "tu": tu, "pass": "online", "at": T0 + at, "method": "online_ru", "params": {}}


def test_an_advance_carries_every_listed_pass_it_reaches_answered_from_the_world_now():
    world, rec = _world(), Recorder(T0)
    world.online["golden"].add("ru-1")
    pusher, _ = _pusher(world, rec)
    pusher.settle("m1", {"polls": [_poll("g-1", 5), _poll("g-2", 9), _poll("g-1", 20)]}, [])
    params, records = pusher.prepare("m1", "clock.advance_to", {"t": T0 + 10})
    assert params["polls_ahead_s"] == 15.0 and len(records) == 2
    assert params["poll_answers"] == [
        {"tu": "g-1", "pass": "online", "at": T0 + 5, "result": {"online": ["ru-1"]}},
        {"tu": "g-2", "pass": "online", "at": T0 + 9, "result": {"online": []}}]
    assert [(x["at"], x["tu"]) for x in rec.sorted_lines()] == [(5.0, "g-1"), (9.0, "g-2")]
    # other methods carry nothing; a pass not reached yet is kept for a later frame, with the
    # ones the next answer lists (each pass is listed once)
    assert pusher.prepare("m1", "session.login", {"tu": "g-1"}) == ({"tu": "g-1"}, [])
    pusher.settle("m1", {"now": T0 + 10, "polls": [_poll("g-2", 24)]}, records)
    params, _ = pusher.prepare("m1", "clock.advance_to", {"t": T0 + 30})
    assert [(a["tu"], a["at"] - T0) for a in params["poll_answers"]] == [("g-1", 20.0), ("g-2", 24.0)]
    assert pusher.prepare("m1", "clock.advance_to", {"t": T0 + 60})[1] == []
    pusher.settle("m1", {"polls": [_poll("g-1", 35)]}, [])
    pusher.forget("m1")  # restarted: the new process lists anew
    assert pusher.prepare("m1", "clock.advance_to", {"t": T0 + 60})[1] == []


def test_a_frame_pushes_only_passes_no_earlier_item_changes():
    world, rec = _world(), Recorder(T0)

    def item(t: float, line, tu: str | None = None, phase: int = TIMELINE) -> Item:
        return Item((t, phase, int(t), line), None if tu is None else {"tu": tu, "name": "x"}, apply=lambda: None)

    def message(tu: str, ru: str, project: str = "golden") -> sc.Message:
        return sc.Message(project=project, tu=tu, ru=ru, from_="ru", id=f"m-{tu}")
    frame = Frame([
        item(2.0, sc.Online(project="golden", ru="ru-2", online=True)),  # g-2's favorite
        item(3.0, sc.Online(project="golden", ru="ru-7", online=True)),  # nobody's
        item(4.0, message("g-1", "ru-1"), "g-1"),  # a chat item: not who is online
        item(4.5, message("c-1", "c-ru-1", "chathouse"), "c-1"),  # the row c-1's online scroll shows
        item(5.5, sc.Favorite(project="golden", tu="g-1", ru="ru-5")),  # a new favorite of g-1
        item(6.0, ("answer", "t-1", "chat"), "g-2", phase=ACTION),  # an own send of g-2
    ], start=T0)
    pusher, _ = _pusher(world, rec, frame)
    pusher.settle("m1", {"polls": [_poll("g-1", 1), _poll("g-1", 5), _poll("g-1", 6), _poll("g-2", 2),
                                   _poll("g-2", 3), _poll("c-1", 4.5), _poll("c-1", 5), _poll("g-1", 7)]}, [])
    params, records = pusher.prepare("m1", "platform.events", {"events": frame.events})
    # g-1 at 1 and 5 (its message at 4 changes no online set; its new favorite at 5.5 does);
    # g-2 at 2 (its favorite's online line at the same instant comes after the pass) and at 3,
    # that line applied for the answer; c-1 at 4.5 (its message at that very instant comes
    # after it), not at 5: the row changed; nothing past the frame's last item (7); in time order
    assert [(a["tu"], a["at"] - T0, a["result"].get("online")) for a in params["poll_answers"]] == [
        ("g-1", 1.0, []), ("g-2", 2.0, []), ("g-2", 3.0, ["ru-2"]), ("c-1", 4.5, None), ("g-1", 5.0, [])]
    assert len(records) == 5
    assert world.online["golden"] == set()  # the frame applies the line when the sidecar reaches it


def test_records_of_answers_the_sidecar_did_not_use_are_taken_back():
    world, rec = _world(), Recorder(T0)
    pusher, undone = _pusher(world, rec)
    pusher.settle("m1", {"polls": [_poll("g-1", 5), _poll("g-2", 9)]}, [])
    _, records = pusher.prepare("m1", "clock.advance_to", {"t": T0 + 10})
    assert rec.requests_of("g-2", "online_ru", None, T0, T0 + 10) == 1
    pusher.settle("m1", {"now": T0 + 10, "poll_answers_used": [0]}, records)
    assert undone == [records[1]] and (pusher.used, pusher.dropped) == (1, 1)
    assert [(x["at"], x["tu"]) for x in rec.sorted_lines()] == [(5.0, "g-1")]
    assert rec.requests_of("g-2", "online_ru", None, T0, T0 + 10) == 0
    assert rec.counts["platform.request"] == 1
