"""Store.commit (one transaction per step) and the readers (DESIGN §9)."""
from __future__ import annotations

import sqlite3

import msgspec
import pytest

from sidecar.domain.tasks import CloseReason, Task, TaskType
from sidecar.domain.favorites import Favorite
from sidecar.store import (AnyOp, DeleteFavorite, DeleteSession, DeleteState, DeleteStateScope,
                           PruneTasks, PutFavorite, PutMeta, PutSession, PutState, PutTask,
                           SessionRow, Store, StoreError)

from storehelp import STACK_KEYS, stack_row

T0 = 1_796_025_600.0


@pytest.fixture(params=[True, False], ids=["commit-on-loop", "commit-on-thread"])
async def store(tmp_path, request):
    """Every commit test on both commit paths (sidecar.store.db, "Commits on the loop")."""
    s = await Store.open(tmp_path / "sidecar.db", commit_on_loop=request.param)
    yield s
    await s.close()


def task(n: int, *, tu="tu1", ru="ru1", type=TaskType.UNANSWERED_MESSAGE, created=T0,
         deadline=None, closed=None, reason=None, **kw) -> Task:
    return Task(task_id=f"t-{n}", type=type, project="golden", tu=tu, ru=ru, source="socket",
                created_at=created, deadline=created + 120 if deadline is None else deadline,
                closed_at=closed, reason=reason, **kw)


def enq(key: str, pair="tu1/ru1", at=T0, body=b"{}"):
    return stack_row(key, pair, at, body)


async def stack_keys(store: Store) -> list[str]:
    return await store.read(lambda c: [r[0] for r in c.execute(STACK_KEYS)])


async def snapshot(store: Store) -> dict:
    return {"open": await store.open_tasks(), "fav": await store.favorites("tu1"),
            "state": await store.states("tu1", "chains"), "out": await stack_keys(store),
            "sessions": await store.sessions()}


async def test_failing_op_in_the_middle_writes_nothing(store):
    await store.commit([PutState("tu1", "chains", "ru0", {"step": 1})])
    before = await snapshot(store)
    bad = msgspec.structs.replace(task(1), project=None)  # NOT NULL violation inside the batch
    with pytest.raises(StoreError) as ei:
        await store.commit([PutFavorite("tu1", "ru1", "golden", Favorite(ru="ru1", active=True)),
                            PutState("tu1", "chains", "ru0", {"step": 2}),
                            PutTask(bad), enq("k1"), PutSession("tu1", "golden", "op", T0)])
    assert isinstance(ei.value.__cause__, sqlite3.IntegrityError)
    assert await snapshot(store) == before
    await store.commit([enq("k1")])  # the store is still usable afterwards
    assert await stack_keys(store) == ["k1"]


async def test_unencodable_value_writes_nothing(store):
    with pytest.raises(StoreError):
        await store.commit([enq("k1"), PutState("tu1", "chains", "ru1", object())])
    with pytest.raises(StoreError):
        await store.commit([enq("k1"), "not an op"])  # type: ignore[list-item]
    assert await stack_keys(store) == []


async def test_tasks_upsert_and_readers(store):
    await store.commit([
        PutTask(task(1, created=T0, deadline=T0 + 300, vip="green", meta={"answer_by": "mail"})),
        PutTask(task(2, created=T0 + 1, deadline=T0 + 100, type=TaskType.LIKE)),
        PutTask(task(3, tu="tu2", created=T0 + 2)),
        PutTask(task(4, created=T0 - 900, closed=T0 - 500, reason=CloseReason.ANSWERED)),
        PutTask(task(5, ru="ru2", created=T0 - 90, closed=T0 - 60, reason=CloseReason.EXPIRED)),
    ])
    assert [t.task_id for t in await store.open_tasks("tu1")] == ["t-2", "t-1"]  # by deadline
    assert [t.task_id for t in await store.open_tasks()] == ["t-2", "t-3", "t-1"]
    t1 = await store.task("t-1")
    assert t1 == task(1, created=T0, deadline=T0 + 300, vip="green", meta={"answer_by": "mail"})
    assert await store.task("nope") is None
    # history: open, or closed at/after `since`
    assert [t.task_id for t in await store.tasks_for("tu1", T0 - 400)] == ["t-5", "t-1", "t-2"]
    assert [t.task_id for t in await store.tasks_for("tu1", T0 - 1000)] == \
        ["t-4", "t-5", "t-1", "t-2"]
    assert [t.task_id for t in await store.tasks_for("tu1", 0, ru="ru2")] == ["t-5"]
    assert [t.task_id for t in await store.tasks_for("tu1", 0, type=TaskType.LIKE)] == ["t-2"]
    # closing = upsert of the same id
    closed = task(2, created=T0 + 1, deadline=T0 + 100, type=TaskType.LIKE, closed=T0 + 50,
                  reason=CloseReason.SUPERSEDED)
    await store.commit([PutTask(closed)])
    assert [t.task_id for t in await store.open_tasks("tu1")] == ["t-1"]
    got = await store.task("t-2")
    assert got == closed and got.reason is CloseReason.SUPERSEDED and got.type is TaskType.LIKE
    await store.commit([PruneTasks(T0 - 60)])  # t-4 closed before; t-5 closed exactly then stays
    assert await store.task("t-4") is None and await store.task("t-5") is not None


