"""What the router remembers between steps and what one routing decided (DESIGN §10, §13;
seed 002): :class:`RouterState` (rules, dedup keys, throttle windows, the next event number),
:class:`Routing` (new rows and state changes, applied after the commit), :class:`Ahead` (the
open commit group's routings).  The rules of deciding are :mod:`sidecar.router.route`'s.

Rules / theory of operation
---------------------------
* Event ids are ``<prefix><seq>``: ``prefix`` names the data dir (:func:`make_prefix`, drawn
  once when the dir is first used and stored by the runtime), ``seq`` is persisted (``meta`` key
  :data:`SEQ_KEY`), so ids never repeat across restarts or shift changes.  Delivery ids are
  ``<event_id>.<n>`` (n = position in the event's fan-out), the stable ``webhook-id``.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, overload

import msgspec

from sidecar.core.rng import KeyedRandom
from sidecar.store.ops import Op, PutMeta

from .matching import ordered
from .model import STACK_SOURCES, Delivery, Rule
from .ops import PutDedup, PutDelivery, PutThrottle

DEFAULT_DEDUP_WINDOW_S = 86400.0
SEQ_KEY = "router.next_seq"
PREFIX_KEY = "router.prefix"


@dataclass(slots=True)
class RouterState:
    """The router's in-memory state (loaded at start from :mod:`.io.storage`)."""

    prefix: str  # event id prefix of this data dir, e.g. "ev-3f9a-"
    rules: dict[str, Rule] = field(default_factory=dict)  # name -> rule
    dedup: dict[tuple[str, str], float] = field(default_factory=dict)  # (source, key) -> accepted at
    last_real: dict[tuple[str, str], float] = field(default_factory=dict)  # (channel, target) -> at
    seq: int = 1  # next event number
    # (source, key) -> the id of the event accepted with it (a duplicate answers it; seed 002)
    dedup_ids: dict[tuple[str, str], str] = field(default_factory=dict)
    match_mode: str = "all"
    dedup_window_s: float = DEFAULT_DEDUP_WINDOW_S
    # (rules key, ordered rules, reachable sources) of :meth:`plan`; never compared or copied
    _plan: Any = field(default=None, init=False, repr=False, compare=False)

    @classmethod
    def restore(cls, prefix: str, loaded: Any, *, match_mode: str = "all",
                dedup_window_s: float = DEFAULT_DEDUP_WINDOW_S) -> "RouterState":
        """The state after a start: ``loaded`` is :func:`sidecar.router.io.storage.load`'s answer."""
        return cls(prefix=prefix, rules=dict(loaded.rules), dedup=dict(loaded.dedup),
                   last_real=dict(loaded.last_real), seq=loaded.next_seq, match_mode=match_mode,
                   dedup_window_s=dedup_window_s, dedup_ids=dict(loaded.dedup_ids))

    def apply(self, routing: "Routing") -> None:
        """Evolve after the routing's ops were committed."""
        if routing.dedup:
            self.dedup.update(routing.dedup)
            self.dedup_ids.update(routing.dedup_ids)
        if routing.last_real:
            self.last_real.update(routing.last_real)
        if routing.next_seq > self.seq:
            self.seq = routing.next_seq
        if routing.prefix is not None:
            self.prefix = routing.prefix

    def plan(self) -> "tuple[list[Rule], frozenset[str]]":
        """The rules in application order and the Stack sources no enabled rule can reach
        (their writes take :func:`route`'s direct path; none when a rule has no ``source``
        condition), worked out once per rule set — not per routing.
        Recomputed whenever ``rules`` holds other values (a rule created, patched, deleted or
        the dict replaced)."""
        key = tuple(self.rules.values())
        cached = self._plan
        if cached is not None and cached[0] == key:  # identity per rule: frozen values
            return cached[1], cached[2]
        rules = ordered(key)
        enabled = [r.conditions.source for r in rules if r.enabled]
        direct = frozenset() if None in enabled else frozenset(STACK_SOURCES).difference(enabled)
        self._plan = (key, rules, direct)
        return rules, direct

    def prune(self, now: float) -> None:
        """Forget dedup keys whose window has passed (the store prunes its rows likewise)."""
        for k in [k for k, at in self.dedup.items() if now >= at + self.dedup_window_s]:
            del self.dedup[k]
            self.dedup_ids.pop(k, None)


