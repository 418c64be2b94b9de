"""Routing an event into delivery rows: matching rules, dedup, throttle (DESIGN §10; seed 002
``ingest``, ``_rule_matches``, ``_payload_matches``, ``_throttled``, ``DEDUP_WINDOW_SECONDS``,
``ROUTING_MATCH_MODE``).

Rules / theory of operation
---------------------------
* A rule matches when it is enabled and every condition it sets holds:
  ``source`` equal (None = any); ``subjects`` / ``actions`` contain the event's (empty = any);
  the event's priority ranks at least ``priority_min`` (low < normal < high < critical);
  ``payload``: for every key of the condition the event's payload HAS that key (a missing key
  does not match, even against a ``null`` condition) and its value equals the condition's — or,
  when the condition's value is a list, equals one of its items (any-of, "host melody or pilar").
  Equality is JSON equality (``1 == 1.0``, but ``True`` is not ``1``).
* Order: by ``weight`` (smaller first), then by name, so the order never depends on when a rule
  was created or loaded.
* Match mode ``all`` (default): every matching rule adds its deliveries; ``first``: only the first
  matching rule by that order (seed 002 ``routing_match_mode``).
* The built-in Stack route is not a rule: :func:`stack_route` says whether an event goes to
  ``stack`` regardless of rules, mode and throttles (Alertmanager's root route).
* Decide / evolve (DESIGN §13): :func:`route` is pure — it reads a :class:`RouterState` and
  returns a :class:`Routing` (the new rows and the state changes) without changing anything.
  The step adds ``routing.ops()`` to its transaction; only after that commit does the runtime
  call ``state.apply(routing)``.  A failed commit therefore leaves memory as it was.
* Several events of one step are routed by ONE call, in order, each seeing the changes of the
  ones before it — so concurrent duplicates (the same ``dedup_key`` twice in a step, or in two
  steps, which the runtime serialises) yield exactly one delivery.
* **Ahead of the state** (group commit, issue 11 item 4): the steps of one commit group are all
  decided before the group's ONE commit, so none is applied yet when the next is decided.
  ``route(..., ahead=routings)`` reads the state as if those routings (decided, not applied, in
  order) had been applied — their dedup keys, throttle windows and event numbers — so a step
  of a group routes exactly as it would alone; the state itself is not touched.  The runtime
  passes an :class:`Ahead`, which merges each routing as it is appended, so the k-th step of a
  group reads one merged view instead of re-merging the k-1 before it (a wall-clock group of a
  few hundred queued events was quadratic; issue 11); any other sequence is merged per call.
* Event ids are ``<prefix><seq>``: ``prefix`` names the data dir (:func:`make_prefix`, drawn
  once when the dir is first used and stored by the runtime), ``seq`` is persisted (``meta`` key
  :data:`SEQ_KEY`), so ids never repeat across restarts or shift changes.  Delivery ids are
  ``<event_id>.<n>`` (n = position in the event's fan-out), the stable ``webhook-id``.
* **Dedup**: an event whose ``(source, dedup_key)`` was accepted less than ``dedup_window_s``
  ago (default 24 h; the window runs from the accepted event, duplicates do not extend it; at
  exactly the window's end the key is accepted again) is a duplicate: each delivery it would
  have made is recorded as ``duplicate`` and nothing is sent.
* **Fan-out**: the built-in Stack route first (``markers``/``tasks``/``candidates`` with a
  Stack write; no rule, mode or throttle touches it), then every matching rule (mode
  ``all``/``first``, above) and each of its actions in order.
* **Throttle** per (channel, target): a rule's ``throttle_seconds`` counts from the last *real*
  delivery to that target (a row created ``pending``, whatever rule made it).  A delivery with
  ``now < last + throttle`` is recorded ``skipped`` with the message it would have sent and does
  not move the window; at exactly ``last + throttle`` it passes.  ``critical`` always passes and
  the row's ``note`` says it bypassed the throttle.
* A template that fails, or a target that is not configured, makes a ``failed`` row at once
  (terminal: DESIGN §10 "a broken template must not park a healthy sender").
* Pending rows are due at once (``next_attempt_at = now``); ``expires_at = now + ttl_s``.
"""
from __future__ import annotations

