"""The replay driver: plays Electron, the platforms, the operator and Stack against real sidecars.

Rules / theory of operation
---------------------------
* One priority queue of timeline lines and harness actions (operator answers) ordered by
  ``(t, phase, order)``: equal ``t`` keep file order, timeline before harness actions.
* Virtual time moves only by ``clock.advance_to {t}`` sent to every running machine (awaited: the
  sidecar answers after everything due up to ``t`` ran).  Every answer of a virtual-clock sidecar
  carries ``next_due``, the earliest instant it acts by itself; the driver jumps straight to the
  earliest of the next queue item and every machine's ``next_due``, so a task a timer creates is
  seen at its instant and answered at exactly ``created_at + delay``.  A machine that gave no
  ``next_due`` (an older binary) is driven in steps of at most :attr:`Replay.tick` seconds.
  The bridge client acknowledges the notification stream by itself (``stream.ack`` every 64
  notifications or after 50 ms of quiet); an ack after every advance was a frame more per
  advance that woke the sidecar for nothing (issue 11 item 3).
* Machines: ``m1`` is started first (data dir ``<data-dir>/m1``) and is *current*.  ``login``
  without ``fresh`` goes to the current machine; ``"fresh": true`` starts a new machine with an
  empty data dir that becomes current (the shift change to another operator's computer) — except
  when the current machine was itself started by a fresh login of the same operator, which is
  that operator's computer already (a shift change logs in many TUs, one line each).
  ``logout`` goes to the machine the TU is logged in on.  A machine with no TU that is no longer
  current is stopped gracefully.  ``crash``: SIGKILL every running sidecar, restart each on its
  data dir, ``clock.advance_to(now)``, ``session.login`` every TU it had.
* World lines: encode the line into frames (:mod:`encode`), apply it to the world and the
  reference Stack, deliver the frames to the machine where that TU is logged in (none: Electron
  holds no session for it, the frames are not sent).  After an RU chat message's
  ``platform.event`` is answered, the driver samples whether an ``unanswered_message`` is open
  (pairs blocked either way are not sampled).
* Operator model: on each new ``task.created``, keyed draws over ``(seed, task_id, purpose)``
  decide whether and after what delay the task is answered (chat or mail channel; a Like with
  ``meta.answer_by == "mail"`` is mail; e-mail tasks use the mail parameters).  When due and the
  task is still open, the TU sends through the world + the platform's own-send echo (e-mail:
  ``task.close {task_id, reason: "answered"}``) and the trace gets ``operator.sent``.
* Routing-world lines (``target``, ``rule``, ``emit``, ``target_fault``, ``manage`` of
  ``rules.*``) are played by :mod:`electron_stub.routing_world` (loopback receivers, the
  sidecars' router config, rules on every new data dir); the trace gets ``delivery`` lines (the
  sidecars' ``delivery`` notes) and ``webhook.received`` lines (the receivers' records).
* Sender health (:mod:`electron_stub.senders_lines`): ``group`` lines are created on every
  machine the replay starts, ``manage`` lines of ``groups.*`` / ``senders.*`` are called on the
  current machine (an expected ``error`` must come with that code and change nothing),
  ``sender`` / ``history`` expectations ask the machines (``senders.get``, ``senders.history``).
* **Batched frames** (issue 11 item 3; on unless ``batch=False`` / ``--no-batch``): every world
  line (and an operator's chat/mail answer as a frame's first item) up to the next sync point
  travels in ONE ``platform.events`` frame whose events' ``received_at`` advance the clock —
  instead of ``clock.advance_to`` then ``platform.event`` per line.  Sync points: a line that is
  no platform event, an operator answer, the answer horizon (the operator's shortest delay after
  the earliest instant a task of the frame can be created), and — told by the sidecar itself
  (``stop_at_due``: ``taken`` short, the rest goes back to the queue) — any timer or delivery
  of its own due before a later event.  World changes wait until the sidecar begins their
  event (``batch_seen`` of ``platform.request``), notifications are handed on after the frame in
  stream order with each line's sample at its event's ``seq``: module :mod:`electron_stub.batch`.
  Only while one sidecar runs (an advance goes to every running machine); routing-world lines
  never travel batched.  Only the first event of a frame may have timers before it, so the
  reference Stack and the receivers see every call at the driver instant one by one has.  The
  result — tasks, trace, deliveries, expectations, samples — is the same as without batching;
  the tests compare both.
* **Stack flushes**: on the virtual clock a sidecar sends Stack's new writes at most every
  ``stack_flush_interval_s`` (``sidecar.router.cadence``), so wherever the driver reads the
  reference Stack it first calls ``stack.flush`` on every running sidecar: before a ``marker``
  expectation, before a fresh machine's first login (``session.logout`` and ``session.login``
  flush by themselves), and at the end before the trace takes Stack's ``marker.acked`` record.
  A ``crash`` flushes nothing (SIGKILL): the restarted sidecar sends the queued rows.
* ``expect`` lines are evaluated at their ``t``.  At ``duration_s`` every sidecar is stopped
  gracefully; then the consistency checks run and the report is built.
"""
from __future__ import annotations

