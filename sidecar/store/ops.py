"""Write ops: what a step asks the store to persist (DESIGN §9; architecture "Store API").

Rule 1.  A runtime step (one event or one timer, handled by the sans-I/O services) produces a list
         of ops; :meth:`Store.commit` applies the whole list in **one** transaction, so a step is
         either fully on disk or not at all.  A marker change and the router's pending ``stack``
         delivery that tells Stack about it (:mod:`sidecar.router.io.storage`) are two ops of the
         same list, which is how "applied locally and enqueued in the same transaction" (§9) holds.
Rule 2.  Ops are frozen msgspec Structs in a tagged union (tag = class name), so a step can itself
         be encoded, logged or replayed.  Times are unix seconds UTC floats; ``value``/``data`` are
         any msgspec-encodable value and are stored as msgspec JSON text.
Rule 3.  :func:`compile_ops` turns ops into ``(sql, params)`` pairs, outside the database thread;
         every encoding error surfaces there, before the transaction starts.
Rule 4.  Semantics: ``Put*`` are upserts (the last write in a batch wins); ``Delete*`` of a missing
         row is a no-op.
Rule 5.  **A guarded insert** (:class:`Guarded`) is an ``INSERT … SELECT … WHERE NOT (probe)`` whose
         row is skipped when the probe finds a row.  Run as that one statement, SQLite first copies
         the row into a temporary table (its ``SELECT`` reads the table it inserts into), which
         costs more than the insert; so :func:`sidecar.store.writer.apply_plan` runs the probe as
         a ``SELECT`` of its own and then a plain ``INSERT … VALUES``, row by row in plan order —
         the same rows inserted, skipped and numbered as the one statement would.  The
         :class:`Guarded` string itself is that one statement, so whoever runs a plan's SQL as it
         is gets the same result.
"""
from __future__ import annotations

from typing import Any, Callable, Union

import msgspec

from sidecar.domain.favorites import Favorite
from sidecar.domain.tasks import Task

_encode = msgspec.json.Encoder().encode


def to_json(value: Any) -> str:
    """msgspec JSON text for a JSON column."""
    return _encode(value).decode()


class Op(msgspec.Struct, frozen=True, tag=True, gc=False):
    """Base of every write op.  ``gc=False`` (inherited): an op holds plain values and never
    takes part in a reference cycle, so the garbage collector need not track the thousands a
    busy minute makes (GC was ~40 % of the engine's time)."""


class PutTask(Op, frozen=True):
    """Insert or replace a task (open or closed)."""

    task: Task


class PutFavorite(Op, frozen=True):
    """Upsert a favorite; ``data`` is the whole favorite including its markers (stored as JSON
    without its unknown attributes, read back as a :class:`Favorite`)."""

    tu: str
    ru: str
    project: str
    data: Favorite


class DeleteFavorite(Op, frozen=True):
    tu: str
    ru: str


class PutState(Op, frozen=True):
    """Upsert one durable service-state entry; ``scope`` names the service part (``chains``)."""

    tu: str
    scope: str
    key: str
    value: Any


class DeleteState(Op, frozen=True):
    tu: str
    scope: str
    key: str


class DeleteStateScope(Op, frozen=True):
    """Delete every key of ``(tu, scope)``."""

    tu: str
    scope: str


class PutSession(Op, frozen=True):
    """``tu`` is logged in by ``operator`` since ``at`` (unix seconds)."""

    tu: str
    project: str
    operator: str
    at: float


class DeleteSession(Op, frozen=True):
    tu: str


class PruneTasks(Op, frozen=True):
    """Delete tasks closed before ``closed_before`` (keeps "recent task history" recent)."""

    closed_before: float


class PutMeta(Op, frozen=True):
    key: str
    value: str


class PutDecision(Op, frozen=True):
    """Append one decision-log row (DESIGN §13; :mod:`sidecar.runtime.decisions`).  ``at``: unix seconds;
    ``outcome``: ``created`` | ``refused:<reason>`` | ``miss`` | ``removed:<reason>``."""

    tu: str
    ru: str
    at: float
    task_type: str  # ``type`` is the ops union's tag field
    source: str
    outcome: str
    task_id: str | None = None
    detail: dict = {}


class PruneDecisions(Op, frozen=True):
    """Delete decision-log rows older than ``before`` (unix seconds; DESIGN §13: kept 7 days)."""

    before: float


class PutSender(Op, frozen=True):
    """Upsert a sender's health state; ``data`` = the whole state (DESIGN §10, seed 000)."""

    sender: str
    state: str
    cooldown_end: float | None
    data: Any


