"""Stack sync: HTTP client and write builders (DESIGN §9, §10); the writes are delivered by the
router's ``stack`` channel (:mod:`sidecar.router.io.channels`, :mod:`sidecar.router.io.pump`).

The HTTP client (httpx, asyncio) is imported on first use: the sans-I/O services
import ``sidecar.stack.writes`` and must not pull them in (tests/test_imports.py)."""
from typing import TYPE_CHECKING, Any

from .errors import StackError, StackRejected, StackUnavailable
from .writes import (StackWrite, candidate, followup_chat_key, followup_mail_key, marker_key,
                     marker_write, pair_of, task_body, task_event)

__all__ = [
    "StackClient", "StackReply", "StackError", "StackUnavailable", "StackRejected",
    "StackWrite", "candidate", "followup_chat_key",
    "followup_mail_key", "marker_key", "marker_write", "pair_of", "task_body", "task_event",
]


if TYPE_CHECKING:
    from .client import StackClient, StackReply

_LAZY = {"StackClient": "client", "StackReply": "client"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib
        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
