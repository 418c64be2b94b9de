"""Router values: events, rules, deliveries (DESIGN §10; seed 002_a0d232b71a36404f.txt).

Rule 1.  Every value here is a frozen msgspec Struct: a step can encode, log or replay it, and
         nothing routed can be changed behind the router's back.  Times are unix seconds UTC floats.
Rule 2.  An :class:`RoutingEvent` is ``{source, subject, action, priority, payload, dedup_key?,
         ttl_s?}`` (DESIGN §10).  ``write`` is internal: the Stack write a
         ``markers``/``tasks``/``candidates`` event stands for (the built-in Stack route delivers
         exactly that write); Electron's ``events.emit`` can never set it (:func:`parse_event`
         refuses it).
Rule 3.  A :class:`Rule` (seed 002 ``app/models/rules.py``): conditions ``source`` (None = any),
         ``subjects`` / ``actions`` (empty = any), ``priority_min``, ``payload`` (top-level exact
         match; a list value = any-of; a missing key reads as ``null``, seed 002
         ``actual.get(key)``); ``weight`` (smaller first); ``enabled``; ``throttle_seconds``;
         actions ``[{target, template?}]``.  Rules are named; the name is the key.
Rule 4.  A :class:`Delivery` is one row of the audit (``deliveries``): status ``pending``,
         ``delivered``, ``failed``, ``skipped`` or ``duplicate``; ``attempts``, ``next_attempt_at``,
         ``last_error``, the rendered ``message`` (exactly the bytes a channel sends: the text for
         telegram, the JSON body for webhook/journal, the Stack write's body for stack).
Rule 5.  :func:`parse_event` and :func:`parse_rule` turn untrusted dicts (bridge, CLI, scenario)
         into values or raise :class:`RouterInputError` naming the field — nothing is changed on a
         refusal.
"""
from __future__ import annotations

import enum
import re
from typing import Any, Protocol, get_args

import msgspec

from sidecar.domain.errors import InputError
from sidecar.protocol.paging import JS_SAFE_MAX

from sidecar.domain.priority import Priority

#: Priorities in order (seed 002 ``PRIORITY_ORDER``): the wire's Literal is the one list.
PRIORITIES: tuple[str, ...] = get_args(Priority)
RANK = {p: i for i, p in enumerate(PRIORITIES)}
#: Sources the sidecar itself emits; ``events.emit`` may not impersonate them.
OWN_SOURCES = ("markers", "tasks", "candidates", "sidecar")
#: Sources whose events the built-in route delivers to ``stack`` (DESIGN §10).
STACK_SOURCES = ("markers", "tasks", "candidates")
STACK_TARGET = "stack"
CHANNELS = ("stack", "journal", "webhook", "telegram")


class Status(str, enum.Enum):
    PENDING = "pending"
    DELIVERED = "delivered"
    FAILED = "failed"
    SKIPPED = "skipped"
    DUPLICATE = "duplicate"


class RouterInputError(InputError, ValueError):
    """Bad input for the router; ``field`` names the offending field (JSON-RPC -32602 data)."""

    field: str  # always known

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(f"{field}: {message}")


class StackWrite(msgspec.Struct, frozen=True, gc=False):
    """The Stack write a built-in-route event stands for (same fields as
    :class:`sidecar.stack.writes.StackWrite`, which the integration converts).  Not
    ``kw_only``: :mod:`sidecar.stack.writes` builds two per event positionally (see
    :class:`Delivery`); ``gc=False``: plain values only."""

    pair: str  # ordering lane "tu/ru"
    idem_key: str  # Idempotency-Key
    method: str  # "PUT" | "POST"
    path: str  # request path
    body: bytes  # JSON body
    tu: str | None = None  # the TU and RU the write is about (structured columns of the row:
    ru: str | None = None  # a login reads its unacknowledged markers by them, DESIGN §9)


class PayloadFacts(Protocol):
    """What a Stack write's event keeps instead of its payload dict: its write's body value,
    which can make that dict (:func:`with_payload`)."""

    def payload(self, event: RoutingEvent) -> dict[str, Any]: ...


class RoutingEvent(msgspec.Struct, frozen=True):
    """A routing event (DESIGN §10).  Not ``kw_only``: the Stack writes' events are built
    positionally, in this field order (see :class:`Delivery`).

    ``facts`` (internal, like ``write``): a Stack write's event (:mod:`sidecar.stack.writes`)
    leaves ``payload`` empty and keeps here what its payload is made of.  Only a rule reads a
    payload (conditions, templates, a row's ``tu``), and most steps' writes reach no rule (the
    router's direct path): the router makes the payload, by :func:`with_payload`, only for an
    event a rule can reach — two dicts per created task less (docs/decisions.md "i24-eng4")."""

    source: str
    subject: str
    action: str
    priority: str = "normal"  # low | normal | high | critical
    payload: dict[str, Any] = {}
    dedup_key: str | None = None
    ttl_s: float | None = None  # a delivery not sent within ttl_s of the event is failed at send time
    write: StackWrite | None = None  # internal: the Stack write (STACK_SOURCES only)
    facts: PayloadFacts | None = None  # internal: the payload not made yet (see above)


