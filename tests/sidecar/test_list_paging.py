"""List answers page and never pass the websocket frame cap (issue 9, a breaker's find:
``deliveries.list`` of many rows answered more than 1 MiB and the bridge closed with 1009) —
``sidecar/protocol/paging.py`` and the list methods that use it."""
from __future__ import annotations

import asyncio

import msgspec
import pytest

from bridge.errors import InvalidParams
from sidecar.protocol.paging import MAX_FIELD, SLACK, budget, cut_text, fit, page
from sidecar.router.model import Delivery
from sidecar.router.ops import PutDelivery
from tests.app.test_app_steps import T0, Run

FRAME = 1 << 20  # the default frame cap (Settings.max_frame)


def row(i: int, size: int, target: str = "audit") -> PutDelivery:
    return PutDelivery(Delivery(
        id=f"ev-{i}.0", event_id=f"ev-{i}", event_at=T0 + i, source="electron", subject="s",
        action="a", priority="normal", rule="r", channel="journal", target=target,
        status="delivered", message=b'{"m":"' + b"x" * size + b'"}'))


def frame_size(answer) -> int:
    """The bytes of the JSON-RPC response frame carrying ``answer``."""
    return len(msgspec.json.encode({"jsonrpc": "2.0", "id": "a-long-request-id-0001", "result": answer}))


def test_fit_page_and_cut_text():
    rows = [{"i": i, "pad": "x" * 100} for i in range(50)]
    kept, cut = fit(rows, 1000)
    assert cut and len(msgspec.json.encode(kept)) <= 1000 and kept == rows[:len(kept)]
    assert fit(rows, 10**6) == (rows, False)
    assert fit([{"big": "x" * 5000}], 100)[0]  # the first row is always kept (rows are bounded)
    kept, nxt = page(rows + [{"i": 50}], 50, 10**6, lambda r: r["i"])
    assert len(kept) == 50 and nxt == 49  # cut by limit: a next page exists
    assert page(rows, 50, 10**6, lambda r: r["i"]) == (rows, None)
    assert cut_text("abc") == ("abc", False)
    text, was_cut = cut_text("y" * (MAX_FIELD + 5))
    assert was_cut and len(text) == MAX_FIELD and text.endswith("…")
    assert budget(FRAME) == FRAME - SLACK


def test_deliveries_list_pages_under_the_frame_cap_and_pages_through_everything(tmp_path):
    async def main():
        run = await Run(tmp_path).start()
        await run.call("clock.advance_to", {"t": T0})
        # 400 rows of ~12 KiB (≈ 5 MiB in all) and one whose message alone is 2 MiB
        await run.store.commit([row(i, 12_000) for i in range(400)] + [row(400, 2 << 20)])
        seen, after, pages = [], None, 0
        while True:
            ans = await run.call("deliveries.list", {"target": "audit", "after_seq": after}
                                 if after is not None else {"target": "audit"})
            assert frame_size(ans) < FRAME
            pages += 1
            seen += [d["seq"] for d in ans["deliveries"]]
            if ans["next"] is None:
                break
            assert ans["next"] == ans["deliveries"][-1]["seq"]
            after = ans["next"]
        assert seen == list(range(1, 402)) and pages >= 5  # every row once, in order
        last = (await run.call("deliveries.list", {"after_seq": 400}))["deliveries"]
        assert [d["message_cut"] for d in last] == [True] and len(last[0]["message"]) == MAX_FIELD
        small = await run.call("deliveries.list", {"limit": 3})
        assert [d["seq"] for d in small["deliveries"]] == [1, 2, 3] and small["next"] == 3
        assert (await run.call("deliveries.list", {"after_seq": 401}))["next"] is None
        for bad in ({"limit": 1001}, {"limit": 100_000}, {"after_seq": -1}):
            with pytest.raises(InvalidParams) as ei:
                await run.call("deliveries.list", bad)
            assert ei.value.data == {"field": next(iter(bad))}
        await run.stop()
    asyncio.run(main())


async def page_all(run, method: str, params: dict, key: str, cursor: str) -> tuple[list, int]:
    """Every row of a list method, following ``next``; asserts each answer fits one frame."""
    out, pages, after = [], 0, None
    while True:
        ans = await run.call(method, params if after is None else {**params, cursor: after})
        assert frame_size(ans) < FRAME
        pages += 1
        out += ans[key]
        if ans["next"] is None:
            return out, pages
        after = ans["next"]


def test_why_and_sender_history_page_under_the_frame_cap(tmp_path):
    from sidecar.store.ops import AddSenderHistory, PutDecision

    async def main():
        run = await Run(tmp_path).start()
        await run.call("clock.advance_to", {"t": T0})
        big = {"pad": "d" * 900}
        # recorded out of time order on purpose: the log reads by (at, id), and so do its pages
        decisions = [PutDecision("tu", "ru", T0 + (i * 7919) % 2500, "unanswered_message", "socket",
                                 "miss", None, big) for i in range(2500)]
        await run.store.commit(decisions)
        rows, pages = await page_all(run, "why", {"tu": "tu", "ru": "ru"}, "decisions", "after_id")
        assert len(rows) == 2500 and len({r["id"] for r in rows}) == 2500 and pages >= 3
        assert [(r["at"], r["id"]) for r in rows] == sorted((r["at"], r["id"]) for r in rows)
        ans = await run.call("why", {"tu": "tu", "ru": "ru", "limit": 10})
        assert len(ans["decisions"]) == 10 and ans["next"] == ans["decisions"][-1]["id"]

        await run.app.senders.start([])  # what SidecarApp.start does: ``stack`` is a sender
        await run.store.commit([AddSenderHistory("stack", T0 + i, 101, "n" * 2000) for i in range(1500)])
        hist, pages = await page_all(run, "senders.history", {"sender": "stack", "limit": 1000}, "rows", "after_id")
        assert [r["at"] - T0 for r in hist] == list(range(1500)) and pages >= 3
        for bad in ({"limit": 1001}, {"after_id": -1}):
            with pytest.raises(InvalidParams) as ei:
                await run.call("senders.history", {"sender": "stack", **bad})
            assert ei.value.data == {"field": next(iter(bad))}
        with pytest.raises(InvalidParams) as ei:
            await run.call("why", {"tu": "tu", "ru": "ru", "limit": 5000})
        assert ei.value.data == {"field": "limit"}
        await run.stop()
    asyncio.run(main())


