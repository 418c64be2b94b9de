"""The router as a process-wide component of the app (DESIGN §10, §13): its config,
state, channels, delivery pump, Stack watch and bridge methods.

Rules / theory of operation
---------------------------
* Built once per process from the settings: :func:`sidecar.router.config.load_config` (env
  ``SIDECAR_ROUTER_*`` + ``<data dir>/router.toml``; a bad setting is a
  :class:`~sidecar.router.config.ConfigError`, exit 2), a channel per configured target, the
  ``stack`` channel over the app's Stack client, one :class:`~sidecar.router.io.pump.DeliveryPump`
  (the only way out of the sidecar: Stack writes included — the old outbox pump is gone), and
  :class:`~sidecar.router.attempt.Attempts` asking sender health (:meth:`plug_health`; the app
  plugs :class:`sidecar.senders.gate.HealthGate` in, :class:`AlwaysOpen` before that).
  ``stamp_at`` (the virtual clock): every channel's HTTP call carries its pass instant
  (:mod:`sidecar.router.io.channels`, "Virtual instant stamp").
* :meth:`RouterComponent.start` restores the routing state from SQLite (rules, dedup keys,
  throttle windows, the event counter and the data dir's event-id prefix).
* The step executor routes a step's events through :attr:`port` (decide before the commit,
  apply after it; inside a commit group a step decides on top of the group's earlier routings,
  all applied in step order after the group's one commit); ``apply`` also notifies Electron of
  the rows that were settled at routing time (``skipped``, ``duplicate``, ``failed`` at once)
  as ``delivery`` notes.
* :meth:`pump` runs one pump pass and returns what the app must do next: the instant of the
  next pass, the ``delivery`` notes (one per attempt outcome of every target but ``stack``,
  whose writes Stack itself records), and the router events the pass raised
  (``sidecar/stack unreachable|reachable`` from :class:`~sidecar.router.core.StackWatch`, sender
  health's later) — the app routes them in a step of their own.
* Bridge methods (:meth:`register`): ``rules.list/create/patch/delete``, ``deliveries.list``,
  ``events.emit``.  The lists page and never answer past the frame cap (:mod:`sidecar.protocol.paging`).  Bad input raises ``InvalidParams`` (-32602) whose ``data.field`` names the
  field; nothing is changed.  A rule change commits under the step lock and only then changes
  memory; it never resets a throttle window, a dedup key or a retry schedule.
"""
from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from sidecar.protocol import inbound as p
from sidecar.protocol.outbound import DeliveryNote
from sidecar.core.rng import KeyedRandom
from sidecar.protocol.paging import MAX_LIMIT, budget, cut_text, page
from sidecar.router.attempt import Attempts, Next, SenderHealth
from sidecar.router.cadence import StackCadence
from sidecar.router.io.channels import Channel, build_channel
from sidecar.router.io.stack_channel import StackChannel
from sidecar.router.config import RouterConfig, load_config
from sidecar.router.core import Router, StackWatch, stack_pass
from sidecar.router.model import Delivery, RoutingEvent, Status, parse_event
from sidecar.router.io.pump import DeliveryPump
from sidecar.router.state import PREFIX_KEY, Ahead, RouterState, Routing
from sidecar.router.ops import DropThrottle, PutThrottle, prune_ops
from sidecar.store.ops import Op
from sidecar.router.io.storage import RouterStore

log = logging.getLogger("sidecar.app.router")



@dataclass(slots=True)
class PassResult:
    """What one pump pass asks of the app."""

    next_due: float | None = None  # unix seconds; None = nothing pending
    notes: list[DeliveryNote] = field(default_factory=list)  # to Electron, in order
    events: list[RoutingEvent] = field(default_factory=list)  # route these in a step of their own
    stack_acked: int = 0  # Stack writes delivered in this pass
    stack_failed: int = 0  # Stack attempts that failed in this pass
    stack_pending: int = 0  # Stack writes still pending after it
    claimed: int = 0  # attempts the pass claimed (PumpResult.claimed)
    other_due: float | None = None  # the earliest due row of every target but Stack


