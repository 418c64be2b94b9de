"""``bench.roundtrips``: the classes of a replay's platform-request round trips (chain, same
instant other TU, a later instant in the frame, the first after a frame) from a log in arrival
order, and the bare round-trip floor measured on both sides."""
from __future__ import annotations

import asyncio
import json

import pytest

from bench import roundtrips


def _rt(at: float, tu: str, *kinds: str, rt: str = "platform.request") -> dict:
    return {"rt": rt, "m": "m1", "reqs": [{"at": at, "tu": tu, "kind": k, "seen": 0} for k in kinds]}


def test_classes_chain_other_tu_later_instant_and_first():
    log = [
        {"frame": "platform.events", "m": "m1", "ats": [10.0, 20.0]},
        _rt(10.0, "g1", "golden.online_ru"),  # first after the frame, at its event's instant
        _rt(10.0, "g1", "golden.chat_history"),  # the answer's step asked the next: a chain
        _rt(10.0, "g2", "golden.online_ru"),  # another TU at the same instant
        _rt(15.0, "p1", "prime.chat_restriction", "prime.correspondence_get", rt="platform.requests"),
        {"frame": "clock.advance_to", "m": "m1", "ats": []},
        _rt(30.0, "g1", "golden.online_ru"),  # first after a frame, no event at its instant
    ]
    res = roundtrips.analyse(log)
    c = res["classes"]
    assert c["round_trips"] == 5 and c["requests"] == 6
    assert c["platform.request"] == 4 and c["platform.requests"] == 1
    assert c["first_after_frame"] == 2 and c["first_at_an_event_instant"] == 1
    assert c["chain_same_tu_same_at"] == 1 and c["same_at_other_tu"] == 1
    assert c["later_instant_same_frame"] == 1
    assert res["per_tu"] == {"g1": 3, "g2": 1, "p1": 1}
    # (m1, 10.0) asked three round trips; 15.0 and 30.0 one each
    assert res["instants_asking"] == 3 and res["round_trips_per_instant"] == {1: 2, 3: 1}
    assert res["runs_by_length"] == {2: 1, 1: 3}  # g1's chain of two, then three alone


@pytest.mark.parametrize("token", [None, "-starts-like-an-option"])
def test_floor_measures_both_sides_of_a_bare_round_trip(token):
    """``token``: None draws one (``secrets.token_urlsafe``, which begins with ``-`` one time in 64:
    the server's argument parser took it for an option and the run failed — seen in a CI run)."""
    res = asyncio.run(roundtrips.floor(50, token=token))
    assert res["round_trips"] == 50
    assert res["wall_us"] > 0 and res["client_cpu_us"] > 0 and res["server_cpu_us_incl_startup"] > 0


def test_the_log_sees_every_round_trip_and_frame_of_a_replay(tmp_path):
    from electron_stub import generate

    path = tmp_path / "smoke.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in generate.generate("smoke", hours=0.1, favorites=4)))
    log: list[dict] = []
    rp = asyncio.run(roundtrips._play(str(path), True, log))
    asked = [r for r in log if "rt" in r]
    assert asked and len(asked) == sum(rp.request_frames.values())
    assert sum(len(r["reqs"]) for r in asked) == sum(rp.requests.values())
    assert len([r for r in log if "frame" in r]) == sum(rp.frames.values())