def test_rules_list_pages_and_a_rule_is_bounded(tmp_path, monkeypatch):
    monkeypatch.setenv("SIDECAR_ROUTER_TARGETS", '{"audit": {"channel": "journal"}}')

    async def main():
        run = await Run(tmp_path).start()
        await run.call("clock.advance_to", {"t": T0})
        for i in range(80):  # ~16 KiB each: 1.3 MiB of rules
            await run.call("rules.create", {"name": f"r{i:02d}", "weight": i % 3, "actions": [
                {"target": "audit", "template": f"{i}" + "t" * 4000} for _ in range(4)]})
        rules, pages = await page_all(run, "rules.list", {}, "rules", "after")
        assert pages >= 2
        assert [(r["weight"], r["name"]) for r in rules] == sorted((i % 3, f"r{i:02d}") for i in range(80))
        one = await run.call("rules.list", {"limit": 1})
        assert len(one["rules"]) == 1 and one["next"] == [0, "r00"]
        huge = {"name": "huge", "actions": [{"target": "audit", "template": '"' * 4096}] * 50}
        with pytest.raises(InvalidParams) as ei:  # 400 KiB as JSON: a page could not hold it
            await run.call("rules.create", huge)
        assert ei.value.data == {"field": "actions"}
        assert "huge" not in [r["name"] for r in (await page_all(run, "rules.list", {}, "rules", "after"))[0]]
        await run.stop()
    asyncio.run(main())


# every list's integer params are bounded where they are decoded (a breaker's F5/F6/F9: a cursor
# ≥ 2^63 answered -32603 OverflowError; ``limit: null`` was the default for one list and refused
# by the others; a weight past 2^53 made a JavaScript client's rules.list cursor stand still)
LISTS = [("deliveries.list", {}, "after_seq", "deliveries"), ("why", {"tu": "tu", "ru": "ru"}, "after_id", "decisions"),
         ("senders.history", {"sender": "stack"}, "after_id", "rows"), ("rules.list", {}, "after", "rules")]


@pytest.mark.parametrize(("method", "base", "cursor", "key"), LISTS, ids=[m for m, *_ in LISTS])
def test_list_params_are_bounded_and_alike(tmp_path, monkeypatch, method, base, cursor, key):
    monkeypatch.setenv("SIDECAR_ROUTER_TARGETS", '{"audit": {"channel": "journal"}}')

    async def main():
        run = await Run(tmp_path).start()
        await run.call("clock.advance_to", {"t": T0})
        await run.app.senders.start([])
        big = [2 ** 63, 2 ** 64, 2 ** 70, -1] if cursor != "after" else \
            [[2 ** 53, "x"], [-(2 ** 53), "x"], [2 ** 63, "x"], [-(2 ** 70), "x"]]
        for value in big:
            with pytest.raises(InvalidParams) as ei:
                await run.call(method, {**base, cursor: value})
            assert ei.value.data["field"].startswith(cursor), value
        ok = [2 ** 63 - 1] if cursor != "after" else [[2 ** 53 - 1, "x"], [-(2 ** 53 - 1), "x"]]
        for value in ok:
            ans = await run.call(method, {**base, cursor: value})
            assert ans["next"] is None
        for limit in (0, -1, 1001, 2 ** 64):
            with pytest.raises(InvalidParams) as ei:
                await run.call(method, {**base, "limit": limit})
            assert ei.value.data == {"field": "limit"}
        assert await run.call(method, {**base, "limit": None}) == await run.call(method, base)  # null = default
        await run.stop()
    asyncio.run(main())


def test_rule_weights_stay_exact_in_javascript(tmp_path, monkeypatch):
    monkeypatch.setenv("SIDECAR_ROUTER_TARGETS", '{"audit": {"channel": "journal"}}')

    async def main():
        run = await Run(tmp_path).start()
        await run.call("clock.advance_to", {"t": T0})
        for weight in (2 ** 53, -(2 ** 53), 2 ** 70, -(2 ** 70)):
            for call in (("rules.create", {"name": "w", "weight": weight, "actions": [{"target": "audit"}]}),):
                with pytest.raises(InvalidParams) as ei:
                    await run.call(*call)
                assert ei.value.data == {"field": "weight"}
        await run.call("rules.create", {"name": "w", "weight": 2 ** 53 - 1, "actions": [{"target": "audit"}]})
        with pytest.raises(InvalidParams) as ei:
            await run.call("rules.patch", {"name": "w", "changes": {"weight": 2 ** 53}})
        assert ei.value.data == {"field": "changes.weight"}
        assert [r["weight"] for r in (await run.call("rules.list", {}))["rules"]] == [2 ** 53 - 1]
        await run.stop()
    asyncio.run(main())
