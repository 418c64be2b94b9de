"""Sender health as a process-wide component of the app (DESIGN §10, §13): the gate the router
asks, its timers in the one scheduler, and the manage API of seed 000 §6 as registered bridge
methods.

Rules / theory of operation
---------------------------
* :meth:`SendersComponent.attach` registers the timer kind ``sender`` with the engine (its
  timers are keyed ``(None, "sender", name)``, not by a TU) and every bridge method below with
  the app's registry — nothing is added to an if-chain.
* :meth:`start` loads groups, assignments and sender states from SQLite and re-arms every timer
  from the stored instants (nothing is re-drawn: a restart leaves every cooldown's end as it
  was).
* Every change is a step of the app's one executor (``run_step``): its store ops commit in ONE
  transaction, then its ``sender.state`` notes reach Electron, then its ``sidecar/sender/*``
  events go to the router (:attr:`route_events`, plugged in by the router's wiring) and, when a
  probe is due or parked deliveries were released, the delivery pump is woken
  (``step.outbox_due``).  Bad manage input raises ``InvalidParams`` (-32602) whose ``data.field``
  names the field, before anything changed.
* Methods: ``groups.list/create/get/patch/delete``, ``groups.assignments.set/add/remove``
  (≤ 500 items, each ``{sender, groups: [id…]}``), ``groups.senders.set/add/remove``
  (``{id, senders: [name…]}``), ``senders.list/get/history/recover``.  Shapes: the Structs in
  :mod:`sidecar.protocol.inbound` (params) and :mod:`sidecar.protocol.answers` (answers).
"""
from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from functools import partial
from typing import Any

import msgspec

from bridge.errors import InvalidParams
from sidecar.protocol import inbound as p
from sidecar.protocol.paging import budget, cut_text, page
from sidecar.core.rng import KeyedRandom
from sidecar.router.attempt import Report
from sidecar.router.model import RoutingEvent
from sidecar.runtime.step import Step

from sidecar.senders import manage
from sidecar.senders.gate import TIMER_KIND, HealthGate
from sidecar.senders.health import HealthMachine
from sidecar.senders.store import registry_ops
from sidecar.senders.io.storage import history_page, load_registry

log = logging.getLogger("sidecar.senders")

RunStep = Callable[[Callable[[Step], Any]], Awaitable[Any]]

HISTORY_LIMIT = 500  # senders.history rows per page when ``limit`` is absent or null


