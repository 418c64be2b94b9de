"""The manage API of seed 000 §6 / DESIGN §10 "Management" as pure functions over a
:class:`Registry`: each returns a new registry (and history rows where a sender changes) or
raises :class:`ManageError` naming the field — nothing is changed on an error.  The bridge and the
CLI only decode params, call one of these and store the result (one transaction).

Operations: ``groups.list/create/get/patch/delete``, ``groups.assignments.set/add/remove``
(sender-centric, ≤ 500 items, each ``{sender, groups: [id…]}``), ``groups.senders.set/add/remove``
(group-centric), ``senders.list/get/history/recover``.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from msgspec.structs import replace as replace_struct

from .groups import STACK_GROUP, Group, GroupError, active_group, group_body, validate_group
from .health import ACTIVE, HealthMachine, History, Recover, SenderState

MAX_ITEMS = 500
STACK = "stack"  # the built-in sender with its own group (DESIGN §10)


class ManageError(ValueError):
    """Bad manage input; ``field`` is the JSON path of the offending field (``items[3].sender``)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass(frozen=True)
class Registry:
    """Groups by id, each sender's group ids, each sender's health state, the history rows."""

    groups: dict[str, Group] = field(default_factory=dict)
    assignments: dict[str, tuple[str, ...]] = field(default_factory=dict)
    senders: dict[str, SenderState] = field(default_factory=dict)

    def groups_of(self, sender: str) -> list[Group]:
        """``sender``'s groups; ``stack`` is in the built-in Stack group only (an assignment
        stored by an older sidecar is ignored)."""
        if sender == STACK:
            return [STACK_GROUP]
        return [self.groups[g] for g in self.assignments.get(sender, ()) if g in self.groups]

    def active_group(self, sender: str, now: float) -> Group | None:
        """The group that applies to a failure of ``sender`` at ``now`` (seed 000 §6).  The
        ``stack`` sender never parks in Need Check (DESIGN §10), whichever group wins."""
        g = active_group(self.groups_of(sender), now)
        if sender == "stack" and g is not None and not g.never_need_check:
            g = replace_struct(g, never_need_check=True)
        return g


def with_senders(reg: Registry, names: list[str]) -> Registry:
    """Register the configured targets (new ones start active; removed ones keep their rows)."""
    senders = dict(reg.senders)
    for n in names:
        senders.setdefault(n, SenderState(sender=n))
    return replace(reg, senders=senders)


# ---- groups.* ---------------------------------------------------------------------------------
def groups_list(reg: Registry) -> list[dict]:
    return [group_view(reg, g) for g in sorted(reg.groups.values(), key=lambda g: -g.priority)]


def group_view(reg: Registry, g: Group) -> dict:
    members = sorted(s for s, gs in reg.assignments.items() if g.id in gs)
    return {"id": g.id, **group_body(g), "senders": members}


def _group(reg: Registry, gid: object, field: str = "id") -> Group:
    if gid is None:
        raise ManageError(field, "required: a group id")
    if not isinstance(gid, str) or gid not in reg.groups:
        raise ManageError(field, f"unknown group {gid!r}")
    return reg.groups[gid]


def groups_get(reg: Registry, gid: str) -> dict:
    return group_view(reg, _group(reg, gid))


def groups_create(reg: Registry, gid: str, body: dict) -> Registry:
    """Create group ``gid`` (the caller mints the id, e.g. a uuid4 from the runtime)."""
    if gid in reg.groups:
        raise ManageError("id", f"group {gid!r} exists")
    try:
        g = validate_group(body, id=gid, others=list(reg.groups.values()))
    except GroupError as exc:
        raise ManageError(exc.field, exc.message) from None
    return replace(reg, groups={**reg.groups, gid: g})


def groups_patch(reg: Registry, gid: str, body: dict) -> Registry:
    """Change any field; a running cooldown keeps its end (the group is read at the next failure)."""
    old = _group(reg, gid)
    others = [g for g in reg.groups.values() if g.id != gid]
    try:
        g = validate_group({**group_body(old), **body}, id=gid, others=others)
    except GroupError as exc:
        raise ManageError(exc.field, exc.message) from None
    return replace(reg, groups={**reg.groups, gid: g})


def groups_delete(reg: Registry, gid: str) -> Registry:
    _group(reg, gid)
    groups = {k: v for k, v in reg.groups.items() if k != gid}
    assignments = {s: tuple(x for x in gs if x != gid) for s, gs in reg.assignments.items()}
    return replace(reg, groups=groups, assignments=_clean(assignments))


# ---- groups.assignments.* (sender-centric) and groups.senders.* (group-centric) ---------------
def _sender(reg: Registry, name: object, field: str) -> str:
    if name is None:
        raise ManageError(field, "required: a sender name")
    if not isinstance(name, str) or name not in reg.senders:
        raise ManageError(field, f"unknown sender {name!r}")
    return name


