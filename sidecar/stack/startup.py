"""Stack's startup data, validated (DESIGN §9 "Restore on login").

Rules / theory of operation
---------------------------
* ``GET /v1/tus/{tu}/startup`` → ``{"favorites": [...], "history": [...]}``; times in unix seconds.
* ``favorites`` missing or ``null``: Stack has **no list** for the TU (DESIGN §9, §12.5; seed 003
  question 5 «бутстрап першого запуску TU все одно звідкись треба брати») — :attr:`Startup.favorites`
  is None, which the login makes visible (:mod:`sidecar.runtime.no_favorites`); ``[]`` is an
  empty list.  Any other non-list value is unusable, as before.
* Each favorite and each history row is checked on its own against the Structs below; a row that
  does not match is skipped and counted (a bad row must not make a TU impossible to log in, and
  must not poison later events of that RU with wrongly typed attributes).  An answer that is not
  such an object at all is unusable: login restores from local state, as for a Stack outage.
* A favorite row becomes the runtime's frozen :class:`~sidecar.domain.favorites.Favorite` here,
  once (:func:`favorite_of`), with Stack's defaults for what the row leaves out (active, not
  white, not blocked).
"""
from __future__ import annotations

import logging
from typing import Any

import msgspec

from sidecar.domain.favorites import Favorite
from sidecar.domain.tasks import HistoryRow

log = logging.getLogger("sidecar.stack.startup")


class StartupFavorite(msgspec.Struct, kw_only=True):
    """A favorite row as Stack sends it; absent members take Stack's defaults."""

    ru: str
    project: str | None = None
    active: bool = True
    is_white: bool = False
    spend_30d_usd: float | None = None
    spend_total_usd: float | None = None
    paid_actions: int | None = None
    paid_with_bonuses_only: bool = False
    chat_limit: int | None = None
    mail_limit: int | None = None
    blocked_by_tu: bool = False
    blocked_by_ru: bool = False
    markers: dict[str, Any] = {}


class StartupTask(msgspec.Struct, kw_only=True):
    task_id: str
    type: str
    ru: str
    created_at: float
    source: str = ""
    closed_at: float | None = None
    reason: str | None = None
    deadline: float | None = None
    vip: str | None = None


class Startup(msgspec.Struct, frozen=True):
    favorites: list[Favorite] | None  # validated favorites; None: Stack has no list for the TU
    history: list[HistoryRow]  # validated task history rows
    skipped: int  # rows that did not match and were left out


def favorite_of(row: Any) -> Favorite:
    """One startup favorite row (a JSON object) as a :class:`Favorite`; msgspec.ValidationError
    when it does not match :class:`StartupFavorite`."""
    fav = msgspec.convert(row, StartupFavorite)
    return Favorite(ru=fav.ru, project=fav.project, active=fav.active, is_white=fav.is_white,
                    spend_30d_usd=fav.spend_30d_usd, spend_total_usd=fav.spend_total_usd,
                    paid_actions=fav.paid_actions,
                    paid_with_bonuses_only=fav.paid_with_bonuses_only,
                    chat_limit=fav.chat_limit, mail_limit=fav.mail_limit,
                    blocked_by_tu=fav.blocked_by_tu, blocked_by_ru=fav.blocked_by_ru,
                    markers=fav.markers)


def parse_startup(tu: str, data: Any) -> Startup | None:
    """Validate ``data``; None when it is unusable as a whole (see module rules)."""
    if not isinstance(data, dict):
        return None
    favs: Any = data.get("favorites")
    hist = data.get("history", [])
    listed = favs is not None
    if (listed and not isinstance(favs, list)) or not isinstance(hist, list):
        log.warning("Stack startup for %s: favorites/history are not lists; using local state", tu)
        return None
    skipped = 0
    favorites: list[Favorite] = []
    for row in favs or ():
        try:
            fav = favorite_of(row)
        except msgspec.ValidationError as exc:
            skipped += 1
            log.warning("Stack startup for %s: skipping favorite %r: %s", tu, _ident(row, "ru"), exc)
            continue
        if fav.ru:
            favorites.append(fav)
        else:
            skipped += 1
    history: list[HistoryRow] = []
    for row in hist:
        try:
            t = msgspec.convert(row, StartupTask)
            history.append(HistoryRow(task_id=t.task_id, type=t.type, ru=t.ru, source=t.source,
                                      created_at=t.created_at, closed_at=t.closed_at,
                                      reason=t.reason))
        except msgspec.ValidationError as exc:
            skipped += 1
            log.warning("Stack startup for %s: skipping history row %r: %s", tu, _ident(row, "task_id"), exc)
    return Startup(favorites if listed else None, history, skipped)


def _ident(row: Any, key: str) -> Any:
    return row.get(key) if isinstance(row, dict) else type(row).__name__
