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


class SessionRow(msgspec.Struct, frozen=True, kw_only=True):
    """A logged-in TU."""

    tu: str
    project: str
    operator: str
    logged_in_at: float


TASK_COLUMNS = ("task_id, tu, project, ru, type, source, created_at, deadline, closed_at, reason,"
                " vip, meta")


def task_from_row(r: tuple) -> Task:
    return Task(task_id=r[0], tu=r[1], project=r[2], ru=r[3], type=TaskType(r[4]), source=r[5],
                created_at=r[6], deadline=r[7], closed_at=r[8],
                reason=None if r[9] is None else CloseReason(r[9]), vip=r[10],
                meta=decode_json(r[11]))