def _items(items: object, field: str = "items") -> list:
    if not isinstance(items, list):
        raise ManageError(field, "a list")
    if len(items) > MAX_ITEMS:
        raise ManageError(field, f"{len(items)} items, at most {MAX_ITEMS} a call")
    return items


def assignments(reg: Registry, mode: str, items: object) -> Registry:
    """``groups.assignments.set|add|remove``: ``items`` = ``[{sender, groups: [id…]}…]``."""
    out = dict(reg.assignments)
    seen: dict[str, int] = {}
    for i, item in enumerate(_items(items)):
        if not isinstance(item, dict):
            raise ManageError(f"items[{i}]", "an object {sender, groups}")
        for key in item:
            if key not in ("sender", "groups"):  # a misspelt key was ignored and the call "ok"
                raise ManageError(f"items[{i}].{key}", "unknown field: an item is {sender, groups}")
        s = _sender(reg, item.get("sender"), f"items[{i}].sender")
        if s == STACK:  # in no mode: "set []" / "remove" of stack answered ok and changed nothing
            raise ManageError(f"items[{i}].sender", _STACK_OWN_GROUP)
        if s in seen:  # two items for one sender: which groups win would be a guess
            raise ManageError(f"items[{i}].sender", f"{s!r} is in items[{seen[s]}] already: one item per sender")
        seen[s] = i
        gids = item.get("groups")
        if not isinstance(gids, list):
            raise ManageError(f"items[{i}].groups", "a list of group ids")
        for j, gid in enumerate(gids):
            _group(reg, gid, f"items[{i}].groups[{j}]")
        # a group id twice in one item is one assignment (a set of ids, as ``senders`` names are)
        out[s] = _apply(out.get(s, ()), mode, gids)
    return replace(reg, assignments=_clean(out))


def group_senders(reg: Registry, gid: str, mode: str, senders: object) -> Registry:
    """``groups.senders.set|add|remove`` for group ``gid``; ``senders`` = names (≤ 500)."""
    _group(reg, gid)
    names = [_sender(reg, n, f"senders[{i}]") for i, n in enumerate(_items(senders, "senders"))]
    if STACK in names:  # in no mode, as in ``assignments``
        raise ManageError(f"senders[{names.index(STACK)}]", _STACK_OWN_GROUP)
    names = list(dict.fromkeys(names))  # a set of names: duplicates are one
    out = dict(reg.assignments)
    if mode == "set":
        for s, gs in out.items():
            if s not in names and gid in gs:
                out[s] = tuple(x for x in gs if x != gid)
        mode = "add"
    for s in names:
        out[s] = _apply(out.get(s, ()), mode, [gid])
    return replace(reg, assignments=_clean(out))


_STACK_OWN_GROUP = ("the stack sender is in the built-in Stack group only (DESIGN §10: failed_in_row 3, "
                    "1–2 min cooldowns, never Need Check); it cannot join a user group")


def _clean(assign: dict[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
    """A sender with no group has no entry (so a stored and a computed registry compare equal)."""
    return {s: gs for s, gs in assign.items() if gs}


def _apply(current: tuple[str, ...], mode: str, gids: list) -> tuple[str, ...]:
    if mode == "set":
        return tuple(dict.fromkeys(gids))
    if mode == "add":
        return tuple(dict.fromkeys([*current, *gids]))
    if mode == "remove":
        return tuple(g for g in current if g not in gids)
    raise ManageError("mode", f"{mode!r} is not set, add or remove")


# ---- senders.* ----------------------------------------------------------------------------------
def senders_list(reg: Registry) -> list[dict]:
    return [sender_view(reg, s) for s in sorted(reg.senders)]


def sender_view(reg: Registry, name: str) -> dict:
    s = reg.senders[_sender(reg, name, "sender")]
    return {"sender": name, "state": s.state, "failed_in_row": s.failed_in_row,
            "cooldown_times": s.cooldown_times, "cooldown_end": s.cooldown_end,
            "need_check_path": s.need_check_path, "next_send_at": s.next_send_at,
            "groups": [g.id for g in reg.groups_of(name)]}


def needs_recovery(reg: Registry, name: object) -> bool:
    """Is sender ``name`` in cooldown or Need Check?  (:class:`ManageError` naming ``sender``
    for an unknown one.)  Recovering an active sender is a no-op — an operator (or a script
    that recovers every sender) asks for "active", and it is; writing a 106 and resetting its
    counters would record a recovery that never happened (a breaker's find, issue 9)."""
    return reg.senders[_sender(reg, name, "sender")].state != ACTIVE


def senders_recover(reg: Registry, machine: HealthMachine, name: str, now: float,
                    by: str = "manual") -> tuple[Registry, list[History]]:
    """Manual recovery from cooldown or Need Check: counters reset, history 106.  An active
    sender: nothing changes, no history (:func:`needs_recovery`)."""
    if not needs_recovery(reg, name):
        return reg, []
    s = reg.senders[name]
    result = machine.handle(s, Recover(now, by))
    return replace(reg, senders={**reg.senders, name: result.state}), result.history
