"""The router as the runtime holds it: routing a step's events, rule management, and the
watch on Stack that raises ``sidecar/stack`` events (DESIGN §10, §13; seed 002).

Rule 1.  Sans-I/O, decide / evolve (DESIGN §13): every method that changes something first returns
         what to commit (store ops, a :class:`~.route.Routing`), and memory changes only in the
         matching ``apply_*`` call made after that commit.  A failed commit therefore leaves the
         router as it was.
Rule 2.  :meth:`Router.decide` is what the step executor calls once per step that emitted events;
         the rows join the step's ONE transaction (the marker change and its ``stack`` delivery land
         together).
Rule 3.  Rules (``rules.create/patch/delete``): :func:`~.model.parse_rule` checks the whole rule
         against the configured targets and raises :class:`~.model.RouterInputError` naming the
         field — nothing is changed.  A rule change never touches the throttle windows (kept per
         target in ``router_throttle``), the dedup keys or a pending row's retry time.
Rule 4.  :class:`StackWatch` turns the pump's Stack outcomes into ``sidecar`` / ``stack`` /
         ``unreachable`` (no Stack write acknowledged for :data:`UNREACHABLE_AFTER_S` while writes
         were due) and ``reachable`` (the first acknowledgement after that), each once per outage.
Rule 5.  :func:`stack_pass` reads a pass's settled Stack rows: a write Stack refused (``failed``
         with Stack's status) raises ``sidecar/stack/refused`` (high) naming key, method, path,
         status and body, and does not feed the watch — Stack answered it, so it is no sign of an
         outage (DESIGN §10 as revised; docs/decisions.md "A refused Stack write").
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from sidecar.core.rng import KeyedRandom
from sidecar.store.ops import Op

from .attempt import Next
from .model import Delivery, RoutingEvent, Rule, RouterInputError, parse_rule, rule_dict
from .render import TemplateFailure, compile_template
from .state import Ahead, Routing, RouterState, make_prefix
from .route import _route, route
from .ops import DeleteRule, PutRule

UNREACHABLE_AFTER_S = 300.0  # DESIGN §10: 5 min of unacknowledged due Stack writes
MAX_RULE_BYTES = 256 * 1024  # one rule as JSON (50 actions of 4096-char templates fit unescaped)


class Router:
    """Routing state + the configured targets (name → channel, ``stack`` included)."""

    def __init__(self, state: RouterState, targets: Mapping[str, str],
                 rng: KeyedRandom | None = None) -> None:
        self.state = state  # ``state.prefix`` "" = not drawn yet: the first routing draws it
        self.targets = dict(targets)
        self.targets.setdefault("stack", "stack")
        self.rng = rng or KeyedRandom(0)

    @classmethod
    def in_memory(cls, prefix: str = "ev-", targets: Mapping[str, str] | None = None) -> "Router":
        """A router with no stored state (unit tests of the runtime)."""
        return cls(RouterState(prefix=prefix), targets or {})

    # events -----------------------------------------------------------------------------------
    def decide(self, events: Sequence[RoutingEvent], now: float, after: Sequence[Routing] = ()) -> Routing:
        """Route ``events`` at ``now`` (unix seconds); commit ``routing.ops()``, then
        :meth:`apply`.  ``after``: the routings of the open commit group's earlier steps, decided
        and not applied yet — this one routes as if they had been (:func:`~.route.route`'s
        ``ahead``).  The data dir's first routing draws its event-id prefix from (seed, that
        instant) and stores it with the rows (:func:`~.route.make_prefix`), so ids never repeat
        across data dirs and a replay re-derives them; a later step of the same group uses the
        prefix that routing drew."""
        state = self.state
        if state.prefix:  # every routing but a data dir's first (the hot path: straight on)
            return _route(state, events, now, self.targets, after, True)
        prefix = next((r.prefix for r in after if r.prefix), "")
        if prefix:
            return route(dataclasses.replace(state, prefix=prefix), events, now, self.targets, after)
        prefix = make_prefix(self.rng, now)
        routing = route(dataclasses.replace(self.state, prefix=prefix), events, now, self.targets, after)
        routing.prefix = prefix  # made just now: nobody else holds it yet
        return routing

    def apply(self, routing: Routing) -> None:
        self.state.apply(routing)

    @staticmethod
    def ahead() -> Ahead:
        """An empty :class:`~.route.Ahead`: the open commit group's routings, for ``decide``'s
        ``after`` (the executor appends each routing of the group to it)."""
        return Ahead()

    # rules ------------------------------------------------------------------------------------
    def rules(self) -> list[dict[str, Any]]:
        """Every rule as data, in application order (weight, then name)."""
        return [rule_dict(r) for r in sorted(self.state.rules.values(), key=lambda r: (r.weight, r.name))]

    def create_rule(self, data: Any, now: float) -> tuple[list[Op], Rule]:
        """A new rule from ``data``; :class:`RouterInputError` (field ``name``) if it exists."""
        rule = self._parse(data)
        if rule.name in self.state.rules:
            raise RouterInputError("name", f"a rule named {rule.name!r} exists; patch it instead")
        return [PutRule(rule, now)], rule

    def patch_rule(self, name: Any, changes: Any, now: float) -> tuple[list[Op], Rule]:
        """``changes`` (any rule field but ``name``) merged over the rule ``name``."""
        old = self._existing(name)
        if changes is None:
            raise RouterInputError("changes", "required: an object of the fields to change")
        if not isinstance(changes, dict):
            raise RouterInputError("changes", "must be an object")
        if "name" in changes and changes["name"] != old.name:
            raise RouterInputError("changes.name", "a rule is not renamed: delete and create it")
        merged = {**rule_dict(old), **changes}
        try:
            rule = self._parse(merged)
        except RouterInputError as exc:
            raise RouterInputError(f"changes.{exc.field}", str(exc).split(": ", 1)[-1]) from None
        return [PutRule(rule, now)], rule

    def _parse(self, data: Any) -> Rule:
        """:func:`parse_rule`, then every template compiled: one that does not compile is bad
        input now (RouterInputError naming ``actions[i].template``), not a failed delivery later.
        A rule is at most :data:`MAX_RULE_BYTES` as JSON (RouterInputError naming ``actions``):
        ``rules.list`` answers whole rules, and a page must fit one websocket frame."""
        rule = parse_rule(data, self.targets)
        size = len(msgspec.json.encode(rule_dict(rule)))
        if size > MAX_RULE_BYTES:
            raise RouterInputError("actions", f"the rule is {size} bytes as JSON; at most {MAX_RULE_BYTES}")
        for i, action in enumerate(rule.actions):
            if action.template is not None:
                try:
                    compile_template(action.template)
                except TemplateFailure as exc:
                    raise RouterInputError(f"actions[{i}].template", str(exc)) from None
        return rule

    def delete_rule(self, name: Any) -> tuple[list[Op], Rule]:
        old = self._existing(name)
        return [DeleteRule(old.name)], old

    def apply_rule(self, rule: Rule, *, deleted: bool = False) -> None:
        if deleted:
            self.state.rules.pop(rule.name, None)
        else:
            self.state.rules[rule.name] = rule

    def _existing(self, name: Any) -> Rule:
        """The rule ``name``; a missing or mistyped name is said so, never printed as ``None``."""
        if name is None:
            raise RouterInputError("name", "required: the name of the rule")
        if not isinstance(name, str):
            raise RouterInputError("name", f"must be a string, not {type(name).__name__}")
        if name not in self.state.rules:
            raise RouterInputError("name", f"no rule named {name!r}")
        return self.state.rules[name]


class StackWatch:
    """Is Stack taking writes?  Fed after every pump pass (see module rules)."""

    def __init__(self) -> None:
        self.waiting_since: float | None = None  # first pass with due writes and no ack
        self.down = False  # ``unreachable`` was raised and no ack came since

    def observe(self, now: float, *, acked: int, failed: int) -> RoutingEvent | None:
        """One pump pass at ``now``: ``acked`` Stack writes delivered, ``failed`` attempts failed.
        Returns the ``sidecar/stack`` event to route, if any."""
        if acked:
            self.waiting_since = None
            if self.down:
                self.down = False
                return _stack_event("reachable", now, None)
            return None
        if not failed:
            return None
        if self.waiting_since is None:
            self.waiting_since = now
        if not self.down and now - self.waiting_since >= UNREACHABLE_AFTER_S:
            self.down = True
            return _stack_event("unreachable", now, self.waiting_since)
        return None


def stack_pass(settled: Sequence[tuple[Delivery, Next]], now: float) -> tuple[int, int, list[RoutingEvent]]:
    """A pump pass's settled rows at ``now`` (unix seconds) → ``(acked, failed, events)`` for
    Stack: writes acknowledged, attempts that failed without a refusal (unanswered, 5xx, 408,
    409 — what :class:`StackWatch` counts; ``held`` and ``flooded`` (429) rows are no attempt) and one
    ``sidecar/stack/refused`` event per write Stack refused (Rule 5).  Other channels' rows are
    skipped."""
    acked = failed = 0
    events: list[RoutingEvent] = []
    for row, nxt in settled:
        if row.channel != "stack":
            continue
        if nxt.status == "delivered":
            acked += 1
        elif nxt.status == "failed":
            events.append(RoutingEvent(source="sidecar", subject="stack", action="refused", priority="high",
                                       payload={"at": now, "key": row.idem_key, "method": row.method,
                                                "path": row.path, "tu": row.tu, "ru": row.ru,
                                                "status": nxt.status_code, "error": nxt.last_error,
                                                "delivery_id": row.id}))
        elif nxt.attempts > row.attempts:  # an attempt that failed (held is not one)
            failed += 1
    return acked, failed, events


def _stack_event(action: str, now: float, since: float | None) -> RoutingEvent:
    payload: dict[str, Any] = {"at": now}
    if since is not None:
        payload["failing_since"] = since
        payload["failing_s"] = round(now - since, 3)
    return RoutingEvent(source="sidecar", subject="stack", action=action, priority="high", payload=payload)
