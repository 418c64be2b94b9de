"""``tasks.list`` pages like the other lists (DESIGN §4; docs/protocol.md §8): ``limit`` and an
opaque ``cursor``, the operator's total order (deadline, VIP, strength, creation, task id), and
``next_cursor`` absent on the last page; without ``limit`` / ``cursor`` the answer stays today's
bare list."""
from __future__ import annotations

import asyncio

import msgspec
import pytest

from bridge.errors import InvalidParams
from tests.app.test_app_steps import T0, TU, Run, msg


def test_pages_read_to_the_end_are_the_whole_sorted_list(tmp_path):
    async def main():
        run = await Run(tmp_path).start()
        await run.call("clock.advance_to", {"t": T0 + 10})
        await run.call("session.login", {"tu": TU, "project": "golden", "operator": "op"})
        for i in range(5):  # two share an instant: a tie broken by the task id
            at = T0 + 20 + (i // 2)
            await run.call("platform.event", msg(f"ru-{i}", f"m-{i}", at))
        whole = [t.task_id for t in await run.call("tasks.list", {"tu": TU})]
        assert len(whole) == 5
        read, cursor, pages = [], None, 0
        while True:
            params = {"tu": TU, "limit": 2} | ({"cursor": cursor} if cursor else {})
            answer = msgspec.to_builtins(await run.call("tasks.list", params))
            pages += 1
            read += [t["task_id"] for t in answer["tasks"]]
            if "next_cursor" not in answer:
                break
            assert answer["next_cursor"] is not None
            cursor = answer["next_cursor"]
        assert read == whole and pages == 3
        for bad in ({"limit": 0}, {"cursor": "nope"}, {"cursor": "[1]"}, {"limit": 1001}):
            with pytest.raises(InvalidParams) as info:
                await run.call("tasks.list", {"tu": TU} | bad)
            assert info.value.data["field"] == next(iter(bad)), bad
        await run.stop()
    asyncio.run(main())