from collections import ChainMap
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, overload
from dataclasses import dataclass, field

import msgspec

from sidecar.core.rng import KeyedRandom
from sidecar.store.ops import Op, PutMeta

from .model import RANK, STACK_SOURCES, STACK_TARGET, Delivery, Event, Rule, Status
from .budget import EventWork
from .render import TemplateFailure, message_for
from .ops import PutDedup, PutDelivery, PutThrottle

# ---- matching (seed 002 ``_rule_matches``, ``_payload_matches``, ``ROUTING_MATCH_MODE``) -------

MATCH_MODES = ("all", "first")


def _same(a: Any, b: Any) -> bool:
    """JSON equality: bools are not numbers, ints equal floats of the same value."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    return bool(a == b)


def payload_matches(payload: dict[str, Any], wanted: dict[str, Any]) -> bool:
    """Top-level exact match; a list in ``wanted`` means any-of; a missing key never matches."""
    for key, expected in wanted.items():
        if key not in payload:
            return False
        allowed = expected if isinstance(expected, list) else [expected]
        if not any(_same(payload[key], v) for v in allowed):
            return False
    return True


def rule_matches(rule: Rule, event: Event) -> bool:
    if not rule.enabled:
        return False
    c = rule.conditions
    if c.source is not None and c.source != event.source:
        return False
    if c.subjects and event.subject not in c.subjects:
        return False
    if c.actions and event.action not in c.actions:
        return False
    if c.priority_min is not None and RANK.get(event.priority, 0) < RANK[c.priority_min]:
        return False
    return payload_matches(event.payload, c.payload)


def ordered(rules: Iterable[Rule]) -> list[Rule]:
    """Rules in application order: weight, then name."""
    return sorted(rules, key=lambda r: (r.weight, r.name))


def matching(rules: Sequence[Rule], event: Event, mode: str = "all") -> list[Rule]:
    """The rules that apply to ``event`` under match ``mode`` (``all`` | ``first``), in order.
    Raises ``ValueError`` for an unknown mode."""
    if mode not in MATCH_MODES:
        raise ValueError(f"match mode must be 'all' or 'first', not {mode!r}")
    hits = [r for r in ordered(rules) if rule_matches(r, event)]
    return hits[:1] if mode == "first" else hits


def stack_route(event: Event) -> bool:
    """The built-in route: ``markers``/``tasks``/``candidates`` events that carry a Stack write."""
    return event.source in STACK_SOURCES and event.write is not None


# ---- routing ----------------------------------------------------------------------------------

DEFAULT_DEDUP_WINDOW_S = 86400.0
SEQ_KEY = "router.next_seq"
PREFIX_KEY = "router.prefix"


@dataclass(slots=True)
class RouterState:
    """The router's in-memory state (loaded at start from :mod:`.storage`)."""

    prefix: str  # event id prefix of this data dir, e.g. "ev-3f9a-"
    rules: dict[str, Rule] = field(default_factory=dict)  # name -> rule
    dedup: dict[tuple[str, str], float] = field(default_factory=dict)  # (source, key) -> accepted at
    last_real: dict[tuple[str, str], float] = field(default_factory=dict)  # (channel, target) -> at
    seq: int = 1  # next event number
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
                   dedup_window_s=dedup_window_s)

    def apply(self, routing: "Routing") -> None:
        """Evolve after the routing's ops were committed."""
        if routing.dedup:
            self.dedup.update(routing.dedup)
        if routing.last_real:
            self.last_real.update(routing.last_real)
        if routing.next_seq > self.seq:
            self.seq = routing.next_seq
        if routing.prefix is not None:
            self.prefix = routing.prefix

    def plan(self) -> "tuple[list[Rule], frozenset[str]]":
        """The rules in application order and the Stack sources no enabled rule can reach
        (their writes take :func:`route`'s direct path; none when a rule has no ``source``
        condition), worked out once per rule set — not per routing (issue 11 item 5).
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


class Routing(msgspec.Struct):
    """What :func:`route` decided: new rows and state changes (apply after commit).

    A msgspec Struct built positionally, not a frozen dataclass: one is made per step, and a
    frozen dataclass's ``__init__`` (an ``object.__setattr__`` per field) or a Python
    ``__init__`` cost 3–5 k instructions of it (issue 11 item 5).  Treat it as read-only once
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
                out.append(PutDedup(src, key, at))
        for (ch, tgt), at in self.last_real.items():
            out.append(PutThrottle(ch, tgt, at))
        out.append(PutMeta(SEQ_KEY, str(self.next_seq)))
        return out


