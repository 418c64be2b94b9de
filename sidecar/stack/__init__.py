"""Stack sync: HTTP client, write builders and the outbox pump (DESIGN §9, §10)."""
from .client import StackClient, StackReply
from .errors import StackError, StackRejected, StackUnavailable
from .outbox import DEFAULT_LADDER, OutboxPump, PumpResult
from .writes import (StackWrite, candidate, followup_chat_key, followup_mail_key, marker_key,
                     marker_write, pair_of, task_body, task_event)

__all__ = [
    "StackClient", "StackReply", "StackError", "StackUnavailable", "StackRejected",
    "OutboxPump", "PumpResult", "DEFAULT_LADDER", "StackWrite", "candidate", "followup_chat_key",
    "followup_mail_key", "marker_key", "marker_write", "pair_of", "task_body", "task_event",
]
