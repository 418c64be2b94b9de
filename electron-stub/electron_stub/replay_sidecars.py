"""The replay's running sidecars: starting machines, sending them frames, driving their virtual
clocks, and reading what only they know (decision log, delivery rows).

Rules / theory of operation
---------------------------
* Virtual time moves only by ``clock.advance_to {t}`` sent to every running machine (awaited: the
  sidecar answers after everything due up to ``t`` ran).  Every answer of a virtual-clock sidecar
  carries ``next_due``, the earliest instant it acts by itself; the driver jumps straight to the
  earliest of the next queue item and every machine's ``next_due``, so a task a timer creates is
  seen at its instant and answered at exactly ``created_at + delay``.  A machine that gave no
  ``next_due`` (an older binary) is driven in steps of at most ``Replay.tick`` seconds.
  The bridge client acknowledges the notification stream by itself (``stream.ack`` every 64
  notifications or after 50 ms of quiet); an ack after every advance was a frame more per
  advance that woke the sidecar for nothing (issue 11 item 3).
* Machines: ``m1`` is started first (data dir ``<data-dir>/m1``) and is *current*.  A machine with
  no TU that is no longer current is stopped gracefully.  ``crash``: SIGKILL every running
  sidecar, restart each on its data dir, ``clock.advance_to(now)``, ``session.login`` every TU it
  had.  (Which machine a ``login`` / ``logout`` goes to: :mod:`electron_stub.replay_lines`.)
* **Stack flushes**: on the virtual clock a sidecar sends Stack's new writes at most every
  ``stack_flush_interval_s`` (``sidecar.router.cadence``), so wherever the driver reads the
  reference Stack it first calls ``stack.flush`` on every running sidecar: before a ``marker``
  expectation, before a fresh machine's first login (``session.logout`` and ``session.login``
  flush by themselves), and at the end before the trace takes Stack's ``marker.acked`` record.
  A ``crash`` flushes nothing (SIGKILL): the restarted sidecar sends the queued rows.
* Reads from every machine of the run: running ones over the bridge (paged: an answer is at
  most 1000 rows and under the frame cap), retired ones from their data dir, read-only.
"""
from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from electron_stub import scenario as sc
from electron_stub.machine import Machine
from electron_stub.report import RunStats
from electron_stub.routing_world import RoutingWorld, read_deliveries
from electron_stub.senders_lines import SenderLines
from electron_stub.stack_server import StackServer

if TYPE_CHECKING:  # pragma: no cover
    from electron_stub.pushed_polls import PollPusher

TIMELINE, ACTION = 0, 1  # queue phases: equal ``t`` keep file order, timeline before harness actions
# requests that take no step of the sidecar (sidecar/app/inputs.py: "the reads that take no step"):
# they change no timer, so the driver keeps the sidecar's next_due across them
READS = frozenset({"tasks.list"})


@dataclass
class VirtualTime:
    """The instant the harness is at: ``now`` (unix seconds), ``start`` the scenario's start."""

    start: float
    now: float