class Ahead(Sequence[Routing]):
    """The open commit group's routings, decided and not applied, in order (module rules,
    "Ahead of the state"), with their dedup keys, throttle instants and next event number
    merged as each is appended.  The runtime appends every routing of the group to it."""

    __slots__ = ("_routings", "dedup", "last_real", "next_seq")

    def __init__(self) -> None:
        self._routings: list[Routing] = []
        self.dedup: dict[tuple[str, str], float] = {}  # every routing's, later ones winning
        self.last_real: dict[tuple[str, str], float] = {}
        self.next_seq = 0  # the highest next_seq of them (0: none)

    def append(self, routing: Routing) -> None:
        self._routings.append(routing)
        self.dedup.update(routing.dedup)
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


def route(state: RouterState, events: Sequence[Event], now: float,
          targets: Mapping[str, str], ahead: Sequence[Routing] = ()) -> Routing:
    """Route ``events`` at ``now`` (unix seconds).  ``targets``: configured target name →
    channel (``stack`` is always there).  ``ahead``: routings decided but not yet applied, in
    order (module rules).  Pure: see module rules.

    A Stack write no rule can reach (its source is no enabled rule's ``source`` condition, and
    every enabled rule has one) and without a ``dedup_key`` takes the **direct path**: its one
    ``stack`` row is built straight from the write — no rule matching, no render, no throttle
    look-up (the built-in route has none) — the same row, ids and state changes
    :func:`route_general` makes for it (tests/router/test_router_direct.py holds them equal)."""
    return _route(state, events, now, targets, ahead, True)


def route_general(state: RouterState, events: Sequence[Event], now: float,
                  targets: Mapping[str, str], ahead: Sequence[Routing] = ()) -> Routing:
    """:func:`route` with every event through the general rule matching and :func:`_row` — the
    reference the direct path is held equal to."""
    return _route(state, events, now, targets, ahead, False)


_STACK_KEY = (STACK_TARGET, STACK_TARGET)  # (channel, target) of the built-in route's rows
_STACK_ONLY = frozenset((STACK_TARGET,))


