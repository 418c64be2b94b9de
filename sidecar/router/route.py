"""Routing an event into delivery rows: dedup, throttle, fan-out over the matching rules (DESIGN §10; seed 002
``ingest``, ``_rule_matches``, ``_payload_matches``, ``_throttled``, ``DEDUP_WINDOW_SECONDS``,
``ROUTING_MATCH_MODE``).

Rule 1.  Which rules match an event, in which order, and the built-in Stack route:
         :mod:`sidecar.router.matching`.
Rule 2.  Decide / evolve (DESIGN §13): :func:`route` is pure — it reads a :class:`RouterState` and
         returns a :class:`Routing` (the new rows and the state changes) without changing anything.
         The step adds ``routing.ops()`` to its transaction; only after that commit does the runtime
         call ``state.apply(routing)``.  A failed commit therefore leaves memory as it was.  Several
         events of one step are routed by ONE call, in order, each seeing the changes of the ones
         before it — so concurrent duplicates (the same ``dedup_key`` twice in a step, or in two
         steps, which the runtime serialises) yield exactly one delivery.  **Ahead of the state**
         (group commit): the steps of one commit group are all decided before the group's ONE
         commit, so none is applied yet when the next is decided.  ``route(..., ahead=routings)``
         reads the state as if those routings (decided, not applied, in order) had been applied —
         their dedup keys, throttle windows and event numbers — so a step of a group routes exactly
         as it would alone; the state itself is not touched.  The runtime passes an :class:`Ahead`,
         which merges each routing as it is appended, so the k-th step of a group reads one merged
         view instead of re-merging the k-1 before it (a wall-clock group of a few hundred queued
         events was quadratic); any other sequence is merged per call.
Rule 3.  RoutingEvent ids: :mod:`sidecar.router.state`.  **Dedup**: an event whose ``(source,
         dedup_key)`` was accepted less than ``dedup_window_s`` ago (default 24 h; the window runs
         from the accepted event, duplicates do not extend it; at exactly the window's end the key
         is accepted again) is a duplicate: each delivery it would have made is recorded as
         ``duplicate`` and nothing is sent.
Rule 4.  **Fan-out**: the built-in Stack route first (``markers``/``tasks``/``candidates`` with a
         Stack write; no rule, mode or throttle touches it), then every matching rule (mode
         ``all``/``first``, above) and each of its actions in order.
Rule 5.  **Throttle** per (channel, target): a rule's ``throttle_seconds`` counts from the last
         *real* delivery to that target (a row created ``pending``, whatever rule made it; once that
         row has FAILED the window runs from the latest ``pending``/``delivered`` row instead, or
         not at all — seed 002 ``_throttled``; the app frees it when the row fails,
         ``RouterComponent``).  A delivery with ``now < last + throttle`` is recorded ``skipped``
         with the message it would have sent and does not move the window; at exactly ``last +
         throttle`` it passes.  ``critical`` always passes and the row's ``note`` says it bypassed
         the throttle.  The ``journal`` — seed 002's target-less ``internal_log`` — is never
         throttled (seed 002 ``_throttled`` returns early when ``target_id is None``): a throttled
         rule still writes the audit row a shift lead looks for.
Rule 6.  A template that fails, or a target that is not configured, makes a ``failed`` row at once
         (terminal: DESIGN §10 "a broken template must not park a healthy sender").  Pending rows
         are due at once (``next_attempt_at = now``); ``expires_at = now + ttl_s``.
"""
from __future__ import annotations

from collections import ChainMap
from collections.abc import Mapping, Sequence
from typing import Any

from .model import STACK_TARGET, Delivery, RoutingEvent, Rule, Status, with_payload
from .budget import EventWork
from .render import TemplateFailure, message_for
from .matching import MATCH_MODES, rule_matches, stack_route
from .state import Ahead, RouterState, Routing

