"""Follow-up message's judgements on a TU's facts (seed 004; seed 003 "Follow-up message";
DESIGN §6, §7) — pure functions, no service state: whether a pair may have a chain and why none
started, the final check before the Task Factory, and the last chat contact (Golden's
``chat_history`` answer decoded).  :mod:`sidecar.services.follow_up_message` acts on them.

Rules
-----
* Only favorites Stack lists as active, not white and not blocked get chains (DESIGN §6).
* Final check before the Task Factory: a favorite, active, not white, online, no block, no
  stronger (or the same) chat task open for the pair (the one strength table,
  :data:`~sidecar.domain.tasks.STRENGTH`), Chathouse/Prime chat limit — an unknown limit counts
  as absent (``limit_unknown``) and is re-checked when a dialog row carries it.
* Last contact: who wrote last and when, and when the TU last wrote (unix seconds); a Golden
  ``chat_history`` answer is decoded completely before anything changes.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec

from platform_clients.base import list_field
from sidecar.domain.favorites import Favorite, standing_refusal
from sidecar.domain.tasks import TaskType, stronger_or_same

if TYPE_CHECKING:
    from sidecar.runtime.tu import TuRuntime

STRONGER = stronger_or_same(TaskType.FOLLOW_UP_MESSAGE)  # every chat type, itself included


class Contact(msgspec.Struct, gc=False):
    """Who wrote last in the chat and when (unix seconds).  A msgspec Struct (plain values, not
    tracked by the GC), built positionally: one per chat message (a dataclass ``__init__`` is a
    Python call; docs/decisions.md "i24-eng")."""

    last_from: str | None  # "ru" | "tu" | None
    last_at: float | None
    last_tu_at: float | None


def chain_allowed(fav: Favorite | None) -> bool:
    """A pair may have a chain (or the plain check): an active favorite, not white, not blocked."""
    return fav is not None and fav.is_active and not fav.is_white and not fav.blocked


def no_chain_reason(fav: Favorite | None) -> str:
    """Why an answered Unanswered message starts no chain (DESIGN §6 "favorites only", §13)."""
    if fav is None:
        return "not_favorite"
    if fav.blocked:
        return "blocked"
    if fav.is_white:
        return "white"
    return "inactive"


def final_check(rt: TuRuntime, ru: str) -> str | None:
    """DESIGN §7 "Before the Task Factory"; None = pass, else the refusal reason."""
    fav = rt.favorites.get(ru)
    why = standing_refusal(fav)
    if why is not None:
        return why
    assert fav is not None  # refused above
    if fav.blocked:
        return "blocked"
    if ru not in rt.online:
        return "offline"
    for type_ in STRONGER:
        if rt.factory.open_for(rt.tu, ru, type_) is not None:
            return "stronger_task_open"
    if rt.client.has_limits:
        limit = rt.limit(ru, "chat")
        if limit is None:
            return "limit_unknown"  # unknown counts as absent (DESIGN §6)
        if limit <= 0:
            return "no_chat_limit"
    return None


def parse_history(result: Any, asked: set[str]) -> dict[str, Contact]:
    """Golden ``chat_history`` answer → last contact per asked RU.  Decoded completely before
    anything changes; messages without a numeric ``at`` or a ``from`` of ru/tu are skipped;
    BadAnswer when the answer is unusable as a whole."""
    out: dict[str, Contact] = {}
    for dialog in list_field(result, "dialogs", "golden"):
        if not isinstance(dialog, dict) or dialog.get("ru") not in asked:
            continue
        msgs = [m for m in dialog.get("messages") or () if isinstance(m, dict)
                and isinstance(m.get("at"), (int, float)) and not isinstance(m.get("at"), bool)
                and m.get("from") in ("ru", "tu")]
        if msgs:
            last = max(msgs, key=lambda m: m["at"])
            tu_ats = [m["at"] for m in msgs if m["from"] == "tu"]
            out[dialog["ru"]] = Contact(last["from"], float(last["at"]),
                                        float(max(tu_ats)) if tu_ats else None)
        else:
            out[dialog["ru"]] = Contact(None, None, None)
    return out