def with_payload(event: RoutingEvent) -> RoutingEvent:
    """``event`` with its payload made from its ``facts`` (and no ``facts``); an event without
    ``facts`` as is.  What a rule sees of a Stack write's event."""
    facts = event.facts
    if facts is None:
        return event
    return msgspec.structs.replace(event, payload=facts.payload(event), facts=None)


class Action(msgspec.Struct, frozen=True, kw_only=True):
    target: str
    template: str | None = None


class Conditions(msgspec.Struct, frozen=True, kw_only=True):
    source: str | None = None
    subjects: tuple[str, ...] = ()
    actions: tuple[str, ...] = ()
    priority_min: str | None = None
    payload: dict[str, Any] = {}


class Rule(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    conditions: Conditions = Conditions()
    actions: tuple[Action, ...] = ()
    throttle_seconds: float | None = None
    weight: int = 0
    enabled: bool = True


class Delivery(msgspec.Struct, frozen=True, gc=False):
    """One delivery row (see module rules).

    Not ``kw_only``, unlike the other values: the router's direct Stack path (and the store's
    reader) build rows positionally, in this field order (:data:`DELIVERY_FIELDS`), as keywords
    cost several times more (docs/decisions.md "Keywords vs positions").  ``gc=False``: plain values only."""

    id: str  # "<event_id>.<n>": stable per (event, target); the webhook-id
    event_id: str
    event_at: float  # when the router accepted the event
    source: str
    subject: str
    action: str
    priority: str
    rule: str | None  # the rule that made it; None = the built-in Stack route
    channel: str
    target: str
    status: str  # Status value
    message: bytes  # exactly what the channel sends
    attempts: int = 0
    next_attempt_at: float | None = None  # pending only
    expires_at: float | None = None  # event_at + ttl_s
    last_error: str | None = None
    note: str | None = None  # why skipped / duplicate / critical bypass
    delivered_at: float | None = None
    pair: str | None = None  # stack only: ordering lane
    idem_key: str | None = None  # stack only
    method: str | None = None  # stack only
    path: str | None = None  # stack only
    tu: str | None = None  # stack: the TU the write is about; others: the event payload's ``tu``
    #                        (a TU's pending rows are handed over at its logout, DESIGN §9)
    ru: str | None = None  # stack only: the RU the write is about
    seq: int = 0  # insertion order (the store's rowid); 0 before it is stored


#: :class:`Delivery`'s fields in order: what a positional construction must follow
DELIVERY_FIELDS = ("id", "event_id", "event_at", "source", "subject", "action", "priority", "rule",
                   "channel", "target", "status", "message", "attempts", "next_attempt_at",
                   "expires_at", "last_error", "note", "delivered_at", "pair", "idem_key", "method",
                   "path", "tu", "ru", "seq")
assert Delivery.__struct_fields__ == DELIVERY_FIELDS, "positional Delivery(...) calls follow this order"


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _name(v: Any, field: str) -> str:
    """``v`` if it is a name: a non-blank string of at most 200 characters with no control
    character (a NUL or an escape sequence in a rule's name, a source or a ``dedup_key`` would
    reach the journal, the shift lead's terminal and Stack as is; the bridge's other ids refuse
    them too: :data:`sidecar.protocol.patterns.NO_CONTROL`)."""
    if not isinstance(v, str) or not v.strip() or len(v) > 200:
        raise RouterInputError(field, "must be a non-empty string of at most 200 characters")
    if _CONTROL.search(v):
        raise RouterInputError(field, "must not hold control characters")
    return v


def _priority(v: Any, field: str) -> str:
    """``v`` if it names a priority.  A list or an object is refused like any other non-name
    (``v in RANK`` would raise TypeError on one: a -32603)."""
    if v is None:
        raise RouterInputError(field, f"must be one of {', '.join(PRIORITIES)} (null given)")
    if not isinstance(v, str) or v not in RANK:
        raise RouterInputError(field, f"must be one of {', '.join(PRIORITIES)}, not {v!r}")
    return str(v)


def _names(v: Any, field: str) -> tuple[str, ...]:
    if v is None:
        return ()
    if not isinstance(v, (list, tuple)):
        raise RouterInputError(field, "must be a list of strings")
    return tuple(_name(x, f"{field}[{i}]") for i, x in enumerate(v))


def parse_event(data: Any, *, external: bool = True) -> RoutingEvent:
    """An :class:`RoutingEvent` from a dict; ``external`` (``events.emit``): the sidecar's own sources
    and ``write`` are refused.  Raises :class:`RouterInputError`."""
    if not isinstance(data, dict):
        raise RouterInputError("event", "must be an object")
    unknown = set(data) - {"source", "subject", "action", "priority", "payload", "dedup_key", "ttl_s"}
    if unknown:
        raise RouterInputError(sorted(unknown)[0], "unknown field")
    source = _name(data.get("source"), "source")
    if external and source in OWN_SOURCES:
        raise RouterInputError("source", f"{source!r} is the sidecar's own source")
    payload = data.get("payload", {})
    if payload is None:
        payload = {}
    if not isinstance(payload, dict):
        raise RouterInputError("payload", "must be an object")
    try:
        msgspec.json.encode(payload)
    except (TypeError, msgspec.EncodeError) as exc:
        raise RouterInputError("payload", f"not JSON: {exc}") from None
    dedup = data.get("dedup_key")
    if dedup is not None:
        dedup = _name(dedup, "dedup_key")
    ttl = data.get("ttl_s")
    if ttl is not None and (isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or not ttl > 0
                            or ttl != ttl or ttl == float("inf")):
        raise RouterInputError("ttl_s", "must be a positive finite number of seconds")
    return RoutingEvent(source=source, subject=_name(data.get("subject"), "subject"),
                 action=_name(data.get("action"), "action"),
                 priority=_priority(data.get("priority", "normal"), "priority"),
                 payload=payload, dedup_key=dedup, ttl_s=None if ttl is None else float(ttl))


RULE_FIELDS = ("name", "conditions", "actions", "throttle_seconds", "weight", "enabled")


MAX_ACTIONS = 50
MAX_TEMPLATE = 4096  # the rendered text is cut at 4096 characters too

def parse_rule(data: Any, targets: dict[str, str] | None = None) -> Rule:
    """A :class:`Rule` from a dict (``targets``: known target name → channel; None = not
    checked).  Raises :class:`RouterInputError` naming the field."""
    if not isinstance(data, dict):
        raise RouterInputError("rule", "must be an object")
    unknown = set(data) - set(RULE_FIELDS)
    if unknown:
        raise RouterInputError(sorted(unknown)[0], "unknown field")
    cond = data.get("conditions") or {}
    if not isinstance(cond, dict):
        raise RouterInputError("conditions", "must be an object")
    bad = set(cond) - {"source", "subjects", "actions", "priority_min", "payload"}
    if bad:
        raise RouterInputError(f"conditions.{sorted(bad)[0]}", "unknown condition")
    source = cond.get("source")
    pmin = cond.get("priority_min")
    payload = cond.get("payload") or {}
    if not isinstance(payload, dict):
        raise RouterInputError("conditions.payload", "must be an object")
    conditions = Conditions(
        source=None if source is None else _name(source, "conditions.source"),
        subjects=_names(cond.get("subjects"), "conditions.subjects"),
        actions=_names(cond.get("actions"), "conditions.actions"),
        priority_min=None if pmin is None else _priority(pmin, "conditions.priority_min"),
        payload=payload)
    raw_actions = data.get("actions")
    if not isinstance(raw_actions, list) or not raw_actions:
        raise RouterInputError("actions", "must be a non-empty list of {target, template?}")
    if len(raw_actions) > MAX_ACTIONS:  # one event would fan out into that many deliveries
        raise RouterInputError("actions", f"at most {MAX_ACTIONS} actions")
    actions = []
    for i, a in enumerate(raw_actions):
        if not isinstance(a, dict) or set(a) - {"target", "template"}:
            raise RouterInputError(f"actions[{i}]", "must be {target, template?}")
        target = _name(a.get("target"), f"actions[{i}].target")
        if target == STACK_TARGET:
            raise RouterInputError(f"actions[{i}].target",
                                   "stack is reached only through the built-in route")
        if targets is not None and target not in targets:
            raise RouterInputError(f"actions[{i}].target", f"unknown target {target!r}")
        tpl = a.get("template")
        if tpl is not None and not isinstance(tpl, str):
            raise RouterInputError(f"actions[{i}].template", "must be a string")
        if tpl is not None and len(tpl) > MAX_TEMPLATE:  # it rides in every rules.list answer
            raise RouterInputError(f"actions[{i}].template", f"at most {MAX_TEMPLATE} characters")
        actions.append(Action(target=target, template=tpl))
    throttle = data.get("throttle_seconds")
    if throttle is not None and (isinstance(throttle, bool) or not isinstance(throttle, (int, float))
                                 or throttle < 0 or throttle != throttle or throttle == float("inf")):
        raise RouterInputError("throttle_seconds", "must be a finite number of seconds >= 0")
    weight = data.get("weight", 0)
    if isinstance(weight, bool) or not isinstance(weight, int):
        raise RouterInputError("weight", "must be an integer")
    if abs(weight) > JS_SAFE_MAX:  # Electron pages rules.list by [weight, name]: exact in JS
        raise RouterInputError("weight", f"must be within ±{JS_SAFE_MAX} (2^53 - 1)")
    enabled = data.get("enabled", True)
    if not isinstance(enabled, bool):
        raise RouterInputError("enabled", "must be true or false")
    return Rule(name=_name(data.get("name"), "name"), conditions=conditions, actions=tuple(actions),
                throttle_seconds=None if not throttle else float(throttle), weight=weight,
                enabled=enabled)


def rule_dict(rule: Rule) -> dict[str, Any]:
    """A rule as plain JSON-able data (the ``rules.list`` shape and :func:`parse_rule`'s input)."""
    out: dict[str, Any] = msgspec.json.decode(msgspec.json.encode(rule))  # lists, not tuples
    out.setdefault("throttle_seconds", None)
    return out
