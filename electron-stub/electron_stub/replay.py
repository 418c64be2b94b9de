"""The replay driver: plays Electron, the platforms, the operator and Stack against real sidecars.

Rules / theory of operation
---------------------------
* One priority queue of timeline lines and harness actions (operator answers) ordered by
  ``(t, phase, order)``: equal ``t`` keep file order, timeline before harness actions.
* The loop jumps from instant to instant (:mod:`electron_stub.replay_sidecars`: virtual time,
  ``next_due``, machines, Stack flushes), plays a batched frame where one fits
  (:mod:`electron_stub.replay_frames`), else pops the queue's head: a timeline line or an
  operator item (:mod:`electron_stub.replay_lines`: sessions, world lines, expectations,
  routing world, sender health; :mod:`electron_stub.operator_model`: first looks and the
  backlog worked in the sidecar's order).
* An RU going on/offline that no sidecar acts on before its instant changes the world without a
  round trip; the sidecars' clocks stay where they were.
* The driver is the machines' callee: notifications go to the trace recorder (a new
  ``task.created`` to the operator model; held while a frame is in flight), ``platform.request``
  — or a step's several in one ``platform.requests`` — is answered from the world as of the
  asking step's instant (its ``at``; inside a frame the lines up to then are applied first).
  A grid poll pass whose answer is known before the frame goes is answered inside the frame
  instead (:mod:`electron_stub.pushed_polls`); both write the same ``platform.request`` trace
  line (:meth:`Replay._record`).
* ``expect`` lines are evaluated at their ``t``.  At ``duration_s`` every sidecar is stopped
  gracefully; then the consistency checks run and the report is built.
"""
from __future__ import annotations

import heapq
import itertools
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from electron_stub import answers
from electron_stub import expect as ex
from electron_stub import scenario as sc
from electron_stub.machine import Machine
from electron_stub.operator_model import OperatorModel
from electron_stub.progress import ReplayProgress
from electron_stub.pushed_polls import PollPusher
from electron_stub.replay_frames import FramePlayer
from electron_stub.replay_lines import NOT_WORLD, ROUTING_LINES, SENDER_METHODS, LinePlayer
from electron_stub.replay_sidecars import ACTION, TIMELINE, Sidecars, VirtualTime
from electron_stub.report import RunStats, mail_candidates
from electron_stub.routing_world import RoutingWorld
from electron_stub.senders_lines import SenderLines
from electron_stub.stack_server import StackServer
from electron_stub.trace import Recorder
from electron_stub.world import World

__all__ = ["ACTION", "NOT_WORLD", "ROUTING_LINES", "SENDER_METHODS", "TIMELINE", "Replay"]


