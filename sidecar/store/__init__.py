"""Durable state: SQLite (WAL), one transaction per runtime step (DESIGN §9).

``Store`` (aiosqlite) is imported on first use: the sans-I/O engine imports ``sidecar.store.ops``
and must not pull asyncio/aiosqlite in with it (tests/test_imports.py)."""
from typing import TYPE_CHECKING, Any

from .errors import DataDirLocked, MigrationError, SchemaTooNew, StoreError
from .ops import (AnyOp, DeleteFavorite, DeleteSession, DeleteState, DeleteStateScope, Op,
                  PruneDecisions, PruneTasks, PutDecision, PutFavorite, PutMeta, PutSession,
                  PutState, PutTask)
from .rows import SessionRow

__all__ = [
    "Store", "StoreError", "DataDirLocked", "SchemaTooNew", "MigrationError",
    "Op", "AnyOp", "PutTask", "PutFavorite", "DeleteFavorite", "PutState", "DeleteState",
    "DeleteStateScope", "PutSession", "DeleteSession", "PruneTasks",
    "PutMeta", "PutDecision", "PruneDecisions", "SessionRow",
]


if TYPE_CHECKING:
    from .db import Store


def __getattr__(name: str) -> Any:
    if name == "Store":
        from .db import Store
        return Store
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