class SendersComponent:
    """``engine``: the one engine (its scheduler and timer registry); ``store``: the app's
    :class:`~sidecar.store.db.Store`; ``rng``: the deployment's keyed randomness."""

    def __init__(self, engine: Any, store: Any, rng: KeyedRandom, *, max_frame: int = 1 << 20) -> None:
        self.engine = engine
        self.page_bytes = budget(max_frame)  # a list answer stays under the frame cap
        self.store = store
        self.rng = rng
        self.gate = HealthGate(HealthMachine(rng), engine.scheduler)
        self.run_step: RunStep | None = None
        #: where ``sidecar/sender/*`` events go inside a step; the router's wiring replaces it
        self.route_events: Callable[[Step, tuple[RoutingEvent, ...]], None] = self._hold_events
        self.held: list[RoutingEvent] = []  # events made while no router was plugged in

    def _hold_events(self, step: Step, events: tuple[RoutingEvent, ...]) -> None:
        self.held.extend(events)

    # ---- wiring --------------------------------------------------------------------------------
    def attach(self, methods: Any, run_step: RunStep) -> None:
        """Register the timer kind and the bridge methods; ``run_step`` runs a step (the app's)."""
        self.run_step = run_step
        self.engine.register_timer(TIMER_KIND, self._on_timer)
        reg = methods.register
        reg("groups.list", p.GroupsList, self._groups_list, needs_clock=False)
        reg("groups.get", p.GroupRef, self._groups_get, needs_clock=False)
        reg("groups.create", p.GroupCreate, self._groups_create)
        reg("groups.patch", p.GroupPatch, self._groups_patch)
        reg("groups.delete", p.GroupRef, self._groups_delete)
        for mode in ("set", "add", "remove"):
            reg(f"groups.assignments.{mode}", p.Assignments, partial(self._assignments, mode))
            reg(f"groups.senders.{mode}", p.GroupSenders, partial(self._group_senders, mode))
        reg("senders.list", p.SendersList, self._senders_list, needs_clock=False)
        reg("senders.get", p.SenderRef, self._senders_get, needs_clock=False)
        reg("senders.history", p.SenderHistory, self._senders_history, needs_clock=False)
        reg("senders.recover", p.SenderRef, self._senders_recover)

    async def start(self, senders: Iterable[str]) -> None:
        """Load the stored registry, register the configured senders, re-arm every timer."""
        self.gate.load(await self.store.read(load_registry), senders)

    async def reload(self) -> None:
        """Memory got ahead of SQLite — a pump pass applied outcomes whose commit failed and the
        runtime keeps going (the wall clock's pump loop): take the stored states back, drop the
        notes of the lost transitions and re-arm every timer from disk."""
        names = list(self.gate.reg.senders)
        self.gate.notes.clear()
        self.gate.probes.clear()
        self.gate.load(await self.store.read(load_registry), names)

    # ---- effects of a health change inside a step -------------------------------------------------
    def apply(self, step: Step, rep: Report) -> None:
        """Add a health change to ``step``: ops, ``sender.state`` notes, router events, and a
        wake-up of the delivery pump when it has probes to send or released rows."""
        step.ops.extend(rep.ops)
        for note in self.gate.take_notes():
            step.notify("sender.state", note)
        if rep.events:
            self.route_events(step, rep.events)
        if self.gate.probes or any(type(op).__name__ == "ReleaseTarget" for op in rep.ops):
            step.outbox_due = True

    def _on_timer(self, step: Step, key: tuple, payload: Any) -> None:
        self.apply(step, self.gate.on_timer(key, step.now))

    # ---- manage: groups ----------------------------------------------------------------------------
    async def _step(self, fn: Callable[[Step], Any]) -> Any:
        assert self.run_step is not None, "attach() first"
        return await self.run_step(fn)

    def _change(self, method: str, step: Step, fn: Callable[[manage.Registry], manage.Registry]) -> manage.Registry:
        before = self.gate.reg
        try:
            after = fn(before)
        except manage.ManageError as exc:
            raise InvalidParams(f"{method}: {exc}", data={"field": exc.field}) from None
        step.ops.extend(registry_ops(before, after))
        self.gate.replace_registry(after)
        return after

    async def _groups_list(self, a: p.GroupsList) -> dict:
        return {"groups": manage.groups_list(self.gate.reg)}

    async def _groups_get(self, a: p.GroupRef) -> dict:
        gid = self._gid("groups.get", a)
        return {"group": self._view("groups.get", lambda r: manage.groups_get(r, gid))}

    def _gid(self, method: str, a: Any) -> str:
        """The group a call names: ``id``, or ``group`` = an id or exactly one group's name."""
        if a.id is not None:
            return a.id
        ref = a.group
        if ref is None:
            raise InvalidParams(f"{method}: id: required (or group: an id or a name)", data={"field": "id"})
        groups = self.gate.reg.groups
        if ref in groups:
            return ref
        named = [g.id for g in groups.values() if g.name == ref]
        if len(named) != 1:
            why = "no group has that id or name" if not named else f"{len(named)} groups have that name: use the id"
            raise InvalidParams(f"{method}: group: {ref!r}: {why}", data={"field": "group"})
        return named[0]

    def _view(self, method: str, fn: Callable[[manage.Registry], Any]) -> Any:
        try:
            return fn(self.gate.reg)
        except manage.ManageError as exc:
            raise InvalidParams(f"{method}: {exc}", data={"field": exc.field}) from None

    async def _groups_create(self, a: p.GroupCreate) -> dict:
        body = _body(a)

        def fn(step: Step) -> str:
            gid = f"grp-{int(self.rng.unit('group-id', body.get('name'), step.now, len(self.gate.reg.groups)) * 2**48):012x}"
            self._change("groups.create", step, lambda r: manage.groups_create(r, gid, body))
            return gid

        gid = await self._step(fn)
        return {"group": manage.groups_get(self.gate.reg, gid)}

    async def _groups_patch(self, a: p.GroupPatch) -> dict:
        gid = self._gid("groups.patch", a)
        body = _body(a)
        body.pop("id", None)
        body.pop("group", None)
        await self._step(lambda s: self._change("groups.patch", s, lambda r: manage.groups_patch(r, gid, body)))
        return {"group": manage.groups_get(self.gate.reg, gid)}

    async def _groups_delete(self, a: p.GroupRef) -> dict:
        gid = self._gid("groups.delete", a)
        await self._step(lambda s: self._change("groups.delete", s, lambda r: manage.groups_delete(r, gid)))
        return {"ok": True}

    async def _assignments(self, mode: str, a: p.Assignments) -> dict:
        name = f"groups.assignments.{mode}"
        await self._step(lambda s: self._change(name, s, lambda r: manage.assignments(r, mode, a.items)))
        return {"ok": True, "senders": len(a.items)}  # one item per sender: refused otherwise

    async def _group_senders(self, mode: str, a: p.GroupSenders) -> dict:
        name = f"groups.senders.{mode}"
        gid = self._gid(name, a)
        await self._step(lambda s: self._change(name, s, lambda r: manage.group_senders(r, gid, mode, a.senders)))
        return {"ok": True, "group": manage.groups_get(self.gate.reg, gid)}

    # ---- manage: senders ---------------------------------------------------------------------------
    async def _senders_list(self, a: p.SendersList) -> dict:
        return {"senders": manage.senders_list(self.gate.reg)}

    async def _senders_get(self, a: p.SenderRef) -> dict:
        return {"sender": self._view("senders.get", lambda r: manage.sender_view(r, a.sender))}

    async def _senders_history(self, a: p.SenderHistory) -> dict:
        self._view("senders.history", lambda r: manage.sender_view(r, a.sender))
        limit = a.limit or HISTORY_LIMIT
        found = await self.store.read(history_page, a.sender, a.since or 0.0, a.after_id, limit + 1)
        views = [{"id": i, "at": r.at, "code": r.code, "note": cut_text(r.note)[0]} for i, r in found]
        rows, nxt = page(views, limit, self.page_bytes, lambda v: v["id"])
        return {"sender": a.sender, "rows": rows, "next": nxt}

    async def _senders_recover(self, a: p.SenderRef) -> dict:
        def fn(step: Step) -> bool:  # decided inside the step: on the state it acts on
            if not self._view("senders.recover", lambda r: manage.needs_recovery(r, a.sender)):
                return False  # active already: a no-op, nothing written (manage.needs_recovery)
            self.apply(step, self.gate.recover(a.sender, step.now, a.by))
            return True

        recovered = await self._step(fn)
        return {"sender": manage.sender_view(self.gate.reg, a.sender), "recovered": recovered}


def _body(a: msgspec.Struct) -> dict:
    """The fields the caller gave (UNSET ones left out), as the manage functions take them."""
    return {k: v for k, v in msgspec.structs.asdict(a).items() if v is not msgspec.UNSET}
