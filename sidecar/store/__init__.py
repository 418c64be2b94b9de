"""Durable state: SQLite (WAL), one transaction per runtime step, the Stack outbox (DESIGN §9).

``Store`` (aiosqlite) is imported on first use: the sans-I/O engine imports ``sidecar.store.ops``
and must not pull asyncio/aiosqlite in with it (tests/test_imports.py)."""
from typing import TYPE_CHECKING, Any

from .errors import DataDirLocked, MigrationError, SchemaTooNew, StoreError
from .ops import (Ack, AnyOp, DeleteFavorite, DeleteSession, DeleteState, DeleteStateScope,
                  Enqueue, Op, PruneDecisions, PruneTasks, PutDecision, PutFavorite, PutMeta, PutSession, PutState, PutTask,
                  Retry)
from .rows import OutboxRow, SessionRow

__all__ = [
    "Store", "StoreError", "DataDirLocked", "SchemaTooNew", "MigrationError",
    "Op", "AnyOp", "PutTask", "PutFavorite", "DeleteFavorite", "PutState", "DeleteState",
    "DeleteStateScope", "PutSession", "DeleteSession", "Enqueue", "Ack", "Retry", "PruneTasks",
    "PutMeta", "PutDecision", "PruneDecisions", "OutboxRow", "SessionRow",
]


if TYPE_CHECKING:
    from .db import Store


def __getattr__(name: str) -> Any:
    if name == "Store":
        from .db import Store
        return Store
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