class Sidecars:
    """The machines of one replay, which one is current, which TU is logged in where, and when
    each next acts by itself (``due``: machine -> unix seconds, None = never, absent = unknown)."""

    def __init__(self, clock: VirtualTime, data_dir: Path, *, stack: StackServer, seed: Any,
                 binary: str | None, logs_kept: bool, routing: RoutingWorld, senders: SenderLines,
                 stats: RunStats, frames: Counter,
                 on_notification: Callable[[Machine, str, Any], None],
                 on_request: Callable[[Machine, str, Any], Awaitable[Any]]) -> None:
        self.clock, self.data_dir = clock, data_dir
        self.stack, self.seed, self.binary, self.logs_kept = stack, seed, binary, logs_kept
        self.routing, self.senders, self.stats, self.frames = routing, senders, stats, frames
        self.on_notification, self.on_request = on_notification, on_request
        self.machines: list[Machine] = []
        self.current: Machine | None = None
        self.tu_machine: dict[str, Machine] = {}
        self.due: dict[str, float | None] = {}  # machine -> its next_due (unix s); see note_due
        self.pusher: "PollPusher | None" = None  # poll answers pushed into frames (set by the Replay)

    def running(self) -> list[Machine]:
        return [m for m in self.machines if m.running]

    async def new_machine(self, fresh: bool, operator: str = "") -> Machine:
        name = f"m{len(self.machines) + 1}"
        m = Machine(name, self.data_dir / name, stack_url=self.stack.url, seed=self.seed,
                    binary=self.binary, on_notification=self.on_notification, on_request=self.on_request,
                    fresh=fresh, operator=operator, logs_kept=self.logs_kept,
                    env=self.routing.env() if self.routing.active else None)
        self.machines.append(m)
        await m.start()
        self.note_due(m, await m.call("clock.advance_to", {"t": self.clock.now}))
        await self.senders.setup(m)  # the scenario's sender groups, through the manage API
        if self.routing.rules:  # a new data dir: the scenario's rule set (module rules)
            self.stats.warnings += await self.routing.seed_rules(m.call)
        self.current = m
        return m

    def world_only(self, head: tuple | None, target: float) -> bool:
        """The next queue item ``head`` is an RU going on/offline (no frame for any sidecar) and
        every running sidecar has said it does nothing by itself up to ``target``."""
        if head is None or head[1] != TIMELINE or not isinstance(head[3], sc.Online):
            return False
        return self.idle_until(target)

    def idle_until(self, target: float) -> bool:
        """Every running sidecar has said it does nothing by itself up to ``target`` (seconds
        from start): its ``next_due`` is known and later, or None.  Until then a read that
        takes no step (:data:`READS`) answers what it would after an advance to ``target``."""
        for m in self.machines:
            if m.running:
                due = self.due.get(m.name, 0.0) if m.name in self.due else 0.0
                if due is not None and due - self.clock.start <= target:
                    return False
        return True

    def note_due(self, m: Machine, result: Any) -> None:
        """Remember when ``m`` next acts by itself (unix seconds, None = never, absent = unknown)."""
        if isinstance(result, dict) and "next_due" in result:
            self.due[m.name] = result["next_due"]
        else:
            self.due.pop(m.name, None)

    def next_stop(self, target: float, t_rel: float, tick: float) -> float:
        """The next instant (seconds from start) to advance to on the way to ``target``.

        A task a sidecar creates at its ``next_due`` d is answered no sooner than d + the
        operator's shortest delay (``tick``), so one advance may run up to d + tick and still
        learn of the task before its answer is due; with nothing due, straight to ``target``."""
        start, stop = self.clock.start, target
        for m in self.machines:
            if not m.running:
                continue
            due = self.due[m.name] if m.name in self.due else t_rel + start  # unknown: step
            if due is not None:
                stop = min(stop, max(due - start, t_rel) + tick)
        return max(stop, min(target, t_rel + 1e-6))

    async def send(self, m: Machine, method: str, params: Any) -> Any:
        """One frame to ``m``; a JSON-RPC error answer is a warning and None, not fatal.  An
        advance or an events frame carries the poll answers pushed into it (``pusher``).  A read
        that takes no step (:data:`READS`) leaves ``due`` as it was: its answer (a list) carries
        no ``next_due``, and nothing the sidecar does by itself moved."""
        self.frames[method] += 1
        records: list[Any] = []
        if self.pusher is not None:
            params, records = self.pusher.prepare(m.name, method, params)
        try:
            result = await m.call(method, params)
            if method not in READS:
                self.note_due(m, result)
            if self.pusher is not None:
                self.pusher.settle(m.name, result, records)
            return result
        except Exception as exc:  # noqa: BLE001 - a JSON-RPC error answer is reported, not fatal
            if self.pusher is not None:
                self.pusher.settle(m.name, None, records)
            if type(exc).__name__ != "RemoteError":
                raise
            self.stats.warnings.append(f"{m.name} answered {method} with an error: {exc}")
            return None

    async def advance(self, t_rel: float) -> None:
        self.clock.now = self.clock.start + t_rel
        running = self.running()
        if not running:
            return
        await asyncio.gather(*(self.send(m, "clock.advance_to", {"t": self.clock.now}) for m in running))

    async def flush_stack(self) -> None:
        """Before the driver (or another machine) reads Stack: every running sidecar sends its
        due Stack writes now (``stack.flush``; on the virtual clock they otherwise wait for
        Stack's flush instant, at most ``stack_flush_interval_s``)."""
        for m in self.machines:
            if m.running:
                await self.send(m, "stack.flush", {})

    async def retire_idle(self) -> None:
        for m in self.machines:
            if m.running and m is not self.current and not m.tus:
                await m.stop()

    async def crash(self) -> None:
        self.stats.crashes += 1
        for m in self.running():
            await m.kill()
            await m.start()
            if self.pusher is not None:
                self.pusher.forget(m.name)  # the new process lists its own passes
            self.note_due(m, await m.call("clock.advance_to", {"t": self.clock.now}))
            for tu, (project, operator) in m.tus.items():
                await self.send(m, "session.login", {"tu": tu, "project": project, "operator": operator})

    async def emit(self, line: sc.Emit) -> None:
        """An ``emit`` line: ``events.emit`` on the current machine."""
        m = self.current
        if m is None or not m.running:
            self.stats.warnings.append(f"line {line.lineno}: emit with no running sidecar")
            return
        params = {"source": line.source, "subject": line.subject, "action": line.action,
                  "priority": line.priority, "payload": line.payload}
        if line.dedup_key is not None:
            params["dedup_key"] = line.dedup_key
        if line.ttl_s is not None:
            params["ttl_s"] = line.ttl_s
        await self.send(m, "events.emit", params)

    def manage_call(self, m: Machine) -> Callable[[str, Any], Awaitable[Any]]:
        """A call to ``m`` whose JSON-RPC error is raised: the ``manage`` line's verdict."""
        async def call(method: str, params: Any) -> Any:
            self.frames[method] += 1
            result = await m.call(method, params)  # a JSON-RPC error is the line's verdict
            self.note_due(m, result)
            return result
        return call

    async def why(self, tu: str, ru: str) -> list[dict]:
        """The pair's decision log from every machine of the run (DESIGN §13): ``why`` over the
        bridge from the running ones, the data dir (read-only, as ``sidecar why``) from the
        ones a shift change retired; merged by ``at``."""
        from sidecar.store.decisions import DecisionLogUnavailable, read_data_dir

        rows: list[dict] = []
        for m in self.machines:
            if m.running:  # page through: an answer is at most 1000 rows and under the frame cap
                params: dict[str, Any] = {"tu": tu, "ru": ru}
                while True:
                    answer = await self.send(m, "why", params) or {}
                    rows += answer.get("decisions", [])
                    if answer.get("next") is None:
                        break
                    params = {**params, "after_id": answer["next"]}
            else:
                try:
                    rows += read_data_dir(m.data_dir, tu, ru)
                except DecisionLogUnavailable as exc:
                    self.stats.warnings.append(f"why {tu}/{ru} on {m.name}: {exc}")
        return sorted(rows, key=lambda r: r["at"])

    async def deliveries(self, target: str | None, since: float) -> list[dict[str, Any]]:
        """Every machine's delivery rows to ``target`` of events at or after ``since`` (unix
        seconds): running ones over the bridge, retired ones from their data dir (read-only)."""
        rows: list[dict[str, Any]] = []
        for m in self.machines:
            if m.running:  # page through: an answer is at most 1000 rows and under the frame cap
                params: dict[str, Any] = {"target": target, "since": since, "limit": 1000}
                while True:
                    answer = await self.send(m, "deliveries.list", params) or {}
                    rows += answer.get("deliveries", [])
                    if answer.get("next") is None:
                        break
                    params = {**params, "after_seq": answer["next"]}
            else:
                rows += [r for r in read_deliveries(m.data_dir)
                         if (target is None or r["target"] == target) and r["event_at"] >= since]
        return rows

    def left_queued(self) -> dict[str, dict[str, int]]:
        """Delivery rows still pending in each machine's SQLite: machine -> target -> count
        (read before the temporary data dirs go)."""
        out: dict[str, dict[str, int]] = {}
        for m in self.machines:
            pending = Counter(r["target"] for r in read_deliveries(m.data_dir) if r["status"] == "pending")
            if pending:
                out[m.name] = dict(pending)
        return out
