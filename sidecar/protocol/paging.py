"""List answers that always fit one websocket frame (a list longer than the bridge's
1 MiB frame cap would close the connection with 1009; docs/decisions.md "Reliability and limits").

Rules / theory of operation
---------------------------
* Every list method pages: ``limit`` (at most :data:`MAX_LIMIT` rows, the params refuse more with
  -32602 naming ``limit``) plus a cursor param, and the answer's ``next`` — the cursor to pass
  to get the rows after this page, or ``null`` when there are none.  A caller reads everything
  by passing ``next`` back until it is ``null``.
* Pages are cut by bytes too: :func:`fit` keeps the longest prefix of the rows whose JSON fits
  in :func:`budget` (the frame cap minus :data:`SLACK` for the JSON-RPC envelope and the
  answer's other fields); a page cut short has a ``next`` like one cut by ``limit``.
* So that a page always holds at least one row, no single row may come near the budget: long
  text fields of a row are cut to :data:`MAX_FIELD` characters in list views (:func:`cut_text`;
  the row says so), and stored values that a list echoes whole (rules) are bounded when they
  are written.
* Every integer a list takes is bounded where it is decoded (:data:`Cursor`, :data:`Limit`,
  :data:`Weight`), so a cursor past SQLite's int64 (or past the integers a JavaScript client
  holds exactly) is refused with -32602 naming the field, never an OverflowError.
  ``limit: null`` means the method's default, as an absent ``limit`` does.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, Any, TypeVar

import msgspec

MAX_LIMIT = 1000  # rows per page
INT64_MAX = 2 ** 63 - 1  # SQLite's INTEGER
JS_SAFE_MAX = 2 ** 53 - 1  # the largest integer a JavaScript number holds exactly

Cursor = Annotated[int, msgspec.Meta(ge=0, le=INT64_MAX)]  # a row id / seq after which to page
Limit = Annotated[int, msgspec.Meta(ge=1, le=MAX_LIMIT)]  # rows per page; None = the default
Weight = Annotated[int, msgspec.Meta(ge=-JS_SAFE_MAX, le=JS_SAFE_MAX)]  # a rule's weight
SLACK = 8192  # bytes kept for the JSON-RPC envelope (id, jsonrpc) and the answer's other fields
MAX_FIELD = 16 * 1024  # characters of one text field of a row in a list view

T = TypeVar("T")
_encode = msgspec.json.Encoder().encode


def budget(max_frame: int) -> int:
    """Bytes a page's rows may take in an answer sent in frames of ``max_frame`` bytes."""
    return max(max_frame - SLACK, 1024)


def fit(rows: Iterable[T], max_bytes: int) -> tuple[list[T], bool]:
    """The longest prefix of ``rows`` whose JSON array takes at most ``max_bytes``, and whether
    a row was left out.  The first row is always kept (rows are bounded: see the module rules)."""
    out: list[T] = []
    size = 2  # "[]"
    for row in rows:
        n = len(_encode(row)) + 1  # the row and its comma
        if out and size + n > max_bytes:
            return out, True
        out.append(row)
        size += n
    return out, False


def cut_text(text: str, limit: int = MAX_FIELD) -> tuple[str, bool]:
    """``text`` cut to ``limit`` characters (ending with ``…``), and whether it was cut."""
    if len(text) <= limit:
        return text, False
    return text[:limit - 1] + "…", True


def page(rows: list[T], limit: int, max_bytes: int, cursor_of: Any) -> tuple[list[T], Any]:
    """A page of ``rows`` (fetched ``limit + 1`` at most, in cursor order): at most ``limit``
    rows, within ``max_bytes``; returns ``(page, next)`` where ``next`` = ``cursor_of(last row)``
    when rows were left (by count or bytes), else ``None``."""
    more = len(rows) > limit
    kept, cut = fit(rows[:limit], max_bytes)
    nxt = cursor_of(kept[-1]) if (more or cut) and kept else None
    return kept, nxt
