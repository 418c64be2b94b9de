"""Durable state: SQLite (WAL), one transaction per runtime step, the Stack outbox (DESIGN §9)."""
from .db import Store
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