class Replay:
    """One replay of ``scenario``.  ``data_dir`` None: a temporary directory."""

    def __init__(self, scenario: sc.Scenario, *, data_dir: str | Path | None = None,
                 binary: str | None = None, quiet: bool = False, logs_kept: bool | None = None,
                 batch: bool = True, push: bool = True) -> None:
        self.sc, self.binary, self.quiet = scenario, binary, quiet
        self.batch = batch  # world events with their advance in one platform.events frame
        self.frame_events: Counter = Counter()  # events taken per platform.events frame -> frames
        # the machines' stderr logs outlive the run only in a data dir the caller keeps
        self.logs_kept = bool(data_dir) if logs_kept is None else logs_kept
        self._tmp = None if data_dir else tempfile.TemporaryDirectory(prefix="sidecar-stub-")
        self.data_dir = Path(data_dir or self._tmp.name)
        self.start = scenario.start
        self.clock = VirtualTime(start=self.start, now=self.start)  # the instant the harness is at
        self.world = World.from_scenario(scenario)
        self.stack = StackServer(seed=scenario.header.seed, now_fn=lambda: self.clock.now)
        self.stack.seed_from_scenario(scenario)
        self.rec = Recorder(self.start)
        self.routing = RoutingWorld(scenario, now_fn=lambda: self.clock.now)
        self.results: list[ex.Result] = []
        self.samples: list[ex.MessageSample] = []
        self.stats = RunStats(scenario=scenario.header.name or Path(scenario.path).name)
        self.frames: Counter = Counter()
        self.requests: Counter = Counter()
        self.request_frames: Counter = Counter()  # round trips: platform.request / platform.requests
        self.op_sent: Counter = Counter()
        self.queue: list[tuple[float, int, int, Any]] = []
        self._order = itertools.count()
        op = scenario.header.operator
        lo = min(op.chat_delay_s[0], op.mail_delay_s[0])
        self.answer_lo = lo  # no task is answered sooner after its creation (module batch)
        self.tick = max(0.5, lo)
        self._bar: ReplayProgress | None = None  # progress display, made at the first advance
        self.senders = SenderLines([x for x in scenario.world if isinstance(x, sc.Group)], self.results)
        self.sidecars = Sidecars(self.clock, self.data_dir, stack=self.stack, seed=scenario.header.seed,
                                 binary=binary, logs_kept=self.logs_kept, routing=self.routing,
                                 senders=self.senders, stats=self.stats, frames=self.frames,
                                 on_notification=self.on_notification, on_request=self.on_request)
        self.lines = LinePlayer(scenario, self.clock, world=self.world, stack=self.stack, rec=self.rec,
                                routing=self.routing, senders=self.senders, sidecars=self.sidecars,
                                results=self.results, samples=self.samples, stats=self.stats)
        self.operator = OperatorModel(scenario, self.clock, rec=self.rec, world=self.world,
                                      sidecars=self.sidecars, lines=self.lines, stats=self.stats,
                                      op_sent=self.op_sent, push=self._push)
        # poll answers pushed into the frame: no round trip for a grid pass whose answer is known
        self.pusher = PollPusher(self.clock, self.world, ahead_s=self.tick, enabled=push, record=self._record,
                                 unrecord=self._unrecord, frame_of=lambda: self.frame_player.frame)
        self.sidecars.pusher = self.pusher
        self.frame_player = FramePlayer(self.clock, self.queue, enabled=batch, answer_lo=self.answer_lo,
                                        sidecars=self.sidecars, lines=self.lines, world=self.world,
                                        rec=self.rec, stats=self.stats, op_sent=self.op_sent,
                                        frame_events=self.frame_events, deliver=self._notification,
                                        operator=self.operator)

    @property
    def now(self) -> float:
        """The virtual instant the harness is at (unix seconds)."""
        return self.clock.now

    @now.setter
    def now(self, value: float) -> None:
        self.clock.now = value

    @property
    def machines(self) -> list[Machine]:
        return self.sidecars.machines

    @property
    def current(self) -> Machine | None:
        return self.sidecars.current

    @property
    def tu_machine(self) -> dict[str, Machine]:
        return self.sidecars.tu_machine

    @property
    def due(self) -> dict[str, float | None]:
        """machine -> its next_due (unix s; None = never, absent = unknown)."""
        return self.sidecars.due

    # ---- callbacks from machines -----------------------------------------------------------

    def on_notification(self, m: Machine, method: str, params: Any) -> None:
        frame = self.frame_player.frame
        if frame is not None:  # handed on after the frame, in order (module batch)
            frame.held.append((m, method, params))
            return
        self._notification(m, method, params)

    def _notification(self, m: Machine, method: str, params: Any) -> None:
        if not isinstance(params, dict):
            return
        if method == "task.created":
            task = self.rec.task_created(params)
            if task is not None:
                self.operator.plan(task)
        elif method == "task.closed":
            self.rec.task_closed(params)
        elif method == "task.updated":
            self.rec.task_updated(params, self.now)
        elif method == "chain.attempt":
            self.rec.chain_attempt(params, self.now)
        elif method == "sender.state":
            self.rec.sender_state(params, self.now)
        elif method == "delivery":
            self.rec.delivery(params, self.now, machine=m.name)

    async def on_request(self, m: Machine, method: str, params: Any) -> Any:
        """``platform.request`` (one answer) or ``platform.requests`` (a step's several:
        ``{"results": [{"result"} | {"error": {"code", "message"}}]}``), each answered from the
        world as of the asking step's instant."""
        if method == "platform.requests" and isinstance(params, dict) and isinstance(params.get("requests"), list):
            self.request_frames["platform.requests"] += 1
            results: list[dict[str, Any]] = []
            for one in params["requests"]:
                try:
                    results.append({"result": self._answer(one)})
                except Exception as exc:  # noqa: BLE001 - each item's error is its own result
                    code, message = getattr(exc, "code", -32603), getattr(exc, "message", str(exc))
                    results.append({"error": {"code": code, "message": message}})
            return {"results": results}
        if method != "platform.request" or not isinstance(params, dict):
            raise answers.rpc_error(-32601, f"electron-stub does not serve {method!r}")
        self.request_frames["platform.request"] += 1
        return self._answer(params)

    def _answer(self, params: Any) -> Any:
        """One request's answer (module rules: the world as of its ``at``)."""
        if not isinstance(params, dict):
            raise answers.rpc_error(-32602, "a platform request's params must be an object")
        at = params.get("at")
        at = float(at) if isinstance(at, (int, float)) and not isinstance(at, bool) else None
        frame = self.frame_player.frame
        if frame is not None:  # the world as of the requesting step (module batch)
            frame.skip(params.get("batch_skipped"))
            seen = frame.seen(params.get("batch_seen") or 0, at)
            if at is None and seen is not None:
                at = self.start + seen
        now = self.now if at is None else at  # the requesting step's instant, in both modes
        self._record(now, params)
        try:
            return answers.answer(self.world, params.get("project", ""), params.get("tu", ""),
                                  params.get("method", ""), params.get("params") or {}, now)
        except Exception:
            self.stats.request_errors += 1
            raise

    def _record(self, now: float, params: dict) -> tuple:
        """A request's ``platform.request`` trace line and counts, at ``now`` (unix seconds):
        made by round trip, or pushed into a frame (:mod:`electron_stub.pushed_polls`).
        Returns the handle :meth:`_unrecord` takes."""
        name = f"{params.get('project')}.{params.get('method')}"
        crit = (params.get("params") or {}).get("criteria") if isinstance(params.get("params"), dict) else None
        key = name + (f"[{','.join(map(str, crit))}]" if isinstance(crit, list) else "")
        self.requests[key] += 1
        return key, self.rec.platform_request(now, str(params.get("project", "")), str(params.get("tu", "")),
                                              str(params.get("method", "")), params.get("params"))

    def _unrecord(self, handle: tuple) -> None:
        """Take back a :meth:`_record` (a pushed answer the sidecar did not use)."""
        key, rec_handle = handle
        self.requests[key] -= 1
        if not self.requests[key]:
            del self.requests[key]
        self.rec.retract_request(rec_handle)

    # ---- the loop --------------------------------------------------------------------------

    def _push(self, t: float, phase: int, item: Any) -> None:
        heapq.heappush(self.queue, (t, phase, next(self._order), item))

    def _reads_only(self, head: tuple | None, target: float) -> bool:
        """Batched (``--no-batch`` advances to every item, the reference the tests compare
        with): the queue's ``head`` is an operator item at ``target`` that sends the sidecars
        nothing (:meth:`OperatorModel.reads_only`) and every running sidecar has said it does
        nothing by itself up to ``target`` (:meth:`Sidecars.idle_until`)."""
        return (self.batch and head is not None and head[1] == ACTION and abs(head[0] - target) < 1e-9
                and self.operator.reads_only(head[3]) and self.sidecars.idle_until(target))

    async def run(self) -> int:
        """Play the whole scenario; returns the number of lines played."""
        wall0 = time.monotonic()
        self.stack.start()
        self.routing.start()
        sd, played = self.sidecars, 0
        try:
            for line in self.sc.world:
                if type(line) in ROUTING_LINES:
                    self.results.append(ex.not_yet(line.lineno, line.kind_name(), ROUTING_LINES[type(line)]))
            for line in self.sc.timeline:
                self._push(line.t, TIMELINE, line)
            await sd.new_machine(fresh=False)
            end, t_rel = self.sc.header.duration_s, 0.0
            while True:
                nxt = self.queue[0][0] if self.queue else end
                target = min(nxt, end)
                if t_rel < target - 1e-9:
                    stop = sd.next_stop(target, t_rel, self.tick)
                    head = self.queue[0] if self.queue else None
                    if stop >= target and sd.world_only(head, target):
                        # no sidecar acts before ``target`` and the line sends it nothing: the
                        # world changes without a round trip (the next advance sees it in time).
                        # The sidecars' clocks stay at ``t_rel``: a line at the same instant
                        # that sends them something is sent after its own advance, never to a
                        # sidecar whose clock lags behind the line
                        self.now = self.start + target
                        await self.lines.apply(heapq.heappop(self.queue)[3])
                        played += 1
                        continue
                    if stop >= target and self._reads_only(head, target):
                        # an operator item that sends nothing (a pass-over, a look that answers
                        # nothing) and no sidecar acts by itself up to ``target``: its list read
                        # is the same now as after an advance, which is saved (clocks as above)
                        self.now = self.start + target
                        t, _, _, item = heapq.heappop(self.queue)
                        await self.operator.act(item, t)
                        continue
                    if stop >= target - 1e-9 and (taken := self.frame_player.take(end)) is not None:
                        t_rel, lines = await self.frame_player.play(*taken)
                        played += lines
                        self._progress(wall0, t_rel, end)
                        continue
                    t_rel = stop
                    await sd.advance(t_rel)
                    self._progress(wall0, t_rel, end)
                    continue
                if not self.queue or self.queue[0][0] > end:
                    break
                t, phase, _, item = heapq.heappop(self.queue)
                if phase == TIMELINE:
                    await self.lines.apply(item)
                    played += 1
                else:
                    await self.operator.act(item, t)
            await sd.flush_stack()  # the end: Stack's record is read for the trace
            self.rec.add_marker_acks(self.stack.acked_markers())
            self.rec.add_webhooks(self.routing.trace_lines())
            for m in sd.machines:
                if m.running:
                    await m.stop()
        finally:
            if self._bar is not None:
                self._bar.close()
            for m in sd.machines:
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

    # ---- the end ---------------------------------------------------------------------------

    def _finish_stats(self, wall: float) -> None:
        s = self.stats
        s.wall_s, s.virtual_s = wall, self.now - self.start
        s.frames_sent, s.requests_answered = dict(self.frames), dict(self.requests)
        s.request_frames = dict(self.request_frames)
        s.operator_sent, s.stack = dict(self.op_sent), dict(self.stack.counters)
        s.operator_backlog = dict(sorted(self.operator.counts.items()))
        s.mail_candidates = mail_candidates(self.stack.candidates)
        s.stack_requests, s.stack_writes = self.stack.requests_by_kind()
        s.machines = len(self.machines)
        s.exits = [e for m in self.machines for e in m.exits]
        s.warnings += [w for m in self.machines for w in m.warnings]
        s.left_queued.update(self.sidecars.left_queued())  # before the temporary data dirs go
        if self._tmp is not None:
            self._tmp.cleanup()

    def verdict(self) -> list[ex.Violation]:
        return ex.consistency(self.rec, self._email_received, self.samples, scenario=self.sc,
                              end=self.now, stack_conflicts=self.stack.conflicts)

    def _email_received(self, tu: str, ru: str) -> list[float]:
        project = self.world.tus.get(tu, "")
        pair = self.world.pairs.get((project, tu, ru))
        return [e["received_at"] for e in pair.emails] if pair else []
