"""Keyed harness randomness and the task table as the harness reads DESIGN §6 on its own.

Rules / theory of operation
---------------------------
* Every harness draw (the operator model, Stack's ``error_rate``) is a pure function of the
  scenario header's ``seed`` and a stable key, e.g. ``(task_id, "answer")`` or ``(idem_key,
  attempt)``: a BLAKE2b digest, never a running RNG stream.  So a run with crashes and a run
  without draw the same operator decision for the same task, and a retried Stack write sees the
  same fault decision for the same attempt number.
* :data:`TTL_S` and :data:`CHANNEL` copy DESIGN §6 independently of ``sidecar.domain.tasks`` on
  purpose: the consistency checks must not trust the code they check.
"""
from __future__ import annotations

import hashlib
import struct

TTL_S: dict[str, float] = {
    "unanswered_message": 120, "unanswered_mail": 600, "unanswered_email": 43200,
    "follow_up_message": 300, "follow_up_mail": 900, "open_limits": 300,
    "open_limits_captcha": 300, "like": 300,
}
CHANNEL: dict[str, str] = {
    "unanswered_message": "chat", "unanswered_mail": "mail", "unanswered_email": "email",
    "follow_up_message": "chat", "follow_up_mail": "mail", "open_limits": "chat",
    "open_limits_captcha": "chat", "like": "chat",
}


def channel_of(task_type: str, meta: dict | None = None) -> str:
    """The channel a task is answered on; a Like with ``meta.answer_by == "mail"`` is mail."""
    if (meta or {}).get("answer_by") == "mail":
        return "mail"
    return CHANNEL.get(task_type, "chat")


def unit(seed: int | str, *key: object) -> float:
    """A float in [0, 1) from ``(seed, *key)``."""
    h = hashlib.blake2b(digest_size=8, person=b"electron-stub")
    h.update(str(seed).encode())
    for k in key:
        h.update(b"\x1f" + str(k).encode())
    (n,) = struct.unpack(">Q", h.digest())
    return (n >> 11) / float(1 << 53)


def uniform(seed: int | str, lo: float, hi: float, *key: object) -> float:
    """U(lo, hi) keyed by ``(seed, *key)``; ``lo == hi`` gives ``lo``."""
    return lo + (hi - lo) * unit(seed, *key)


def chance(seed: int | str, p: float, *key: object) -> bool:
    """True with probability ``p`` (p >= 1 always, p <= 0 never)."""
    if p >= 1.0:
        return True
    if p <= 0.0:
        return False
    return unit(seed, *key) < p


def vip_tier(spend_30d_usd: float | None) -> str | None:
    """DESIGN §2: red >= 300 $, yellow >= 600 $, green >= 900 $ (30-day spend)."""
    s = spend_30d_usd or 0.0
    return "green" if s >= 900 else "yellow" if s >= 600 else "red" if s >= 300 else None
