"""Matching an event against the rules (DESIGN §10; seed 002 ``_rule_matches``,
``_payload_matches``, ``ROUTING_MATCH_MODE``); :mod:`sidecar.router.route` routes with it.

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
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from .model import RANK, STACK_SOURCES, RoutingEvent, Rule

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


def rule_matches(rule: Rule, event: RoutingEvent) -> bool:
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


def matching(rules: Sequence[Rule], event: RoutingEvent, mode: str = "all") -> list[Rule]:
    """The rules that apply to ``event`` under match ``mode`` (``all`` | ``first``), in order.
    Raises ``ValueError`` for an unknown mode."""
    if mode not in MATCH_MODES:
        raise ValueError(f"match mode must be 'all' or 'first', not {mode!r}")
    hits = [r for r in ordered(rules) if rule_matches(r, event)]
    return hits[:1] if mode == "first" else hits


def stack_route(event: RoutingEvent) -> bool:
    """The built-in route: ``markers``/``tasks``/``candidates`` events that carry a Stack write."""
    return event.source in STACK_SOURCES and event.write is not None