def delivery_note(row: Delivery, status: str, attempt: int, at: float,
                  error: str | None = None) -> DeliveryNote:
    return DeliveryNote(delivery_id=row.id, target=row.target, channel=row.channel,
                          status=status, attempt=attempt, source=row.source, subject=row.subject,
                          action=row.action, priority=row.priority, rule=row.rule,
                          event_at=row.event_at, at=at, error=error)


def delivery_view(row: Delivery) -> dict[str, Any]:
    """A row as ``deliveries.list`` answers it: the audit without bytes (the message as text,
    cut at :data:`~sidecar.protocol.paging.MAX_FIELD` characters so one row never nears the frame cap)."""
    out = msgspec.to_builtins(row)
    out["message"], out["message_cut"] = cut_text(bytes(row.message).decode("utf-8", "replace"))
    return out


class RouterComponent:
    """See the module rules.  ``notify(method, struct)`` sends a note to Electron."""

    def __init__(self, settings: Any, store: Any, stack_client: Any,
                 notify: Callable[[str, Any], object], *, config: RouterConfig | None = None,
                 flush_interval_s: float = 0.0, stamp_at: bool = False) -> None:
        self.cfg = config if config is not None else load_config(settings.data_dir)
        self.store = RouterStore(store)
        self.router = Router(RouterState(prefix=""), self.cfg.channels(), rng=KeyedRandom(settings.seed))
        self.router.state.match_mode = self.cfg.match_mode
        self.router.state.dedup_window_s = self.cfg.dedup_window_s
        self.channels: dict[str, Channel] = {
            name: build_channel(name, t, data_dir=settings.data_dir) for name, t in self.cfg.targets.items()}
        self.stack = StackChannel(stack_client) if stack_client is not None else None
        for ch in [*self.channels.values(), *([self.stack] if self.stack is not None else [])]:
            ch.stamp_at = stamp_at  # virtual clock: the harness records calls at the pass instant
        self.pump_ = DeliveryPump(self.store, self.channels, stack=self.stack, attempts=Attempts(),
                                  concurrency=settings.stack_concurrency)
        self.watch = StackWatch()
        self.cadence = StackCadence(flush_interval_s)  # when Stack's writes are flushed
        self.notify = notify
        self.page_bytes = budget(settings.max_frame)  # a list answer stays under the frame cap
        self.port = _Port(self)
        self.stack_acked = 0

    def plug_health(self, health: SenderHealth) -> None:
        """Sender health answers the one attempt gate from now on."""
        self.pump_.gate = Attempts(health)

    async def start(self, now: float | None) -> float | None:
        """Restore the routing state; returns the first pump instant (None: nothing pending)."""
        loaded = await self.store.load(now if now is not None else 0.0, self.cfg.dedup_window_s)
        prefix = await self.store.store.meta(PREFIX_KEY) or ""
        self.router.state = RouterState.restore(prefix, loaded, match_mode=self.cfg.match_mode,
                                                dedup_window_s=self.cfg.dedup_window_s)
        other = await self.store.next_due(stack=False)
        if self.stack is None:
            return other
        fresh, retry, _ = await self.store.stack_heads()
        return _earliest(other, self.cadence.after_pass(fresh, retry))

    def note_startup(self, raw: Any) -> None:
        """Stack's startup answer tells whether it takes ``POST /v1/batch``."""
        if self.stack is not None:
            self.stack.note_startup(raw)

    async def pump(self, now: float, *, stack: bool = True, detach: bool = False) -> PassResult:
        """One pump pass at ``now`` (unix seconds; see module rules); ``stack`` False leaves
        Stack's rows for a later pass (``next_due`` then ignores them too); ``detach`` (the
        wall clock's pump loop): each target's attempt runs in a task of its own and a later
        pass settles it (:meth:`DeliveryPump.run_due`) — targets are isolated."""
        res = await self.pump_.run_due(now, stack=stack, detach=detach)
        fresh, retry, pending = res.stack_heads
        flush_at = self.cadence.after_pass(fresh, retry) if self.stack is not None else None
        out = PassResult(next_due=_earliest(res.other_due, flush_at), events=list(res.events),
                         stack_pending=pending, claimed=res.claimed, other_due=res.other_due)
        out.stack_acked, failed, refused = stack_pass(res.settled, now)
        out.events.extend(refused)  # sidecar/stack/refused: Stack answered, it is no outage
        freed: list[Delivery] = []
        for row, nxt in res.settled:
            if row.channel == "stack":
                continue
            out.notes.append(delivery_note(row, nxt.status, nxt.attempts, now, _error(nxt)))
            if nxt.status == Status.FAILED.value:
                freed.append(row)
        if freed:
            await self._free_windows(freed)
        out.stack_failed = failed
        self.stack_acked += out.stack_acked
        ev = self.watch.observe(now, acked=out.stack_acked, failed=failed)
        if ev is not None:
            log.warning("Stack %s (router event sidecar/stack/%s)", ev.action, ev.action)
            out.events.append(ev)
        for note in out.notes:
            self.notify("delivery", note)
        return out

    async def _free_windows(self, failed: list[Delivery]) -> None:
        """A failed delivery frees the throttle window it started (seed 002 ``_throttled``
        counts only ``pending``/``delivered`` rows; DESIGN §10): the window of its (channel,
        target) then runs from the latest live row to it, or not at all.  A window a later row
        moved on is left alone."""
        state = self.router.state
        for row in failed:
            key = (row.channel, row.target)
            if state.last_real.get(key) != row.event_at:
                continue
            prev = await self.store.last_live(row.channel, row.target)
            ops: list[Op] = [DropThrottle(row.channel, row.target, row.event_at)]
            if prev is not None:
                ops.append(PutThrottle(row.channel, row.target, prev))
            await self.store.commit(ops)
            if state.last_real.get(key) == row.event_at:  # (no routing moved it meanwhile)
                if prev is None:
                    del state.last_real[key]
                else:
                    state.last_real[key] = prev

    def queued(self, at: float, channels: frozenset[str] | None = None) -> float | None:
        """A step queued pending deliveries at ``at`` (unix seconds) to ``channels`` (None:
        unknown, any): the instant the delivery timer must fire by — ``at`` for every target but
        Stack, Stack's flush instant (:mod:`~sidecar.router.cadence`) for its writes."""
        other = at if channels is None or channels - {"stack"} else None
        flush_at = None
        if self.stack is not None and (channels is None or "stack" in channels):
            flush_at = self.cadence.queued(at)
        return _earliest(other, flush_at)

    def stack_due(self, now: float) -> bool:
        """Is Stack's flush due at ``now`` (unix seconds)?  False without a Stack."""
        return self.stack is not None and self.cadence.due(now)

    @property
    def flush_at(self) -> float | None:
        """Stack's next flush instant (unix seconds; None: no Stack write pending)."""
        return self.cadence.flush_at if self.stack is not None else None

    def prune_ops(self, now: float) -> list:
        """Housekeeping: forget settled rows and journal lines older than 7 days and dedup keys
        past their window."""
        return prune_ops(now, 7 * 86400.0, self.cfg.dedup_window_s)

    async def close(self) -> None:
        await self.pump_.close()

    # bridge methods ---------------------------------------------------------------------------
    def register(self, reg: Callable[..., None], step: Callable[[Callable], Awaitable[Any]],
                 locked: Callable[[Callable[[], Awaitable[Any]]], Awaitable[Any]],
                 now: Callable[[], float]) -> None:
        """Register the router's methods with the app's registry ``reg``; ``step(fn)`` runs a
        step, ``locked(coro_fn)`` runs under the step lock, ``now()`` is the clock."""
        self._step, self._locked, self._now = step, locked, now
        reg("rules.list", p.RulesList, self._rules_list, needs_clock=False)
        reg("rules.create", p.RulesCreate, self._rules_create)
        reg("rules.patch", p.RulesPatch, self._rules_patch)
        reg("rules.delete", p.RulesDelete, self._rules_delete)
        reg("deliveries.list", p.DeliveriesList, self._deliveries_list, needs_clock=False)
        reg("events.emit", p.EventsEmit, self._events_emit)

    async def _rules_list(self, a: p.RulesList) -> dict:
        after = None if a.after is None else (a.after[0], a.after[1])
        rules = [r for r in self.router.rules() if after is None or (r["weight"], r["name"]) > after]
        limit = a.limit or MAX_LIMIT
        views, nxt = page(rules[:limit + 1], limit, self.page_bytes,
                          lambda r: [r["weight"], r["name"]])
        return {"rules": views, "match_mode": self.router.state.match_mode, "next": nxt}

    async def _rule_change(self, decide: Callable[[float], tuple[list, Any]], deleted: bool = False) -> dict:
        async def run() -> dict:
            ops, rule = decide(self._now())  # a RouterInputError is -32602 naming its field
            await self.store.commit(ops)
            self.router.apply_rule(rule, deleted=deleted)
            return {"ok": True, "rule": msgspec.to_builtins(rule)}
        return await self._locked(run)

    async def _rules_create(self, a: p.RulesCreate) -> dict:
        data = {k: v for k, v in msgspec.to_builtins(a).items() if v is not None}  # typed: plain data
        return await self._rule_change(lambda now: self.router.create_rule(data, now))

    async def _rules_patch(self, a: p.RulesPatch) -> dict:
        changes = None if a.changes is None else msgspec.to_builtins(a.changes)  # present fields only
        return await self._rule_change(lambda now: self.router.patch_rule(a.name, changes, now))

    async def _rules_delete(self, a: p.RulesDelete) -> dict:
        return await self._rule_change(lambda now: self.router.delete_rule(a.name), deleted=True)

    async def _deliveries_list(self, a: p.DeliveriesList) -> dict:
        limit = a.limit or MAX_LIMIT
        rows = await self.store.deliveries(status=a.status, target=a.target, since=a.since,
                                           after_seq=a.after_seq, limit=limit + 1)
        views, nxt = page([delivery_view(r) for r in rows], limit, self.page_bytes,
                          lambda v: v["seq"])
        return {"deliveries": views, "next": nxt}

    async def _events_emit(self, a: p.EventsEmit) -> dict:
        data = {k: v for k, v in msgspec.structs.asdict(a).items() if v is not None}
        event = parse_event(data)  # a RouterInputError is -32602 naming its field
        await self._step(lambda s: s.emit(event))
        if self.port.last_duplicate:  # seed 002: the first event's id, ``deduplicated: true``
            return {"ok": True, "event_id": self.port.last_first_id, "deduplicated": True}
        return {"ok": True, "event_id": self.port.last_event_id, "deduplicated": False}