async def test_favorites_state_sessions_meta(store):
    fav = Favorite(ru="ru1", active=True, is_white=False, markers={"followUpChat": {"step": 1}})
    fav2, fav3 = Favorite(ru="ru2", spend_30d_usd=1.5), Favorite(ru="ru1", chat_limit=2)
    await store.commit([
        PutFavorite("tu1", "ru1", "golden", fav), PutFavorite("tu1", "ru2", "golden", fav2),
        PutFavorite("tu2", "ru1", "prime", fav3),
        PutState("tu1", "chains", "ru1", {"step": 0, "nextCheckAt": T0}),
        PutState("tu1", "chains", "ru2", [1, 2]), PutState("tu1", "timers", "x", 5.5),
        PutState("tu2", "chains", "ru1", None),
        PutSession("tu2", "prime", "op-2", T0), PutSession("tu1", "golden", "op-1", T0 + 1),
        PutMeta("k", "v"),
    ])
    assert await store.favorites("tu1") == {"ru1": fav, "ru2": fav2}
    assert await store.states("tu1", "chains") == {"ru1": {"step": 0, "nextCheckAt": T0},
                                                   "ru2": [1, 2]}
    assert await store.state("tu2", "chains", "ru1", "dflt") is None
    assert await store.state("tu2", "chains", "zz", "dflt") == "dflt"
    assert await store.sessions() == [SessionRow(tu="tu1", project="golden", operator="op-1",
                                                 logged_in_at=T0 + 1),
                                      SessionRow(tu="tu2", project="prime", operator="op-2",
                                                 logged_in_at=T0)]
    await store.commit([
        DeleteFavorite("tu1", "ru2"), DeleteFavorite("tu1", "missing"),
        PutState("tu1", "chains", "ru1", {"step": 1}),  # last write in the batch wins
        DeleteState("tu1", "chains", "ru2"), DeleteStateScope("tu1", "timers"),
        DeleteSession("tu2"), PutSession("tu1", "golden", "op-3", T0 + 9),
    ])
    assert await store.favorites("tu1") == {"ru1": fav}
    assert await store.favorites("tu2") == {"ru1": fav3}
    assert await store.states("tu1", "chains") == {"ru1": {"step": 1}}
    assert await store.states("tu1", "timers") == {}
    assert await store.states("tu2", "chains") == {"ru1": None}
    assert [(s.tu, s.operator) for s in await store.sessions()] == [("tu1", "op-3")]
    assert await store.meta("k") == "v" and await store.meta("x") is None


async def test_all_states_returns_every_scope_of_the_tu(store):
    """A login loads every durable service-state scope of the TU — a service that adds a scope
    (Follow-up mail's pending triggers) is restored without a list to keep in step (the list
    ``("passes", "contact")`` once left its rows unread after a crash)."""
    await store.commit([PutState("tu1", "passes", "open_limits_cursor", 3),
                        PutState("tu1", "follow_up_mail", '["burst","ru1","u-1"]', {"ru": "ru1", "at": T0}),
                        PutState("tu2", "contact", "ru1", [None, None, None])])
    assert await store.all_states("tu1") == {
        "follow_up_mail": {'["burst","ru1","u-1"]': {"ru": "ru1", "at": T0}},
        "passes": {"open_limits_cursor": 3}}
    assert await store.all_states("tu3") == {}


async def test_ops_are_a_tagged_union():
    ops = [PutTask(task(1)), PutState("tu", "s", "k", {"a": [1]}), PruneTasks(T0),
           DeleteStateScope("tu", "s")]
    raw = msgspec.json.encode(ops)
    assert msgspec.json.decode(raw, type=list[AnyOp]) == ops
    assert b'"type":"PutTask"' in raw


async def test_closed_store(tmp_path):
    s = await Store.open(tmp_path / "s.db")
    await s.close()
    assert s.closed
    with pytest.raises(StoreError):
        await s.commit([PutMeta("a", "b")])
    with pytest.raises(StoreError):
        await s.meta("a")
    await s.commit([])  # an empty step never touches the database


async def test_a_favorite_row_is_stored_compact_and_read_back_as_one_frozen_value(store, caplog):
    """Favorites are converted once at the store's edge (issue 12): written as JSON without the
    unknown attributes, read straight into :class:`Favorite`; an unreadable row is logged and
    left out (Stack's startup data lists the favorite again), it never fails the login."""
    import logging

    fav = Favorite(ru="ru1", project="golden", active=True, markers={"followUpChat": None})
    await store.commit([PutFavorite("tu1", "ru1", "golden", fav)])
    raw = await store._run(lambda c: c.execute("SELECT data FROM favorites").fetchone()[0])
    assert msgspec.json.decode(raw) == {"ru": "ru1", "project": "golden", "active": True,
                                        "markers": {"followUpChat": None}}
    c = sqlite3.connect(store.path, isolation_level=None)  # a row written by hand
    try:
        c.execute("INSERT INTO favorites (tu, ru, project, data)"
                  " VALUES ('tu1', 'ru2', 'golden', '{\"active\": 3}')")
    finally:
        c.close()
    with caplog.at_level(logging.WARNING, "sidecar.store"):
        got = await store.favorites("tu1")
    assert got == {"ru1": fav} and type(got["ru1"]) is Favorite
    assert "tu1/ru2 is unreadable" in caplog.text
