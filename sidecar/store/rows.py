"""Read models: what the store's readers return (architecture "Store API").

Rules
-----
* Readers return domain values (``domain.tasks.Task``) or the frozen rows below; JSON columns come
  back decoded (msgspec JSON → builtins).  Times are unix seconds UTC floats.
* Column order in the ``*_COLUMNS`` strings and the ``*_from_row`` functions must match.
"""
from __future__ import annotations

import msgspec

from sidecar.domain.tasks import CloseReason, Task, TaskType

decode_json = msgspec.json.Decoder().decode


class OutboxRow(msgspec.Struct, frozen=True, kw_only=True):
    """One queued Stack write (DESIGN §9)."""

    id: int  # AUTOINCREMENT: queue order, never reused
    pair: str  # ordering lane, "tu/ru": writes of one pair are delivered in id order
    idem_key: str  # Idempotency-Key header; UNIQUE in the queue
    method: str  # "PUT" | "POST"
    path: str  # e.g. "/v1/tus/{tu}/tasks"
    body: bytes  # JSON request body
    kind: str  # "marker" | "task" | "candidate" | ...
    created_at: float  # when it was enqueued
    attempts: int  # failed attempts so far
    next_at: float  # not sent before this instant
    last_error: str | None = None
    tu: str | None = None  # the TU the write is about (schema v5)
    ru: str | None = None  # the RU the write is about
    marker: str | None = None  # a marker write: the marker's name


class SessionRow(msgspec.Struct, frozen=True, kw_only=True):
    """A logged-in TU."""

    tu: str
    project: str
    operator: str
    logged_in_at: float


TASK_COLUMNS = ("task_id, tu, project, ru, type, source, created_at, deadline, closed_at, reason,"
                " vip, meta")
OUTBOX_COLUMNS = ("id, pair, idem_key, method, path, body, kind, created_at, attempts, next_at,"
                  " last_error, tu, ru, marker")


def task_from_row(r: tuple) -> Task:
    return Task(task_id=r[0], tu=r[1], project=r[2], ru=r[3], type=TaskType(r[4]), source=r[5],
                created_at=r[6], deadline=r[7], closed_at=r[8],
                reason=None if r[9] is None else CloseReason(r[9]), vip=r[10],
                meta=decode_json(r[11]))


def outbox_from_row(r: tuple) -> OutboxRow:
    return OutboxRow(id=r[0], pair=r[1], idem_key=r[2], method=r[3], path=r[4], body=bytes(r[5]),
                     kind=r[6], created_at=r[7], attempts=r[8], next_at=r[9], last_error=r[10],
                     tu=r[11], ru=r[12], marker=r[13])