def route(state: RouterState, events: Sequence[RoutingEvent], now: float,
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


def route_general(state: RouterState, events: Sequence[RoutingEvent], now: float,
                  targets: Mapping[str, str], ahead: Sequence[Routing] = ()) -> Routing:
    """:func:`route` with every event through the general rule matching and :func:`_row` — the
    reference the direct path is held equal to."""
    return _route(state, events, now, targets, ahead, False)


_STACK_KEY = (STACK_TARGET, STACK_TARGET)  # (channel, target) of the built-in route's rows
_STACK_ONLY = frozenset((STACK_TARGET,))


def _route(state: RouterState, events: Sequence[RoutingEvent], now: float,
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
    dedup_ids: dict[tuple[str, str], str] = {}
    seen_ids: Mapping[tuple[str, str], str] = state.dedup_ids
    first_ids: list[str | None] = []
    dups: list[bool] = []
    real: Mapping[tuple[str, str], float] = state.last_real
    if isinstance(ahead, Ahead) and not ahead._routings:
        pass  # an empty group (its first step): nothing ahead, and no __len__ call to ask
    elif ahead:  # the open group's small dicts over the state's (never copied)
        if isinstance(ahead, Ahead):  # merged as the group grew: read, never written here
            group_dedup, group_real = ahead.dedup, ahead.last_real
            group_ids = ahead.dedup_ids
            seq = max(seq, ahead.next_seq)
        else:
            group_dedup, group_real, group_ids = {}, {}, {}
            for r in ahead:
                group_dedup.update(r.dedup)
                group_ids.update(r.dedup_ids)
                group_real.update(r.last_real)
                seq = max(seq, r.next_seq)
        seen, real = ChainMap(group_dedup, state.dedup), ChainMap(group_real, state.last_real)
        seen_ids = ChainMap(group_ids, state.dedup_ids)
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
            # (positional, in DELIVERY_FIELDS order: see model.Delivery)
            ttl = event.ttl_s
            row = Delivery(f"{event_id}.0", event_id, now, source, event.subject, event.action,
                           event.priority, None, STACK_TARGET, STACK_TARGET, _PENDING, w.body, 0,
                           now, None if ttl is None else now + ttl, None, None, None, w.pair,
                           w.idem_key, w.method, w.path, w.tu, w.ru)
            rows.append(row)
            pending.append(row)
            last_real[_STACK_KEY] = now
            first_ids.append(None)
            dups.append(False)
            continue
        if event.facts is not None:  # a Stack write's event a rule may see: its payload now
            event = with_payload(event)
        duplicate_of: float | None = None
        first_id: str | None = None
        if event.dedup_key is not None:
            k = (source, event.dedup_key)
            accepted = dedup.get(k, seen.get(k))
            if accepted is not None and now < accepted + state.dedup_window_s:
                duplicate_of = accepted
                first_id = dedup_ids.get(k, seen_ids.get(k))
            else:
                dedup[k] = now
                dedup_ids[k] = event_id
        first_ids.append(first_id)
        dups.append(duplicate_of is not None)
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
                   if pending else frozenset(), dedup_ids,
                   # only a step with a duplicate carries them (the direct path never has one)
                   tuple(first_ids) if any(dups) else (), tuple(dups) if any(dups) else ())


def _stack_only(state: RouterState, events: Sequence[RoutingEvent], now: float,
                ahead: Sequence[Routing]) -> Routing:
    """:func:`_route` of a step whose every event takes the direct path: only the event numbers
    of the routings ahead matter (no dedup key, no throttle is read or written but the
    built-in route's own window, ``(stack, stack)``)."""
    if events and state.match_mode not in MATCH_MODES:  # as the general path raises
        raise ValueError(f"match mode must be 'all' or 'first', not {state.match_mode!r}")
    seq = state.seq
    if type(ahead) is Ahead:  # not isinstance: Ahead is a Sequence, an ABC (a Python-level check
        # per call, and a lone step's ``()`` is no Ahead); any other sequence is merged below
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
        # positional, in DELIVERY_FIELDS order (see model.Delivery)
        rows.append(Delivery(f"{event_id}.0", event_id, now, event.source, event.subject,
                             event.action, event.priority, None, STACK_TARGET, STACK_TARGET,
                             _PENDING, w.body, 0, now, None if ttl is None else now + ttl, None,
                             None, None, w.pair, w.idem_key, w.method, w.path, w.tu, w.ru))
    if not rows:
        return Routing(now, (), (), {}, {}, seq, None, (), frozenset())
    out = tuple(rows)
    return Routing(now, out, tuple(ids), {}, {_STACK_KEY: now}, seq, None, out, _STACK_ONLY)


# seed 002 ``_throttled`` returns early for a target-less ``internal_log`` (our journal): never cut
_JOURNAL = "journal"
_PENDING, _FAILED = Status.PENDING.value, Status.FAILED.value  # read per row: plain str, not the
_SKIPPED, _DUPLICATE = Status.SKIPPED.value, Status.DUPLICATE.value  # enum's value descriptor


def _tu_of(payload: Mapping[str, Any]) -> str | None:
    """The TU a non-Stack delivery belongs to: its event payload's ``tu`` when that is a string
    (DESIGN §9 "Handed-over deliveries": a logout hands the TU's pending rows to Stack); None =
    process-wide, it stays with its machine (:mod:`sidecar.router.handover`)."""
    tu = payload.get("tu")
    return tu if isinstance(tu, str) and tu else None


def _row(event: RoutingEvent, event_id: str, n: int, now: float, rule: Rule | None, target: str,
         channel: str | None, template: str | None, duplicate_of: float | None,
         real: Mapping[tuple[str, str], float], last_real: dict[tuple[str, str], float],
         pool: EventWork | None = None) -> Delivery:
    """One delivery row, its status decided first and the row built once (a
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
            if rule is not None and rule.throttle_seconds and channel != _JOURNAL:
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
                        note=note, tu=_tu_of(event.payload))
    return Delivery(id=f"{event_id}.{n}", event_id=event_id, event_at=now, source=event.source,
                    subject=event.subject, action=event.action, priority=event.priority,
                    rule=None if rule is None else rule.name, target=target,
                    channel=channel or "unknown", status=status, message=message,
                    next_attempt_at=next_at, expires_at=expires, last_error=last_error, note=note,
                    pair=w.pair, idem_key=w.idem_key, method=w.method, path=w.path, tu=w.tu,
                    ru=w.ru)