def _earliest(*dues: float | None) -> float | None:
    vals = [d for d in dues if d is not None]
    return min(vals) if vals else None


def _error(nxt: Next) -> str | None:
    return nxt.last_error


class _Port:
    """The executor's router port: routing plus the notes of rows settled at routing time."""

    def __init__(self, owner: RouterComponent) -> None:
        self.owner = owner
        self.last_event_id: str | None = None
        self.last_duplicate = False  # the last routed event was a duplicate …
        self.last_first_id: str | None = None  # … of the event with this id

    def decide(self, events: list, now: float, after: Sequence[Routing] = ()) -> Routing:
        return self.owner.router.decide(events, now, after)

    def ahead(self) -> Ahead:
        return self.owner.router.ahead()

    def apply(self, routing: Routing) -> None:
        self.owner.router.apply(routing)
        if routing.event_ids:
            self.last_event_id = routing.event_ids[-1]
            self.last_duplicate = bool(routing.duplicates) and routing.duplicates[-1]
            self.last_first_id = routing.first_ids[-1] if routing.first_ids else None
        if len(routing.pending) == len(routing.deliveries):
            return  # every row pending (most steps: the Stack writes alone): no note to send
        pending = Status.PENDING.value  # read once: Enum.value is a slow descriptor on 3.11
        for row in routing.deliveries:
            if row.status != pending and row.channel != "stack":
                self.owner.notify("delivery", delivery_note(row, row.status, row.attempts,
                                                            routing.now, row.last_error or row.note))