class AddSenderHistory(Op, frozen=True):
    """Append one sender history row (codes 100–109)."""

    sender: str
    at: float
    code: int
    note: str


class PutGroup(Op, frozen=True):
    """Upsert a sender group; ``priority`` is UNIQUE in the table (seed 000 §6)."""

    id: str
    priority: int
    data: Any


class DeleteGroup(Op, frozen=True):
    """Delete a group and its assignments."""

    id: str


class DeleteAssignments(Op, frozen=True):
    """Remove every group of ``sender`` (followed by ``PutAssignment`` ops to set them)."""

    sender: str


class PutAssignment(Op, frozen=True):
    sender: str
    group_id: str


AnyOp = Union[PutTask, PutFavorite, DeleteFavorite, PutState, DeleteState, DeleteStateScope,
              PutSession, DeleteSession, PruneTasks, PutMeta, PutDecision,
              PruneDecisions, PutSender, AddSenderHistory, PutGroup, DeleteGroup, DeleteAssignments,
              PutAssignment]

_PUT_TASK = (
    "INSERT INTO tasks (task_id, tu, project, ru, type, source, created_at, deadline, closed_at,"
    " reason, vip, meta) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)"
    " ON CONFLICT (task_id) DO UPDATE SET tu=excluded.tu, project=excluded.project,"
    " ru=excluded.ru, type=excluded.type, source=excluded.source, created_at=excluded.created_at,"
    " deadline=excluded.deadline, closed_at=excluded.closed_at, reason=excluded.reason,"
    " vip=excluded.vip, meta=excluded.meta"
)
_PUT_FAVORITE = (
    "INSERT INTO favorites (tu, ru, project, data) VALUES (?,?,?,?)"
    " ON CONFLICT (tu, ru) DO UPDATE SET project=excluded.project, data=excluded.data"
)
_DELETE_FAVORITE = "DELETE FROM favorites WHERE tu=? AND ru=?"
_PUT_STATE = (
    "INSERT INTO service_state (tu, scope, key, value) VALUES (?,?,?,?)"
    " ON CONFLICT (tu, scope, key) DO UPDATE SET value=excluded.value"
)
_DELETE_STATE = "DELETE FROM service_state WHERE tu=? AND scope=? AND key=?"
_DELETE_STATE_SCOPE = "DELETE FROM service_state WHERE tu=? AND scope=?"
_PUT_SESSION = (
    "INSERT INTO sessions (tu, project, operator, logged_in_at) VALUES (?,?,?,?)"
    " ON CONFLICT (tu) DO UPDATE SET project=excluded.project, operator=excluded.operator,"
    " logged_in_at=excluded.logged_in_at"
)
_DELETE_SESSION = "DELETE FROM sessions WHERE tu=?"
_PRUNE = "DELETE FROM tasks WHERE closed_at IS NOT NULL AND closed_at < ?"
_PUT_DECISION = (
    "INSERT INTO decisions (tu, ru, at, type, source, outcome, task_id, detail)"
    " VALUES (?,?,?,?,?,?,?,?)"
)
_PRUNE_DECISIONS = "DELETE FROM decisions WHERE at < ?"
_PUT_META = (
    "INSERT INTO meta (key, value) VALUES (?,?)"
    " ON CONFLICT (key) DO UPDATE SET value=excluded.value"
)
_PUT_SENDER = (
    "INSERT INTO sender_state (sender, state, cooldown_end, data) VALUES (?,?,?,?)"
    " ON CONFLICT (sender) DO UPDATE SET state=excluded.state, cooldown_end=excluded.cooldown_end,"
    " data=excluded.data"
)
_ADD_SENDER_HISTORY = "INSERT INTO sender_history (sender, at, code, note) VALUES (?,?,?,?)"
_PUT_GROUP = (
    "INSERT INTO sender_groups (id, priority, data) VALUES (?,?,?)"
    " ON CONFLICT (id) DO UPDATE SET priority=excluded.priority, data=excluded.data"
)
_DELETE_GROUP = "DELETE FROM sender_groups WHERE id=?"
_DELETE_ASSIGNMENTS = "DELETE FROM sender_assignments WHERE sender=?"
_PUT_ASSIGNMENT = "INSERT OR IGNORE INTO sender_assignments (sender, group_id) VALUES (?,?)"