def _route(state: RouterState, events: Sequence[Event], now: float,
           targets: Mapping[str, str], ahead: Sequence[Routing], direct: bool) -> Routing:
    plan = state._plan  # state.plan(), its cache read here (one call less per step)
    if plan is not None and plan[0] == tuple(state.rules.values()):
        rules, direct_sources = plan[1], plan[2]
    else:
        rules, direct_sources = state.plan()  # ordered once per rule set
    if direct and direct_sources:
        for event in events:
            if (event.source not in direct_sources or event.write is None
                    or event.dedup_key is not None):
                break
        else:  # every event a Stack write no rule reaches (most steps): rows straight from them
            return _stack_only(state, events, now, ahead)
    else:
        direct_sources = frozenset()
    dedup: dict[tuple[str, str], float] = {}
    last_real: dict[tuple[str, str], float] = {}
    rows: list[Delivery] = []
    pending: list[Delivery] = []
    ids: list[str] = []
    seq = state.seq
    seen: Mapping[tuple[str, str], float] = state.dedup
    real: Mapping[tuple[str, str], float] = state.last_real
    if isinstance(ahead, Ahead) and not ahead._routings:
        pass  # an empty group (its first step): nothing ahead, and no __len__ call to ask
    elif ahead:  # the open group's small dicts over the state's (never copied)
        if isinstance(ahead, Ahead):  # merged as the group grew: read, never written here
            group_dedup, group_real = ahead.dedup, ahead.last_real
            seq = max(seq, ahead.next_seq)
        else:
            group_dedup, group_real = {}, {}
            for r in ahead:
                group_dedup.update(r.dedup)
                group_real.update(r.last_real)
                seq = max(seq, r.next_seq)
        seen, real = ChainMap(group_dedup, state.dedup), ChainMap(group_real, state.last_real)
    if events and state.match_mode not in MATCH_MODES:  # as matching() raises per event
        raise ValueError(f"match mode must be 'all' or 'first', not {state.match_mode!r}")
    first = state.match_mode == "first"
    prefix = state.prefix
    only_stack = True  # every pending row so far is a stack row
    for event in events:
        event_id = f"{prefix}{seq}"
        seq += 1
        ids.append(event_id)
        w = event.write
        source = event.source
        if source in direct_sources and w is not None and event.dedup_key is None:
            # the built-in route alone: _row's pending stack row, built once (module rules)
            # (positional, in DELIVERY_FIELDS order: keywords cost ~5x more, see model.Delivery)
            ttl = event.ttl_s
            row = Delivery(f"{event_id}.0", event_id, now, source, event.subject, event.action,
                           event.priority, None, STACK_TARGET, STACK_TARGET, _PENDING, w.body, 0,
                           now, None if ttl is None else now + ttl, None, None, None, w.pair,
                           w.idem_key, w.method, w.path, w.tu, w.ru)
            rows.append(row)
            pending.append(row)
            last_real[_STACK_KEY] = now
            continue
        duplicate_of: float | None = None
        if event.dedup_key is not None:
            k = (source, event.dedup_key)
            accepted = dedup.get(k, seen.get(k))
            if accepted is not None and now < accepted + state.dedup_window_s:
                duplicate_of = accepted
            else:
                dedup[k] = now
        fan: list[tuple[Rule | None, str, str | None]] = []
        if stack_route(event):
            fan.append((None, STACK_TARGET, None))
        for hit in rules:  # what matching(rules, event, mode) answers, the order taken once
            if rule_matches(hit, event):
                fan.extend((hit, a.target, a.template) for a in hit.actions)
                if first:
                    break
        pool = EventWork()  # the event's renders share it (a fan-out of costly templates)
        for n, (by, target, template) in enumerate(fan):
            channel = "stack" if target == STACK_TARGET else targets.get(target)
            row = _row(event, event_id, n, now, by, target, channel, template, duplicate_of,
                       real, last_real, pool)
            rows.append(row)
            if row.status == _PENDING:
                pending.append(row)
                if row.channel != STACK_TARGET:
                    only_stack = False
    return Routing(now, tuple(rows), tuple(ids), dedup, last_real, seq, None, tuple(pending),
                   (_STACK_ONLY if only_stack else frozenset(d.channel for d in pending))
                   if pending else frozenset())


