"""The delivery pump: sends due delivery rows through their channels (DESIGN §9, §10).

Rules / theory of operation
---------------------------
* :meth:`DeliveryPump.run_due` is called by the runtime with ``now`` (unix seconds from the one
  clock) — on the virtual clock at the delivery timer's instants inside an advance (Stack's rows
  only at Stack's flush instants, :mod:`.cadence`), on the wall clock from its own task — and
  returns :class:`PumpResult` with ``next_due`` (when to call again) and Stack's pending heads.  It never reads a clock
  and never sleeps.  Passes are serialised by a lock: two concurrent calls never send a row twice.
* A pass works in rounds.  Each round reads the due rows (:mod:`.storage`; one read, which
  when nothing is due also brings what the pass ends with — one thread hop fewer), hands them to
  the gate (:class:`~.attempt.Attempts`, the one place), which asks sender health ONCE for all
  of them (:mod:`..exchange`: admissions in, grants out), commits every claim / wait / expiry in
  ONE transaction, then sends, then tells sender health every attempt's outcome in ONE
  settlement and commits every outcome (plus channel ops, plus what health returned) in ONE
  transaction.  A pass starts by settling what landed since the last one and the warm-up
  probes' answers — health told once, before it is asked again about those targets.  Claim
  before send, settle after: a SIGKILL anywhere leads to a resend with the same delivery id,
  never to a lost or doubled delivery at a deduping receiver (``tests/router/test_pump.py``
  kills between claim and send).
* Non-Stack rows: one per target per round (a sender sends one delivery at a time, so health
  decides each attempt knowing the one before), up to ``concurrency`` targets at once.  On the
  wall clock (``detach``) a pass takes up to ``per_target`` due rows of a target (admitted in
  order in the pass's one admission — a paced sender gets the first of them; a target whose
  row waits is not decided on its later rows), sends them one after another in the target's
  task, and holds the rest after the first that is not delivered (their claim undone: not
  attempts); the journal is written inline, no task, and its outcomes are told in a settlement
  after the write (health is then told at most twice in a pass: the landings before the
  admission, the journal after it); the landings' settles, the next claims and the journal's
  settles are ONE commit (docs/decisions.md "The pump per batch").  Stack rows keep per-pair
  order: when Stack has batching (:class:`~.channels.StackChannel`), each due pair's run of
  due rows goes into ``POST /v1/batch`` requests of ≤ 500 writes (a run is never split across two
  requests of one round unless it alone exceeds 500); without it only the pairs' heads are sent,
  ``concurrency`` single calls at a time.  A round's acknowledgements make the next rows heads,
  so follow-up writes go out in the same pass.
* **Sender health counts attempts** (seed 000 §1; :func:`~.attempt.request_outcome`): a row
  sent alone is one attempt, told on its own (an item of the round's settlement); Stack's rows
  are told once per HTTP request — one ``POST /v1/batch``, whatever it carried — and, without
  batching, once per round for the single writes sent together (none of them followed another's answer, so
  together they are one failure "in a row", not up to ``concurrency``).  Every row is still
  settled on its own (its attempts, its retry on Stack's ladder).
* Outage stop: if every Stack send of a round got no HTTP answer at all, the pass sends no more
  Stack writes and its ``next_due`` is the earliest retry of the Stack rows it tried (or another
  target's row), not the untried rows' "due now": it does not walk the whole queue into
  timeouts, in one pass or in many.
* A channel or client that raises (a bug) fails the attempt retryably and is logged: the row is
  kept, the round's other outcomes are recorded.  A ``stack`` write that Stack refuses (a 4xx
  other than 408/409/429) fails like any delivery (logged at ERROR by the channel); the pair's
  later writes become heads and go on in the same pass.
* Rows of a target with no channel (removed from the config) fail terminally ("bad target").
* Sender health failing (a bug) never loses a round: asked "may it send?", the row waits
  (``Attempts.health_error``, not an attempt); told an outcome or a probe answer, the outcome
  is recorded anyway and only health's part of that item is skipped (a
  :class:`~..exchange.Fault`) — logged, and listed in ``PumpResult.health_errors``.  A round's
  outcomes and health's records are ONE commit.
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import msgspec

from sidecar.store.ops import Op

from sidecar.router.attempt import Attempts, Begin, Kind, Next, Outcome
from sidecar.router.exchange import Told
from sidecar.router.ops import SettleDelivery
from sidecar.router.io.channels import Channel, JournalChannel
from sidecar.router.io.stack_channel import StackChannel
from sidecar.router.model import Delivery, RoutingEvent
from sidecar.router.io.sends import (MAX_BATCH, one_per_target, per_target, send_other,
                                      send_probes, send_run, send_stack)
from sidecar.router.io.storage import RouterStore

log = logging.getLogger("sidecar.router.io.pump")
PER_TARGET = 16  # detached: a target's rows claimed per pass, sent one after another


@dataclass(slots=True)
class PumpResult:
    settled: list[tuple[Delivery, Next]] = field(default_factory=list)  # every outcome, in order
    events: list[RoutingEvent] = field(default_factory=list)  # from sender health: route them
    next_due: float | None = None  # unix seconds; None = nothing pending
    stack_requests: int = 0  # HTTP requests made to Stack in this pass
    # Stack's pending pair heads after the pass: (earliest first attempt due, earliest retry
    # due, pending writes in all) — what the flush cadence (:mod:`.cadence`) plans from
    stack_heads: tuple[float | None, float | None, int] = (None, None, 0)
    other_due: float | None = None  # the earliest due row of every target but Stack
    health_errors: list[str] = field(default_factory=list)  # targets whose health raised (logged)
    claimed: int = 0  # attempts claimed by this pass (detached: sent after it, or inline)


class DeliveryPump:
    def __init__(self, store: RouterStore, channels: Mapping[str, Channel], *,
                 stack: StackChannel | None = None, attempts: Attempts | None = None,
                 concurrency: int = 8, wake: Callable[[], None] | None = None,
                 per_target: int = PER_TARGET) -> None:
        if concurrency < 1 or per_target < 1:
            raise ValueError("concurrency and per_target must be >= 1")
        self.per_target = per_target
        self.store = store
        self.channels = dict(channels)  # target name -> channel (without stack)
        self.stack = stack
        self.gate = attempts or Attempts()
        self.concurrency = concurrency
        self.wake = wake  # called when a detached attempt lands: run a pass to settle it
        self._lock = asyncio.Lock()
        self._orphans_checked = False  # rows of targets no longer configured: asked once
        self._flying: dict[str, asyncio.Task] = {}  # target -> its detached attempt
        self._landed: list[tuple[str, list[tuple[Delivery, Begin, Outcome]]]] = []
        self._stack_stalled: float | None = None  # detached: no Stack answer, hold until then

    async def run_due(self, now: float, *, stack: bool = True, detach: bool = False) -> PumpResult:
        """One pass at ``now`` (see module rules).  ``stack`` False: only the other targets
        (the virtual clock sends those at their due instants and Stack's writes of a whole
        advance together).  ``detach`` (the wall clock): the pass claims each free target's
        head and hands the attempt to a task of its own, settling the attempts that landed
        since the last pass — it never waits for a send, so a hanging receiver holds only its
        own target (at most one attempt in flight per target; ``wake`` is called when one
        lands).  Without ``detach`` a pass sends and settles in rounds; it first waits for
        Stack's detached request when it sends Stack's writes (``stack.flush`` must see them
        answered), never for another target's: a target with an attempt in flight is skipped
        (its landing is settled by a later pass).  On the virtual clock nothing is ever
        detached, so its passes are exactly as before.  Raises ``StoreError`` if the store
        fails."""
        async with self._lock:
            if not detach and stack:
                await self.drain(("stack",))
            res = PumpResult()
            stack_retry: list[float] = []  # next attempts of the Stack rows tried in this pass
            # detached: the landings' settles ride with the pass's first commit (ONE transaction
            # settles a batch and claims the next); else committed here, as before
            carry = await self._start(now, res, stack_retry, commit=not detach)
            tried: set[str] = set()
            stalled_until = self._stack_stalled
            if stalled_until is not None and now >= stalled_until:
                self._stack_stalled = stalled_until = None
            stack_open = (self.stack is not None and stack and "stack" not in self._flying
                          and stalled_until is None)
            stalled = False
            targets = tuple(self.channels)
            while True:
                # one read per round; the last round's (nothing due) brings the pass's end too
                skip = frozenset(self._flying)
                due = await self.store.due(now, self.concurrency, MAX_BATCH if stack_open else None,
                                           self.stack is not None, targets, skip,
                                           not self._orphans_checked,
                                           self.per_target if detach else 1)
                if sum(1 for r in due.other if r.target not in self.channels) < self.concurrency:
                    # fewer orphans than asked for: all seen (a target's batch of due heads is no
                    # orphan — counting it would ask again each round, a scan of the backlog)
                    self._orphans_checked = True
                fresh_rows = (r for r in due.other if r.id not in tried)
                other = (per_target(fresh_rows, self.per_target, self.concurrency) if detach
                         else one_per_target(fresh_rows)[:self.concurrency])
                runs: list[list[Delivery]] = []
                if stack_open:
                    runs = [[r for r in run if r.id not in tried] for run in due.stack]
                    runs = [run for run in runs if run]
                    if self.stack is not None and not self.stack.batch:
                        runs = [run[:1] for run in runs[:self.concurrency]]
                if not other and not runs:
                    if carry:  # the landings' settles: the end read above predates them
                        await self.store.commit(carry)
                        due = msgspec.structs.replace(due, end=None)
                    break
                stack_rows = [r for run in runs for r in run]
                tried.update(r.id for r in other + stack_rows)
                sendable, claims = self._begin(other + stack_rows, now, res)
                res.claimed += len(sendable)
                go_other = [(r, b) for r, b in sendable if r.channel != "stack"]
                go_stack = [(r, b) for r, b in sendable if r.channel == "stack"]
                if detach:
                    # the journal is a local file: written inline, in the pass, its claims and
                    # settles in the pass's ONE commit with the landings and the other claims —
                    # no task per row (docs/decisions.md "The pump per batch")
                    local = [(r, b) for r, b in go_other if isinstance(self.channels.get(r.target),
                                                                       JournalChannel)]
                    wrote, told = self._settle(await send_run(self.channels, local, now), now, res, stack_retry)
                    await self.store.commit(carry + claims + wrote + self._tell(told, now, res))
                    carry = []
                    go_other = [(r, b) for r, b in go_other if (r, b) not in local]
                    self._fly(go_other, go_stack, now)
                    due = await self.store.due(now, 0, None, self.stack is not None, targets,
                                               frozenset(self._flying), False)
                    break
                await self.store.commit(claims)
                outcomes = await send_other(self.channels, go_other, now, self.concurrency)
                attempts, requests = await send_stack(self.stack, go_stack, now, self.concurrency)
                stack_out = [x for a in attempts for x in a]
                res.stack_requests += requests
                if stack_out and all(o.kind == "retryable" and o.status is None for _, _, o in stack_out):
                    stack_open = False  # no answer at all: Stack is unreachable
                    stalled = True
                ops, told = self._settle(outcomes, now, res, stack_retry)
                stack_ops, stack_told = self._settle_attempts(attempts, now, res, stack_retry)
                await self.store.commit(ops + stack_ops + self._tell(told + stack_told, now, res))
            # due rows all tried in this pass already: the end is read on its own
            end = due.end if due.end is not None else await self.store.pass_end(
                self.stack is not None, targets, frozenset(self._flying))
            res.other_due, res.stack_heads = end.other_due, end.stack_heads
            fresh, retry, count = res.stack_heads
            if "stack" in self._flying:  # its landing wakes the pump: no pass before that
                fresh = retry = None
                res.stack_heads = (fresh, retry, count)
            elif self._stack_stalled is not None and fresh is not None:
                fresh = max(fresh, self._stack_stalled)
                res.stack_heads = (fresh, retry, count)
            if stalled and fresh is not None:
                # Stack is unreachable: the heads not tried are still "due now", but the next
                # pass is at the first retry of the rows tried — not now, which would walk the
                # queue into timeouts pass after pass (the cadence plans from these heads too)
                fresh = max(fresh, min(stack_retry))
                res.stack_heads = (fresh, retry, count)
            res.next_due = _earliest(res.other_due, fresh, retry) if stack else res.other_due
            return res

    def _fly(self, go_other: list[tuple[Delivery, Begin]], go_stack: list[tuple[Delivery, Begin]],
             now: float) -> None:
        """Detached sends: one task per target (Stack's round is one task); each lands its
        outcomes in ``_landed`` and calls ``wake`` (the next pass settles them)."""
        def landed(target: str) -> Callable[[asyncio.Task], None]:
            def done(task: asyncio.Task) -> None:
                self._flying.pop(target, None)
                if not task.cancelled() and self.wake is not None:
                    self.wake()
            return done

        async def other(items: list[tuple[Delivery, Begin]]) -> None:
            outcomes = await send_run(self.channels, items, now)
            # looked up after the await: a pass swaps ``_landed`` for a new list meanwhile, and
            # ``self._landed.append(await …)`` bound the old one first — those outcomes were lost
            # and their rows waited for the 30 s claim lease (docs/decisions.md, "the last breaker round")
            self._landed.append(("other", outcomes))

        async def stack() -> None:
            attempts, requests = await send_stack(self.stack, go_stack, now, self.concurrency)
            for group in attempts:
                self._landed.append(("stack", group))

        by_target: dict[str, list[tuple[Delivery, Begin]]] = {}
        for row, b in go_other:
            by_target.setdefault(row.target, []).append((row, b))
        for target, items in by_target.items():
            task = asyncio.get_running_loop().create_task(other(items))
            self._flying[target] = task
            task.add_done_callback(landed(target))
        if go_stack:
            task = asyncio.get_running_loop().create_task(stack())
            self._flying["stack"] = task
            task.add_done_callback(landed("stack"))

    @property
    def in_flight(self) -> tuple[str, ...]:
        """The targets with a detached attempt in flight (``"stack"`` for Stack's round)."""
        return tuple(self._flying)

    async def drain(self, targets: tuple[str, ...] | None = None) -> None:
        """Wait for the detached attempts of ``targets`` (None: every one) to land."""
        def flying() -> list[asyncio.Task]:
            return [t for name, t in self._flying.items() if targets is None or name in targets]

        while tasks := flying():
            await asyncio.gather(*tasks, return_exceptions=True)
            await asyncio.sleep(0)  # noqa: TID251 - an I/O yield: the done callbacks run

    async def _start(self, now: float, res: PumpResult, stack_retry: list[float], *,
                     commit: bool) -> list[Op]:
        """Settle the detached attempts that landed and send the warm-up probes sender health asks
        for (seed 000 §3; one per sender, the machine keeps one in flight); health is told the
        landings' outcomes and the probes' answers in ONE settlement, in that order, before it is
        asked about any row of the pass.  Committed here when ``commit`` (or when a landing holds
        rows: their claim is undone before the read; or a probe was sent), else the ops are
        returned for the pass's first commit.  A Stack request with no answer at all holds
        Stack's writes until the first retry of the rows it carried (the outage stop)."""
        names = self.gate.probes_due(now)
        if not self._landed and not names:
            return []
        landed, self._landed = self._landed, []
        ops: list[Op] = []
        told: list[Told] = []
        for kind, group in landed:
            if kind == "other":
                more, more_told = self._settle(group, now, res, stack_retry)
            else:
                retry: list[float] = []
                more, more_told = self._settle_attempts([group], now, res, retry)
                stack_retry += retry
                res.stack_requests += 1
                if group and retry and all(o.kind == "retryable" and o.status is None for _, _, o in group):
                    self._stack_stalled = min(retry)
            ops += more
            told += more_told
        if names:
            told += [Attempts.probe_told(name, kind, outcome, now)
                     for name, kind, outcome in await send_probes(self.channels, self.stack, names, now)]
        ops += self._tell(told, now, res)
        if commit or names or any(o.kind == Kind.HELD.value for _, group in landed for _, _, o in group):
            await self.store.commit(ops)
            return []
        return ops

    def _tell(self, told: list[Told], now: float, res: PumpResult) -> list[Op]:
        """Tell sender health ``told`` in ONE settlement: the ops to commit with the outcomes (the
        router events go to ``res``).  An item health fails on (a bug) is logged and skipped; it
        never loses the others, nor any row's own outcome (already settled)."""
        try:
            settled = self.gate.tell(told, now)
        except Exception:  # noqa: BLE001 - health's bug must not lose the round's outcomes
            log.exception("sender health failed to take a settlement of %d items; the outcomes"
                          " are recorded, health skipped them", len(told))
            res.health_errors.extend(t.target for t in told)
            return []
        for f in settled.faults:
            t = f.told
            if t.probe:
                log.error("sender health failed to take the probe answer of %s", t.target, exc_info=f.error)
            else:
                log.error("sender health failed to take the outcome %s of %s (%s); the outcome is"
                          " recorded, health skipped it", t.outcome.kind, t.about, t.target, exc_info=f.error)
            res.health_errors.append(t.target)
        res.events.extend(settled.events)
        return list(settled.ops)

    def _settle_attempts(self, attempts: list[list[tuple[Delivery, Begin, Outcome]]], now: float,
                         res: PumpResult, stack_retry: list[float]) -> tuple[list[Op], list[Told]]:
        """The ops of Stack's attempts of a round — every row settled — and what sender health
        is told: ONCE per attempt (one HTTP request — a batch — or the round's single writes
        sent together), not once per write (module rules)."""
        ops: list[Op] = []
        told: list[Told] = []
        for group in attempts:
            ops += self._settle(group, now, res, stack_retry, report=False)[0]
            if group:
                row = group[0][0]
                t = self.gate.request_told(row.target, row.channel, [o for _, _, o in group], now)
                if t is not None:
                    told.append(t)
        return ops, told

    def _settle(self, outcomes: list[tuple[Delivery, Begin, Outcome]], now: float,
                res: PumpResult, stack_retry: list[float], *,
                report: bool = True) -> tuple[list[Op], list[Told]]:
        """The ops of a round's outcomes — every row's settle and channel ops — and (``report``)
        what sender health is told of them, one attempt per row."""
        ops: list[Op] = []
        told: list[Told] = []
        for row, b, outcome in outcomes:
            if outcome.kind == Kind.HELD.value and row.channel != "stack":
                # claimed with its target's batch, never sent (:func:`.sends.send_run`): the claim
                # is undone — its attempts and due instant as they were, no note, nothing told
                ops.append(SettleDelivery(row.id, row.status, row.attempts, row.next_attempt_at,
                                          row.last_error, None, now))
                continue
            nxt, settle = self.gate.settle(row, outcome, now, attempt=b.attempt)
            ops.append(settle)
            ch = self.channels.get(row.target)
            if ch is not None:
                ops.extend(ch.ops_after(row, outcome, now))
            res.settled.append((row, nxt))
            if row.channel == "stack" and nxt.next_attempt_at is not None:
                stack_retry.append(nxt.next_attempt_at)
            if report and (t := self.gate.told(row, outcome, nxt, now, attempt=b.attempt)) is not None:
                told.append(t)
        return ops, told

    def _begin(self, rows: list[Delivery], now: float,
               res: PumpResult) -> tuple[list[tuple[Delivery, Begin]], list[Op]]:
        """The gate decides the round's rows, asking sender health once (a target whose row waits
        — its pacing, a cooldown — is not decided on its later rows: they stay behind it)."""
        decided, faults = self.gate.admit(rows, now)
        for row, exc in faults:
            log.error("sender health failed asking whether %s may send delivery %s", row.target, row.id,
                      exc_info=exc)
            res.health_errors.append(row.target)
        ops: list[Op] = []
        go: list[tuple[Delivery, Begin]] = []
        for row, b in decided:
            ops.extend(b.ops)
            if b.action == "send":
                go.append((row, b))
            elif b.next is not None:  # a TTL expiry is a terminal outcome: noted like one
                res.settled.append((row, b.next))
        return go, ops

    async def close(self) -> None:
        for task in list(self._flying.values()):
            task.cancel()  # the claimed rows are retried at their ladder time (module rules)
        await asyncio.gather(*list(self._flying.values()), return_exceptions=True)
        for ch in self.channels.values():
            await ch.close()


def _earliest(*dues: float | None) -> float | None:
    vals = [d for d in dues if d is not None]
    return min(vals) if vals else None
