"""Sender health ↔ SQLite (schema v2 in :mod:`sidecar.store.migrations`): the write ops for a
step or a manage call (the readers that rebuild a :class:`~.manage.Registry` at start are
:mod:`sidecar.senders.io.storage`).

A restart loads each ``SenderState`` whole, including the stored ``cooldown_end``/``exit_at`` and
the probe slot, so nothing is re-drawn (DESIGN §10: "A restart never resets or re-draws a
cooldown").
"""
from __future__ import annotations

import msgspec

from sidecar.store.ops import (AddSenderHistory, DeleteAssignments, DeleteGroup, Op, PutAssignment,
                               PutGroup, PutSender)

from .health import History, SenderState, HealthResult
from .manage import Registry

def sender_ops(state: SenderState, history: list[History] | None = None) -> list[Op]:
    """Ops that persist a sender's new state and its history rows (one transaction)."""
    ops: list[Op] = [PutSender(state.sender, state.state, state.cooldown_end, msgspec.to_builtins(state))]
    ops += [AddSenderHistory(r.sender, r.at, r.code, r.note) for r in history or ()]
    return ops


def result_ops(result: HealthResult) -> list[Op]:
    return sender_ops(result.state, result.history)


def registry_ops(before: Registry, after: Registry, history: list[History] | None = None) -> list[Op]:
    """The ops that turn the stored ``before`` into ``after`` (a manage call's result)."""
    ops: list[Op] = []
    for gid in before.groups.keys() - after.groups.keys():
        ops.append(DeleteGroup(gid))
    for g in (g for gid, g in after.groups.items() if before.groups.get(gid) != g):
        ops.append(PutGroup(g.id, g.priority, msgspec.to_builtins(g)))
    for sender in before.assignments.keys() | after.assignments.keys():
        new = after.assignments.get(sender, ())
        if before.assignments.get(sender, ()) != new:
            ops.append(DeleteAssignments(sender))
            ops += [PutAssignment(sender, gid) for gid in new]
    for name, s in after.senders.items():
        if before.senders.get(name) != s:
            ops += sender_ops(s)
    ops += [AddSenderHistory(r.sender, r.at, r.code, r.note) for r in history or ()]
    return ops