def _stack_only(state: RouterState, events: Sequence[Event], now: float,
                ahead: Sequence[Routing]) -> Routing:
    """:func:`_route` of a step whose every event takes the direct path: only the event numbers
    of the routings ahead matter (no dedup key, no throttle is read or written but the
    built-in route's own window, ``(stack, stack)``)."""
    if events and state.match_mode not in MATCH_MODES:  # as the general path raises
        raise ValueError(f"match mode must be 'all' or 'first', not {state.match_mode!r}")
    seq = state.seq
    if isinstance(ahead, Ahead):
        if ahead.next_seq > seq:
            seq = ahead.next_seq
    else:
        for r in ahead:
            seq = max(seq, r.next_seq)
    prefix = state.prefix
    rows: list[Delivery] = []
    ids: list[str] = []
    for event in events:
        event_id = f"{prefix}{seq}"
        seq += 1
        ids.append(event_id)
        w = event.write
        assert w is not None  # (checked by the caller)
        ttl = event.ttl_s
        # positional, in DELIVERY_FIELDS order (keywords cost ~5x more, see model.Delivery)
        rows.append(Delivery(f"{event_id}.0", event_id, now, event.source, event.subject,
                             event.action, event.priority, None, STACK_TARGET, STACK_TARGET,
                             _PENDING, w.body, 0, now, None if ttl is None else now + ttl, None,
                             None, None, w.pair, w.idem_key, w.method, w.path, w.tu, w.ru))
    if not rows:
        return Routing(now, (), (), {}, {}, seq, None, (), frozenset())
    out = tuple(rows)
    return Routing(now, out, tuple(ids), {}, {_STACK_KEY: now}, seq, None, out, _STACK_ONLY)


_PENDING, _FAILED = Status.PENDING.value, Status.FAILED.value  # read per row: plain str, not the
_SKIPPED, _DUPLICATE = Status.SKIPPED.value, Status.DUPLICATE.value  # enum's value descriptor


def _row(event: Event, event_id: str, n: int, now: float, rule: Rule | None, target: str,
         channel: str | None, template: str | None, duplicate_of: float | None,
         real: Mapping[tuple[str, str], float], last_real: dict[tuple[str, str], float],
         pool: EventWork | None = None) -> Delivery:
    """One delivery row, its status decided first and the row built once (issue 11 item 5: a
    base row and a copy per delivery cost ~10 % of an event)."""
    status, message, note, last_error = _PENDING, b"", None, None
    next_at = expires = None
    if channel is None:
        status, last_error = _FAILED, f"terminal: bad target {target!r} (not configured)"
    else:
        try:
            message = message_for(channel, event, event_id, now, template, pool)
            error = None
        except TemplateFailure as exc:
            message, error = b"", f"terminal: {exc}"
        if duplicate_of is not None:
            status = _DUPLICATE
            note = f"duplicate: dedup_key {event.dedup_key!r} accepted at {duplicate_of:.3f}"
        else:
            key = (channel, target)
            if rule is not None and rule.throttle_seconds:
                last = last_real.get(key, real.get(key))
                if last is not None and now < last + rule.throttle_seconds:
                    if event.priority != "critical":
                        status = _SKIPPED
                        note = (f"throttled: last delivery to {target} at {last:.3f}, "
                                f"window {rule.throttle_seconds:g} s")
                    else:
                        note = f"critical: bypassed the {rule.throttle_seconds:g} s throttle"
            if status == _PENDING:
                if error is not None:
                    status, note, last_error = _FAILED, None, error
                else:
                    last_real[key] = now
                    next_at = now
                    expires = None if event.ttl_s is None else now + event.ttl_s
    w = event.write if target == STACK_TARGET else None
    if w is None:
        return Delivery(id=f"{event_id}.{n}", event_id=event_id, event_at=now, source=event.source,
                        subject=event.subject, action=event.action, priority=event.priority,
                        rule=None if rule is None else rule.name, target=target,
                        channel=channel or "unknown", status=status, message=message,
                        next_attempt_at=next_at, expires_at=expires, last_error=last_error,
                        note=note)
    return Delivery(id=f"{event_id}.{n}", event_id=event_id, event_at=now, source=event.source,
                    subject=event.subject, action=event.action, priority=event.priority,
                    rule=None if rule is None else rule.name, target=target,
                    channel=channel or "unknown", status=status, message=message,
                    next_attempt_at=next_at, expires_at=expires, last_error=last_error, note=note,
                    pair=w.pair, idem_key=w.idem_key, method=w.method, path=w.path, tu=w.tu,
                    ru=w.ru)
