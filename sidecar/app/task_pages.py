"""``tasks.list`` one page at a time (DESIGN §4, §6; docs/protocol.md §8).

Rules / theory of operation
---------------------------
* Order: the operator's — :meth:`sidecar.domain.tasks.Task.sort_key` (earliest deadline, then VIP
  tier, then strength; ties by creation, then task id: a total order, DESIGN §6).
* ``limit`` (1..1000) and ``cursor`` (the previous page's ``next_cursor``) ask for a page; the
  answer is ``{"tasks": [...], "next_cursor"?}`` with ``next_cursor`` absent — left out, not null —
  on the last page.  A page also stays under the frame cap (:func:`sidecar.protocol.paging.page`).
* The cursor is the last row's sort key, opaque to the client (base64url of its JSON): a page
  starts after that key, so a task closed between two pages moves no other row, and one created
  meanwhile is on a later page iff it sorts after the cursor.  A task whose deadline moved
  between pages may be met twice or not at all — a client keeps up by the stream's
  ``task.*`` notifications, and re-reads only after a new ``stream_id``.
* A cursor that is not one of ours is -32602 naming ``cursor``; nothing else is read.
* Without ``limit`` and ``cursor`` the answer is the whole list as a bare array (clients of
  protocol 1.0; deprecated: a long list may not fit one frame).
"""
from __future__ import annotations

import base64
from collections.abc import Iterable

import msgspec

from sidecar.app.wire import task_view
from sidecar.domain.errors import InputError
from sidecar.domain.tasks import Task
from sidecar.protocol.answers import TasksPage
from sidecar.protocol.paging import MAX_LIMIT, page

SortKey = tuple[float, int, int, float, str]  # Task.sort_key's shape


def cursor_of(task: Task) -> str:
    """The opaque cursor after ``task``: base64url (no padding) of its sort key's JSON."""
    return base64.urlsafe_b64encode(msgspec.json.encode(task.sort_key())).rstrip(b"=").decode()


def key_of(cursor: str) -> SortKey:
    """The sort key a cursor names; :class:`InputError` (``cursor``) for anything else."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        return msgspec.json.decode(raw, type=SortKey)
    except (ValueError, msgspec.DecodeError):  # binascii.Error is a ValueError
        raise InputError("tasks.list: cursor is not a next_cursor of this list", field="cursor") from None


def tasks_page(tasks: Iterable[Task], limit: int | None, cursor: str | None, max_bytes: int) -> TasksPage:
    """One page of ``tasks`` (already in sort order) after ``cursor``, at most ``limit`` rows
    (None: 1000) within ``max_bytes`` of JSON (module rules)."""
    after = key_of(cursor) if cursor is not None else None
    rows = [t for t in tasks if after is None or t.sort_key() > after]
    size = limit or MAX_LIMIT
    kept, nxt = page(rows[:size + 1], size, max_bytes, cursor_of)
    views = [task_view(t) for t in kept]
    return TasksPage(tasks=views) if nxt is None else TasksPage(tasks=views, next_cursor=nxt)