import asyncio
import heapq
import itertools
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from electron_stub import answers, batch, encode, keyed
from electron_stub import expect as ex
from electron_stub import scenario as sc
from electron_stub.batch import Frame, Item
from electron_stub.machine import Machine
from electron_stub.progress import ReplayProgress
from electron_stub.report import RunStats, mail_candidates
from electron_stub.routing_world import RoutingWorld, evaluate_delivery, read_deliveries
from electron_stub.senders_lines import SenderLines
from electron_stub.stack_server import StackServer
from electron_stub.trace import Recorder
from electron_stub.world import World

TIMELINE, ACTION = 0, 1
# timeline lines that are no world event (the routing world's are played by their own modules)
NOT_WORLD = (sc.Login, sc.Logout, sc.Crash, sc.StackFault, sc.Expect, sc.Emit, sc.TargetFault, sc.Manage)
# Routing-world lines (README "Routing world") the harness cannot play yet: each yields a failed
# result naming the issue that brings it, so such a scenario never passes vacuously.  Every
# routing-world line is played today (routing_world, senders_lines).
ROUTING_LINES: dict[type, str] = {}
SENDER_METHODS = ("groups.", "senders.")  # manage lines sender health plays (senders_lines)


class Replay:
    """One replay of ``scenario``.  ``data_dir`` None: a temporary directory."""

    def __init__(self, scenario: sc.Scenario, *, data_dir: str | Path | None = None,
                 binary: str | None = None, quiet: bool = False, logs_kept: bool | None = None,
                 batch: bool = True) -> None:
        self.sc, self.binary, self.quiet = scenario, binary, quiet
        self.batch = batch  # world events with their advance in one platform.events frame
        self._frame: Frame | None = None  # the platform.events frame in flight (module batch)
        self.frame_events: Counter = Counter()  # events taken per platform.events frame -> frames
        # the machines' stderr logs outlive the run only in a data dir the caller keeps
        self.logs_kept = bool(data_dir) if logs_kept is None else logs_kept
        self._tmp = None if data_dir else tempfile.TemporaryDirectory(prefix="sidecar-stub-")
        self.data_dir = Path(data_dir or self._tmp.name)
        self.start = scenario.start
        self.now = self.start  # virtual instant the harness is at (unix seconds)
        self.world = World.from_scenario(scenario)
        self.stack = StackServer(seed=scenario.header.seed, now_fn=lambda: self.now)
        self.stack.seed_from_scenario(scenario)
        self.rec = Recorder(self.start)
        self.routing = RoutingWorld(scenario, now_fn=lambda: self.now)
        self.results: list[ex.Result] = []
        self.samples: list[ex.MessageSample] = []
        self.stats = RunStats(scenario=scenario.header.name or Path(scenario.path).name)
        self.frames: Counter = Counter()
        self.requests: Counter = Counter()
        self.op_sent: Counter = Counter()
        self.machines: list[Machine] = []
        self.current: Machine | None = None
        self.tu_machine: dict[str, Machine] = {}
        self.queue: list[tuple[float, int, int, Any]] = []
        self._order = itertools.count()
        op = scenario.header.operator
        lo = min(op.chat_delay_s[0], op.mail_delay_s[0])
        self.answer_lo = lo  # no task is answered sooner after its creation (module batch)
        self.tick = max(0.5, lo)
        self.due: dict[str, float | None] = {}  # machine -> its next_due (unix s); see _note_due
        self._bar: ReplayProgress | None = None  # progress display, made at the first advance
        self.senders = SenderLines([x for x in scenario.world if isinstance(x, sc.Group)], self.results)

    # ---- callbacks from machines -----------------------------------------------------------

    def on_notification(self, m: Machine, method: str, params: Any) -> None:
        if self._frame is not None:  # handed on after the frame, in order (module batch)
            self._frame.held.append((m, method, params))
            return
        self._notification(m, method, params)

    def _notification(self, m: Machine, method: str, params: Any) -> None:
        if not isinstance(params, dict):
            return
        if method == "task.created":
            task = self.rec.task_created(params)
            if task is not None:
                self._plan_answer(task)
        elif method == "task.closed":
            self.rec.task_closed(params)
        elif method == "task.updated":
            self.rec.task_updated(params, self.now)
        elif method == "chain.attempt":
            self.rec.chain_attempt(params, self.now)
        elif method == "sender.state":
            self.rec.sender_state(params, self.now)
        elif method == "delivery":
            self.rec.delivery(params, self.now)

    async def on_request(self, m: Machine, method: str, params: Any) -> Any:
        if method != "platform.request" or not isinstance(params, dict):
            raise answers.rpc_error(-32601, f"electron-stub does not serve {method!r}")
        if self._frame is not None:  # the world as of the event being handled (module batch)
            at = self._frame.seen(params.get("batch_seen") or 0)
            if at is not None:
                self.now = self.start + at
        name = f"{params.get('project')}.{params.get('method')}"
        crit = (params.get("params") or {}).get("criteria") if isinstance(params.get("params"), dict) else None
        self.requests[name + (f"[{','.join(map(str, crit))}]" if isinstance(crit, list) else "")] += 1
        try:
            return answers.answer(self.world, params.get("project", ""), params.get("tu", ""),
                                  params.get("method", ""), params.get("params") or {}, self.now)
        except Exception:
            self.stats.request_errors += 1
            raise

    # ---- operator model --------------------------------------------------------------------

    def _plan_answer(self, task: Any) -> None:
        op, seed = self.sc.header.operator, self.sc.header.seed
        channel = keyed.channel_of(task.type, task.meta)
        p, (lo, hi) = ((op.chat_answer_p, op.chat_delay_s) if channel == "chat"
                       else (op.mail_answer_p, op.mail_delay_s))
        if not keyed.chance(seed, p, task.task_id, "answer"):
            return
        due = task.created_at - self.start + keyed.uniform(seed, lo, hi, task.task_id, "delay")
        self._push(due, ACTION, ("answer", task.task_id, channel))

    async def _answer(self, task_id: str, channel: str, t: float) -> None:
        task = self.rec.tasks.get(task_id)
        if task is None or not task.is_open:
            return
        m = self.tu_machine.get(task.tu)
        if m is None or not m.running:
            return
        if t < self.now - self.start - 1e-6:
            self.stats.operator_late += 1
        if channel == "email":
            await self._send(m, "task.close", {"task_id": task_id, "reason": "answered"})
        else:
            item_id = f"op-{task_id}"
            self.world.record_send(task.project, task.tu, task.ru, channel, item_id, self.now, body="…")
            method, params = encode.own_send(task.project, task.tu, task.ru, channel, item_id, self.now, "…")
            await self._send(m, method, params)
        self.op_sent[channel] += 1
        self.rec.operator_sent(self.now, channel, task.project, task.tu, task.ru, task_id)

    # ---- machines --------------------------------------------------------------------------

    async def _new_machine(self, fresh: bool, operator: str = "") -> Machine:
        name = f"m{len(self.machines) + 1}"
        m = Machine(name, self.data_dir / name, stack_url=self.stack.url, seed=self.sc.header.seed,
                    binary=self.binary, on_notification=self.on_notification, on_request=self.on_request,
                    fresh=fresh, operator=operator, logs_kept=self.logs_kept,
                    env=self.routing.env() if self.routing.active else None)
        self.machines.append(m)
        await m.start()
        self._note_due(m, await m.call("clock.advance_to", {"t": self.now}))
        await self.senders.setup(m)  # the scenario's sender groups, through the manage API
        if self.routing.rules:  # a new data dir: the scenario's rule set (module rules)
            self.stats.warnings += await self.routing.seed_rules(m.call)
        self.current = m
        return m

    def _world_only(self, target: float) -> bool:
        """The next item is an RU going on/offline (no frame for any sidecar) and every running
        sidecar has said it does nothing by itself up to ``target``."""
        if not self.queue or self.queue[0][1] != TIMELINE or not isinstance(self.queue[0][3], sc.Online):
            return False
        for m in self.machines:
            if m.running:
                due = self.due.get(m.name, 0.0) if m.name in self.due else 0.0
                if due is not None and due - self.start <= target:
                    return False
        return True

    def _note_due(self, m: Machine, result: Any) -> None:
        """Remember when ``m`` next acts by itself (unix seconds, None = never, absent = unknown)."""
        if isinstance(result, dict) and "next_due" in result:
            self.due[m.name] = result["next_due"]
        else:
            self.due.pop(m.name, None)

    def _next_stop(self, target: float, t_rel: float) -> float:
        """The next instant (seconds from start) to advance to on the way to ``target``.

        A task a sidecar creates at its ``next_due`` d is answered no sooner than d + the
        operator's shortest delay (:attr:`tick`), so one advance may run up to d + tick and still
        learn of the task before its answer is due; with nothing due, straight to ``target``."""
        stop = target
        for m in self.machines:
            if not m.running:
                continue
            due = self.due[m.name] if m.name in self.due else t_rel + self.start  # unknown: step
            if due is not None:
                stop = min(stop, max(due - self.start, t_rel) + self.tick)
        return max(stop, min(target, t_rel + 1e-6))

    async def _send(self, m: Machine, method: str, params: Any) -> Any:
        self.frames[method] += 1
        try:
            result = await m.call(method, params)
            self._note_due(m, result)
            return result
        except Exception as exc:  # noqa: BLE001 - a JSON-RPC error answer is reported, not fatal
            if type(exc).__name__ != "RemoteError":
                raise
            self.stats.warnings.append(f"{m.name} answered {method} with an error: {exc}")
            return None

    async def _advance(self, t_rel: float) -> None:
        self.now = self.start + t_rel
        running = [m for m in self.machines if m.running]
        if not running:
            return
        await asyncio.gather(*(self._send(m, "clock.advance_to", {"t": self.now}) for m in running))

    async def _flush_stack(self) -> None:
        """Before the driver (or another machine) reads Stack: every running sidecar sends its
        due Stack writes now (``stack.flush``; on the virtual clock they otherwise wait for
        Stack's flush instant, at most ``stack_flush_interval_s``)."""
        for m in self.machines:
            if m.running:
                await self._send(m, "stack.flush", {})

    async def _retire_idle(self) -> None:
        for m in self.machines:
            if m.running and m is not self.current and not m.tus:
                await m.stop()

    async def _crash(self) -> None:
        self.stats.crashes += 1
        for m in [m for m in self.machines if m.running]:
            await m.kill()
            await m.start()
            self._note_due(m, await m.call("clock.advance_to", {"t": self.now}))
            for tu, (project, operator) in m.tus.items():
                await self._send(m, "session.login", {"tu": tu, "project": project, "operator": operator})

    async def _why(self, tu: str, ru: str) -> list[dict]:
        """The pair's decision log from every machine of the run (DESIGN §13): ``why`` over the
        bridge from the running ones, the data dir (read-only, as ``sidecar why``) from the
        ones a shift change retired; merged by ``at``."""
        from sidecar.store.decisions import DecisionLogUnavailable, read_data_dir

        rows: list[dict] = []
        for m in self.machines:
            if m.running:  # page through: an answer is at most 1000 rows and under the frame cap
                params: dict[str, Any] = {"tu": tu, "ru": ru}
                while True:
                    answer = await self._send(m, "why", params) or {}
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

    # ---- the routing world ------------------------------------------------------------------

    async def _emit(self, line: sc.Emit) -> None:
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
        await self._send(m, "events.emit", params)

    def _manage_call(self, m: Machine):
        async def call(method: str, params: Any) -> Any:
            self.frames[method] += 1
            result = await m.call(method, params)  # a JSON-RPC error is the line's verdict
            self._note_due(m, result)
            return result
        return call

    async def _deliveries(self, target: str | None, since: float) -> list[dict[str, Any]]:
        """Every machine's delivery rows to ``target`` of events at or after ``since`` (unix
        seconds): running ones over the bridge, retired ones from their data dir (read-only)."""
        rows: list[dict[str, Any]] = []
        for m in self.machines:
            if m.running:  # page through: an answer is at most 1000 rows and under the frame cap
                params: dict[str, Any] = {"target": target, "since": since, "limit": 1000}
                while True:
                    answer = await self._send(m, "deliveries.list", params) or {}
                    rows += answer.get("deliveries", [])
                    if answer.get("next") is None:
                        break
                    params = {**params, "after_seq": answer["next"]}
            else:
                rows += [r for r in read_deliveries(m.data_dir)
                         if (target is None or r["target"] == target) and r["event_at"] >= since]
        return rows

    # ---- the loop --------------------------------------------------------------------------

    def _push(self, t: float, phase: int, item: Any) -> None:
        heapq.heappush(self.queue, (t, phase, next(self._order), item))

    async def run(self) -> int:
        """Play the whole scenario; returns the number of lines played."""
        wall0 = time.monotonic()
        self.stack.start()
        self.routing.start()
        played = 0
        try:
            for line in self.sc.world:
                if type(line) in ROUTING_LINES:
                    self.results.append(ex.not_yet(line.lineno, line.kind_name(), ROUTING_LINES[type(line)]))
            for line in self.sc.timeline:
                self._push(line.t, TIMELINE, line)
            await self._new_machine(fresh=False)
            end, t_rel = self.sc.header.duration_s, 0.0
            while True:
                nxt = self.queue[0][0] if self.queue else end
                target = min(nxt, end)
                if t_rel < target - 1e-9:
                    stop = self._next_stop(target, t_rel)
                    if stop >= target and self._world_only(target):
                        # no sidecar acts before ``target`` and the line sends it nothing: the
                        # world changes without a round trip (the next advance sees it in time).
                        # The sidecars' clocks stay at ``t_rel``: a line at the same instant
                        # that sends them something is sent after its own advance, never to a
                        # sidecar whose clock lags behind the line
                        self.now = self.start + target
                        await self._apply(heapq.heappop(self.queue)[3])
                        played += 1
                        continue
                    if stop >= target - 1e-9 and (taken := self._take_frame(end)) is not None:
                        t_rel, lines = await self._play_frame(*taken)
                        played += lines
                        self._progress(wall0, t_rel, end)
                        continue
                    t_rel = stop
                    await self._advance(t_rel)
                    self._progress(wall0, t_rel, end)
                    continue
                if not self.queue or self.queue[0][0] > end:
                    break
                t, phase, _, item = heapq.heappop(self.queue)
                if phase == TIMELINE:
                    await self._apply(item)
                    played += 1
                else:
                    await self._answer(item[1], item[2], t)
            await self._flush_stack()  # the end: Stack's record is read for the trace
            self.rec.add_marker_acks(self.stack.acked_markers())
            self.rec.add_webhooks(self.routing.trace_lines())
            for m in self.machines:
                if m.running:
                    await m.stop()
        finally:
            if self._bar is not None:
                self._bar.close()
            for m in self.machines:
                if m.running:
                    await m.kill()
            self.stack.stop()
            self.routing.stop()
            self._finish_stats(time.monotonic() - wall0)
        return played

    def _progress(self, wall0: float, t_rel: float, end: float) -> None:
        """A live bar on a terminal, else a stderr line every 10 s of wall time (not ``quiet``)."""
        if self._bar is None:
            self._bar = ReplayProgress(end, quiet=self.quiet)
        self._bar.update(t_rel, len(self.rec.tasks), sum(self.frames.values()))

    def _finish_stats(self, wall: float) -> None:
        s = self.stats
        s.wall_s, s.virtual_s = wall, self.now - self.start
        s.frames_sent, s.requests_answered = dict(self.frames), dict(self.requests)
        s.operator_sent, s.stack = dict(self.op_sent), dict(self.stack.counters)
        s.mail_candidates = mail_candidates(self.stack.candidates)
        s.stack_requests, s.stack_writes = self.stack.requests_by_kind()
        s.machines = len(self.machines)
        s.exits = [e for m in self.machines for e in m.exits]
        s.warnings += [w for m in self.machines for w in m.warnings]
        for m in self.machines:  # before the temporary data dirs go
            pending = Counter(r["target"] for r in read_deliveries(m.data_dir) if r["status"] == "pending")
            if pending:
                s.left_queued[m.name] = dict(pending)
        if self._tmp is not None:
            self._tmp.cleanup()

    def verdict(self) -> list[ex.Violation]:
        return ex.consistency(self.rec, self._email_received, self.samples, scenario=self.sc,
                              end=self.now, stack_conflicts=self.stack.conflicts)

    def _email_received(self, tu: str, ru: str) -> list[float]:
        project = self.world.tus.get(tu, "")
        pair = self.world.pairs.get((project, tu, ru))
        return [e["received_at"] for e in pair.emails] if pair else []

    # ---- one timeline line -----------------------------------------------------------------

    async def _apply(self, line: Any) -> None:
        k, now = type(line), self.now
        if k is sc.Login:
            m = self.current
            fresh_same = m is not None and m.fresh and m.operator == line.operator and line.tu not in m.tus
            if line.fresh and not fresh_same:
                await self._flush_stack()  # the new machine's login reads Stack
                m = await self._new_machine(fresh=True, operator=line.operator)
            assert m is not None
            old = self.tu_machine.get(line.tu)
            if old is not None and old is not m:
                self.stats.warnings.append(f"line {line.lineno}: {line.tu} logged in on {m.name} while "
                                           f"still logged in on {old.name}")
            m.tus[line.tu] = (line.project, line.operator)
            self.tu_machine[line.tu] = m
            self.rec.context(now, "login", machine=m.name, project=line.project, tu=line.tu, operator=line.operator)
            await self._send(m, "session.login", {"tu": line.tu, "project": line.project, "operator": line.operator})
            await self._retire_idle()
        elif k is sc.Logout:
            m = self.tu_machine.pop(line.tu, None)
            self.rec.context(now, "logout", machine=m.name if m else None, project=line.project, tu=line.tu)
            if m is not None:
                m.tus.pop(line.tu, None)
                await self._send(m, "session.logout", {"tu": line.tu})
                await self._retire_idle()
        elif k is sc.Crash:
            self.rec.context(now, "crash", machines=[m.name for m in self.machines if m.running])
            await self._crash()
        elif k is sc.StackFault:
            self.stack.set_fault(line.mode, line.value)
            self.rec.context(now, "stack", mode=line.mode, value=line.value)
        elif k is sc.Expect and line.what == "decision":
            rows = await self._why(line.tu, line.ru)
            self.results.append(ex.evaluate_decision(line, rows, self.start))
        elif k is sc.Expect and line.what == "delivery":
            since = self.start + (line.between or (0.0, 0.0))[0] - ex.TOLERANCE_S
            self.results.append(evaluate_delivery(line, await self._deliveries(line.target, since), self.start))
        elif k is sc.Expect and line.what == "sender" and self.current is not None:
            self.results.append(await self.senders.expect_sender(self.current, line))
        elif k is sc.Expect and line.what == "history":
            self.results.append(await self.senders.expect_history(self.machines, line, self.start))
        elif k is sc.Expect:
            if line.what == "marker":
                await self._flush_stack()  # the check reads the reference Stack
            self.results.append(ex.evaluate(line, self.rec, self.stack.marker))
        elif k is sc.Emit:
            await self._emit(line)
        elif k is sc.TargetFault:
            self.rec.context(now, "target_fault", target=line.target, mode=line.mode, value=line.value)
            problem = self.routing.fault(line)
            if problem:
                self.stats.warnings.append(problem)
        elif k is sc.Manage and line.method.startswith(SENDER_METHODS) and self.current is not None:
            await self.senders.manage(self.current, line)
        elif k is sc.Manage:
            assert self.current is not None
            self.results.append(await self.routing.manage(line, self._manage_call(self.current)))
        elif k in ROUTING_LINES:
            self.results.append(ex.not_yet(line.lineno, line.kind_name(), ROUTING_LINES[k]))
        else:
            await self._world_line(line)

    # ---- batched frames (module electron_stub.batch) ----------------------------------------

    def _take_frame(self, end: float) -> tuple[Machine, Frame] | None:
        """Pop the queue items that travel in the next ``platform.events`` frame (module
        ``batch``: up to the next sync point), or None when the queue's head does not."""
        if not self.batch or not self.queue:
            return None
        running = [m for m in self.machines if m.running]
        if len(running) != 1:
            return None  # an advance goes to every running machine
        m = running[0]
        first = self._frame_item(self.queue[0], m, first=True)
        if first is None or first.event is None:
            return None
        heapq.heappop(self.queue)
        items, n = [first], 1
        if m.name in self.due:  # unknown next_due (an older binary): one item a frame
            due = self.due[m.name]
            # no task of this frame is created before ``created`` nor answered sooner than
            # answer_lo after its creation: items before the horizon precede every such answer
            created = first.t if due is None else min(first.t, due - self.start)
            horizon = created + self.answer_lo
            while self.queue and n < batch.MAX_EVENTS:
                entry = self.queue[0]
                if entry[0] >= horizon or entry[0] > end:
                    break
                it = self._frame_item(entry, m, first=False)
                if it is None:
                    break
                heapq.heappop(self.queue)
                items.append(it)
                n += it.event is not None
        while items[-1].event is None:  # trailing world-only items need no frame
            heapq.heappush(self.queue, items.pop().entry)
        return m, Frame(items)

    def _frame_item(self, entry: tuple, m: Machine, *, first: bool) -> Item | None:
        """``entry`` as an item of a frame to ``m`` (module ``batch``), or None: it ends the frame."""
        t, phase, _, it = entry
        now = self.start + t
        if phase == ACTION:
            _, task_id, channel = it
            task = self.rec.tasks.get(task_id)
            if not first or channel == "email" or task is None or not task.is_open \
                    or self.tu_machine.get(task.tu) is not m or m.name not in self.due:
                return None
            due = self.due[m.name]
            if due is not None and due - self.start <= t:
                return None  # the sidecar acts first: is the task still open then? one by one
            item_id = f"op-{task_id}"
            method, params = encode.own_send(task.project, task.tu, task.ru, channel, item_id, now, "…")
            if method != "platform.event":
                return None

            def sent() -> None:
                self.op_sent[channel] += 1
                self.rec.operator_sent(now, channel, task.project, task.tu, task.ru, task_id)
            return Item(entry, params, apply=lambda: self.world.record_send(
                task.project, task.tu, task.ru, channel, item_id, now, body="…"), after=sent)
        if type(it) in NOT_WORLD or type(it) in ROUTING_LINES:
            return None
        frames = encode.frames_for(it, now, self.world)
        tu = getattr(it, "tu", None)
        to = self.tu_machine.get(tu) if tu else None
        apply = lambda: self._apply_world(it, now)  # noqa: E731
        if to is None or not to.running or not frames:
            return Item(entry, None, apply=apply)  # no frame for any sidecar: the world alone
        if to is not m or len(frames) != 1 or frames[0][0] != "platform.event":
            return None
        return Item(entry, frames[0][1], apply=apply, after=lambda: self._sample(it, now))

    async def _play_frame(self, m: Machine, frame: Frame) -> tuple[float, int]:
        """Send ``frame`` as one ``platform.events`` frame (its advance inside); put back what
        the sidecar did not take; returns the instant reached (seconds from start) and the
        timeline lines played."""
        events = frame.events
        self.now = self.start + frame.items[0].t
        self._frame = frame
        try:
            answer = await self._send(m, "platform.events", {"events": events, "stop_at_due": True})
        finally:
            self._frame = None
        taken, results = len(events), []
        if isinstance(answer, dict):  # an error answer (reported by _send): as if all were taken
            taken = max(1, min(taken, int(answer.get("taken", taken))))
            results = answer.get("results") or []
            for ev, res in zip(events, results):
                if isinstance(res, dict) and not res.get("ok", True):
                    self.stats.warnings.append(
                        f"{m.name} answered platform.event ({ev.get('name')}) with an error: "
                        f"{(res.get('error') or {}).get('message')}")
        done, rest = frame.taken_items(taken)
        frame.seen(taken)
        for it in rest:
            heapq.heappush(self.queue, it.entry)
        self.now = self.start + done[-1].t
        self.frame_events[taken] += 1
        frame.hand_on(done, results, self._notification)
        return done[-1].t, sum(it.entry[1] == TIMELINE for it in done)

    def _apply_world(self, line: Any, at: float | None = None) -> None:
        """``line``'s change to the world and to the reference Stack at ``at`` (unix seconds;
        None: :attr:`now`)."""
        k = type(line)
        self.world.apply(line, self.now if at is None else at)
        if k is sc.Favorite:
            self.stack.update_favorite(line.project, line.tu, line.ru, line.changes())
        elif k is sc.Limits:
            fav = self.world.favorite(line.project, line.tu, line.ru) or {}
            self.stack.update_favorite(line.project, line.tu, line.ru,
                                       {"chat_limit": fav.get("chat_limit"), "mail_limit": fav.get("mail_limit")},
                                       listed_only=True)
        elif k in (sc.Block, sc.Unblock):
            field = "blocked_by_tu" if line.by == "tu" else "blocked_by_ru"
            self.stack.update_favorite(line.project, line.tu, line.ru, {field: k is sc.Block}, listed_only=True)

    def _sample(self, line: Any, at: float | None = None) -> None:
        """After an RU chat message was handled: is an ``unanswered_message`` open for the pair?"""
        if type(line) is sc.Message and line.from_ == "ru":
            fav = self.world.favorite(line.project, line.tu, line.ru) or {}
            if not (fav.get("blocked_by_tu") or fav.get("blocked_by_ru")):
                t = self.rec.open_task(line.tu, line.ru, "unanswered_message")
                self.samples.append(ex.MessageSample(at=(self.now if at is None else at) - self.start, tu=line.tu, ru=line.ru,
                                                     msg_id=line.id, lineno=line.lineno,
                                                     open_task=t.task_id if t else None))

    async def _world_line(self, line: Any) -> None:
        frames = encode.frames_for(line, self.now, self.world)
        self._apply_world(line)
        tu = getattr(line, "tu", None)
        m = self.tu_machine.get(tu) if tu else None
        if m is None or not m.running:
            return
        for method, params in frames:
            await self._send(m, method, params)
        self._sample(line)