class Guarded(str):
    """The SQL of a guarded insert (module rules, Rule 5): as a ``str``, the one statement
    ``INSERT … SELECT ?,… WHERE NOT (…)`` whose parameters are the ``width`` values of the row
    and then the probe's; :attr:`insert` the plain ``INSERT … VALUES`` of the first ``width``
    parameters; :attr:`probe` a ``SELECT`` that finds a row when the insert is to be skipped;
    :attr:`guard` maps a row's parameters to the probe's, or to None when the row is not guarded
    (the one statement's condition is false without the probe).  Equal strings are equal
    guarded inserts: the plan merges consecutive ops by the identity of their SQL."""

    insert: str
    probe: str
    width: int
    guard: Callable[[tuple], tuple | None]

    def __new__(cls, sql: str, *, insert: str, probe: str, width: int,
                guard: Callable[[tuple], tuple | None]) -> "Guarded":
        self = super().__new__(cls, sql)
        self.insert, self.probe, self.width, self.guard = insert, probe, width, guard
        return self


def _val(x: Any) -> Any:
    return getattr(x, "value", x)  # str enums → their plain value


def _task(op: PutTask) -> tuple:
    t = op.task
    return (t.task_id, t.tu, t.project, t.ru, _val(t.type), t.source, t.created_at, t.deadline,
            t.closed_at, _val(t.reason), t.vip, to_json(t.meta))


_COMPILERS: dict[type, tuple[str, Callable[[Any], tuple]]] = {
    PutTask: (_PUT_TASK, _task),
    PutFavorite: (_PUT_FAVORITE, lambda o: (o.tu, o.ru, o.project, to_json(o.data))),
    DeleteFavorite: (_DELETE_FAVORITE, lambda o: (o.tu, o.ru)),
    PutState: (_PUT_STATE, lambda o: (o.tu, o.scope, o.key, to_json(o.value))),
    DeleteState: (_DELETE_STATE, lambda o: (o.tu, o.scope, o.key)),
    DeleteStateScope: (_DELETE_STATE_SCOPE, lambda o: (o.tu, o.scope)),
    PutSession: (_PUT_SESSION, lambda o: (o.tu, o.project, o.operator, o.at)),
    DeleteSession: (_DELETE_SESSION, lambda o: (o.tu,)),
    PruneTasks: (_PRUNE, lambda o: (o.closed_before,)),
    PutMeta: (_PUT_META, lambda o: (o.key, o.value)),
    PutDecision: (_PUT_DECISION, lambda o: (o.tu, o.ru, o.at, o.task_type, o.source, o.outcome,
                                            o.task_id, to_json(o.detail))),
    PruneDecisions: (_PRUNE_DECISIONS, lambda o: (o.before,)),
    PutSender: (_PUT_SENDER, lambda o: (o.sender, o.state, o.cooldown_end, to_json(o.data))),
    AddSenderHistory: (_ADD_SENDER_HISTORY, lambda o: (o.sender, o.at, o.code, o.note)),
    PutGroup: (_PUT_GROUP, lambda o: (o.id, o.priority, to_json(o.data))),
    DeleteGroup: (_DELETE_GROUP, lambda o: (o.id,)),
    DeleteAssignments: (_DELETE_ASSIGNMENTS, lambda o: (o.sender,)),
    PutAssignment: (_PUT_ASSIGNMENT, lambda o: (o.sender, o.group_id)),
}


def register(op_type: type, sql: str, params: Callable[[Any], tuple]) -> None:
    """Add the op of a process-wide component (DESIGN §13: the router's tables are its own,
    ``sidecar.router.io.storage``): ``params(op)`` gives the row for ``sql``.  Registering the same
    type again replaces its entry (a module reload)."""
    if not (isinstance(op_type, type) and issubclass(op_type, Op)):
        raise TypeError(f"{op_type!r} is not an Op subclass")
    _COMPILERS[op_type] = (sql, params)


def compile_ops(ops: list[Op]) -> list[tuple[str, list[tuple]]]:
    """``ops`` → ``[(sql, [params, ...]), ...]`` in op order; consecutive ops with the same
    statement share one entry (one ``executemany``).  Raises ``TypeError`` for an unknown op and
    ``msgspec.EncodeError``/``TypeError`` for a value that cannot be encoded."""
    plan: list[tuple[str, list[tuple]]] = []
    last_sql = None
    for op in ops:
        try:
            sql, params = _COMPILERS[type(op)]
        except KeyError:
            raise TypeError(f"not a store op: {op!r}") from None
        row = params(op)
        if sql is last_sql:
            plan[-1][1].append(row)
        else:
            plan.append((sql, [row]))
            last_sql = sql
    return plan
