"""The wire types of the router's values (DESIGN §10; seed 002 ``app/models/rules.py``): what
``rules.create`` / ``rules.patch`` / ``events.emit`` take (:mod:`sidecar.protocol.inbound`), typed so that
msgspec refuses a wrong JSON type — a list where a priority goes, an integer past int64 — with a
-32602 naming the field before the router sees it (a list ``priority`` once reached ``parse_event``
and answered -32603; docs/decisions.md).  Values (a blank name, an unknown target, a template that
does not compile) are the router's to check (:func:`sidecar.router.model.parse_rule`).
``null`` is the same as absent everywhere but in :class:`RuleChanges`.
"""
from __future__ import annotations

from typing import Any

import msgspec

from sidecar.domain.priority import Priority
from sidecar.protocol.paging import Weight

__all__ = ["Priority", "RuleAction", "RuleConditions", "RuleChanges", "Unset", "UNSET"]

Unset = msgspec.UnsetType
UNSET = msgspec.UNSET


class RuleAction(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """One of a rule's ``actions``: a configured ``target`` and its ``template``?."""

    target: str | None = None
    template: str | None = None


class RuleConditions(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A rule's ``conditions``: absent = any (``payload``: top-level exact match)."""

    source: str | None = None
    subjects: list[str] | None = None
    actions: list[str] | None = None
    priority_min: Priority | None = None
    payload: dict[str, Any] | None = None


class RuleChanges(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """``rules.patch``'s ``changes``: the rule fields present (an absent one keeps its value;
    ``null`` is sent on: ``throttle_seconds: null`` = no throttle).  ``name`` is refused unless
    it is the rule's own (no renames)."""

    name: str | None | Unset = UNSET
    conditions: RuleConditions | None | Unset = UNSET
    actions: list[RuleAction] | None | Unset = UNSET
    throttle_seconds: float | None | Unset = UNSET
    weight: Weight | None | Unset = UNSET
    enabled: bool | None | Unset = UNSET