class Routing(msgspec.Struct):
    """What :func:`route` decided: new rows and state changes (apply after commit).

    A msgspec Struct built positionally, not a frozen dataclass: one is made per step
    (docs/decisions.md "Keywords vs positions").  Treat it as read-only once
    :func:`route` returned it.  ``pending`` (the rows created ``pending``, in order) and
    ``channels`` (their channels) are worked out once by :func:`route`, when the routing is
    made, not on every read."""

    now: float
    deliveries: tuple[Delivery, ...]
    event_ids: tuple[str, ...]  # one per routed event, in order
    dedup: dict[tuple[str, str], float]
    last_real: dict[tuple[str, str], float]
    next_seq: int
    prefix: str | None = None  # set when this routing drew the data dir's event-id prefix
    pending: tuple[Delivery, ...] = ()  # the rows created pending, in order
    channels: frozenset[str] = frozenset()  # the channels of the pending rows
    dedup_ids: dict[tuple[str, str], str] = {}  # the accepted events' ids of ``dedup``'s keys
    # per routed event, in order: the id of the FIRST event when it is a duplicate (None when it
    # was accepted, or its key predates schema v7) — what ``events.emit`` answers (seed 002);
    # both empty when no event of the routing was a duplicate
    first_ids: tuple[str | None, ...] = ()
    duplicates: tuple[bool, ...] = ()  # per routed event: was it a duplicate

    def ops(self) -> list[Op]:
        """The store ops of this routing, for the step's transaction: the rows, the prefix
        when drawn, dedup keys, throttle windows, the next event number."""
        if not self.event_ids:
            return []
        # map and plain loops, no comprehensions: each of those is a function call on 3.11
        out: list[Op] = list(map(PutDelivery, self.deliveries))
        if self.prefix is not None:
            out.append(PutMeta(PREFIX_KEY, self.prefix))
        if self.dedup:
            for (src, key), at in self.dedup.items():
                out.append(PutDedup(src, key, at, self.dedup_ids.get((src, key))))
        for (ch, tgt), at in self.last_real.items():
            out.append(PutThrottle(ch, tgt, at))
        out.append(PutMeta(SEQ_KEY, str(self.next_seq)))
        return out


class Ahead(Sequence[Routing]):
    """The open commit group's routings, decided and not applied, in order (module rules,
    "Ahead of the state"), with their dedup keys, throttle instants and next event number
    merged as each is appended.  The runtime appends every routing of the group to it."""

    __slots__ = ("_routings", "dedup", "dedup_ids", "last_real", "next_seq")

    def __init__(self) -> None:
        self._routings: list[Routing] = []
        self.dedup: dict[tuple[str, str], float] = {}  # every routing's, later ones winning
        self.dedup_ids: dict[tuple[str, str], str] = {}
        self.last_real: dict[tuple[str, str], float] = {}
        self.next_seq = 0  # the highest next_seq of them (0: none)

    def append(self, routing: Routing) -> None:
        self._routings.append(routing)
        self.dedup.update(routing.dedup)
        self.dedup_ids.update(routing.dedup_ids)
        self.last_real.update(routing.last_real)
        self.next_seq = max(self.next_seq, routing.next_seq)

    def __len__(self) -> int:
        return len(self._routings)

    @overload
    def __getitem__(self, i: int) -> Routing: ...

    @overload
    def __getitem__(self, i: slice) -> Sequence[Routing]: ...

    def __getitem__(self, i: int | slice) -> Routing | Sequence[Routing]:
        return self._routings[i]


def make_prefix(rng: KeyedRandom, created_at: float) -> str:
    """The event-id prefix of a data dir: a keyed draw over (deployment seed, the instant the dir
    was first used, unix seconds), made once and stored by the runtime — two data dirs (a shift
    change on a fresh machine) never share ids, and a replay re-derives the same prefix."""
    return f"ev-{int(rng.unit('router', 'prefix', repr(created_at)) * (1 << 32)):08x}-"
