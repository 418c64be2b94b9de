"""A favorite (or any pair's) attributes as one frozen value.

Rules / theory of operation
---------------------------
* :class:`Favorite` is what Stack's startup data lists for an RU (DESIGN §6, §9; seed 003
  "фаворитів обчислюємо і тримаємо на своїй стороні") plus what the sidecar learns later: blocks
  and limits from dialog rows and block events (seed 003 "з апі оновлюємо тільки онлайн і хто
  кого заблокував"), ``favorite.update``, and the markers (``favorite.followUpChat`` ...).
  The TU runtime keeps the same type for a non-favorite pair's attributes (blocks, limits).
* Every attribute is ``None`` while unknown, so "never told" stays distinct from "told False"
  exactly as the dicts it replaces did: a change is a value that is not None and differs.
  :attr:`is_active` reads "absent means active" (Stack's default).
* **Frozen**: an update makes a new value (:meth:`updated`, :meth:`with_marker`) and the caller
  replaces only that RU's entry, so unchanged favorites are shared, never copied per pass.
  ``markers`` is never mutated in place either (a new mapping per write).
* A cleared marker is kept as ``None`` (a fact restore must see, DESIGN §7), distinct from a
  marker never written (absent).
* Stored as JSON without the unknown (None) attributes (``omit_defaults``).
* Converted once at the edges: Stack's startup rows (:func:`sidecar.stack.startup.favorite_of`),
  the store's favorite rows (decoded straight into this type), nothing in between.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec


class Favorite(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, gc=False):
    """One RU's attributes for one TU.  Money in USD; ``None``: not known (see module rules).
    ``gc=False``: a frozen value of scalars and one markers mapping, never part of a reference
    cycle, so the garbage collector need not track every favorite of every TU."""

    ru: str
    project: str | None = None  # golden | chathouse | prime
    active: bool | None = None  # Stack lists the favorite as active (None: not said = active)
    is_white: bool | None = None  # whitelisted: never reminded
    spend_30d_usd: float | None = None  # the RU's global 30-day spend (VIP tier)
    spend_total_usd: float | None = None
    paid_actions: int | None = None
    paid_with_bonuses_only: bool | None = None
    chat_limit: int | None = None  # Chathouse/Prime chat limit (None: unknown)
    mail_limit: int | None = None
    blocked_by_tu: bool | None = None
    blocked_by_ru: bool | None = None
    markers: Mapping[str, Any] = {}  # marker name -> value; None = cleared (a fact)

    @property
    def is_active(self) -> bool:
        """Active unless Stack said otherwise (absent means active, DESIGN §6)."""
        return self.active is not False

    @property
    def blocked(self) -> bool:
        """Blocked either way (seed 003 scenario 10)."""
        return bool(self.blocked_by_tu or self.blocked_by_ru)

    def limit(self, channel: str) -> int | None:
        """The ``chat`` / ``mail`` limit, None when unknown; ValueError for another channel."""
        if channel == "chat":
            return self.chat_limit
        if channel == "mail":
            return self.mail_limit
        raise ValueError(f"no limit for channel {channel!r}")

    def updated(self, changes: Mapping[str, Any]) -> "Favorite | None":
        """A new value with ``changes`` applied, or None when nothing changes.  ``None`` values
        are ignored (absent fields keep their value) and ``markers`` only change through
        :meth:`with_marker`; ValueError for a name that is not an attribute (a programming
        error: the edges only pass known fields)."""
        new: dict[str, Any] = {}
        for name, value in changes.items():
            if name == "markers" or value is None:
                continue
            if name not in ATTRIBUTES:
                raise ValueError(f"favorite {self.ru}: unknown attribute {name!r}")
            if getattr(self, name) != value:
                new[name] = value
        return msgspec.structs.replace(self, **new) if new else None

    def marker(self, name: str) -> Any:
        return self.markers.get(name)

    def marker_cleared(self, name: str) -> bool:
        """True when the marker was cleared (a fact), not merely never written (DESIGN §7)."""
        return name in self.markers and self.markers[name] is None

    def with_marker(self, name: str, value: Any) -> "Favorite":
        """A new value with ``markers[name] = value`` (None: cleared, kept as a fact)."""
        return msgspec.structs.replace(self, markers={**self.markers, name: value})


ATTRIBUTES = frozenset(f for f in Favorite.__struct_fields__ if f not in ("ru", "markers"))


def standing_refusal(fav: Favorite | None) -> str | None:
    """The opening of every service's final check (DESIGN §7, seed 001): ``"not_favorite"``,
    ``"inactive"`` or ``"white"`` in that order, None when the favorite may be reminded.  Each
    service goes on with its own checks (freeloader, block, online, stronger tasks)."""
    if fav is None:
        return "not_favorite"
    if not fav.is_active:
        return "inactive"
    if fav.is_white:
        return "white"
    return None


__all__ = ["ATTRIBUTES", "Favorite", "standing_refusal"]
