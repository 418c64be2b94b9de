"""The driver's view of its sidecars (:mod:`electron_stub.replay_sidecars`): when each next acts
by itself (``due``, from the ``next_due`` of the sidecar's answers) — known only from an answer
that carries it, kept across a read that takes no step."""
from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

from electron_stub.replay_sidecars import Sidecars, VirtualTime
from electron_stub.report import RunStats

T0 = 1_796_025_600.0


def _sidecars() -> Sidecars:
    return Sidecars(VirtualTime(T0, T0), Path("unused"), stack=None, seed=1, binary=None,  # type: ignore[arg-type]
                    logs_kept=False, routing=None, senders=None, stats=RunStats(),  # type: ignore[arg-type]
                    frames=Counter(), on_notification=lambda *a: None, on_request=None)  # type: ignore[arg-type]


def _machine(answers: dict) -> SimpleNamespace:
    async def call(method: str, params: object) -> object:
        return answers[method]
    return SimpleNamespace(name="m1", call=call)


def test_a_tasks_list_read_keeps_what_the_driver_knows_of_the_sidecars_next_due():
    sd = _sidecars()
    m = _machine({"clock.advance_to": {"ok": True, "next_due": T0 + 40.0}, "tasks.list": [],
                  "platform.event": {"ok": True}, "platform.events": {"ok": True, "next_due": None}})
    asyncio.run(sd.send(m, "clock.advance_to", {"t": T0 + 5}))  # type: ignore[arg-type]
    assert sd.due == {"m1": T0 + 40.0}
    # tasks.list takes no step (sidecar/app/inputs.py): its answer, a list, carries no next_due,
    # and nothing the sidecar does by itself moved — forgetting it made the driver step by tick
    asyncio.run(sd.send(m, "tasks.list", {"tu": "g1"}))  # type: ignore[arg-type]
    assert sd.due == {"m1": T0 + 40.0}
    # a step's answer without next_due (an older binary) still leaves it unknown
    asyncio.run(sd.send(m, "platform.event", {}))  # type: ignore[arg-type]
    assert sd.due == {}
    asyncio.run(sd.send(m, "platform.events", {"events": []}))  # type: ignore[arg-type]
    assert sd.due == {"m1": None}
    assert sd.frames == Counter({"clock.advance_to": 1, "tasks.list": 1, "platform.event": 1,
                                 "platform.events": 1})
