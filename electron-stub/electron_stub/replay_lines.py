"""One timeline line of the replay applied at its instant: sessions (login / logout / crash),
the world and the reference Stack, expectations, the routing world and sender health, and the
operator model's answers.

Rules / theory of operation
---------------------------
* Sessions: ``login`` without ``fresh`` goes to the current machine; ``"fresh": true`` starts a
  new machine with an empty data dir that becomes current (the shift change to another
  operator's computer) — except when the current machine was itself started by a fresh login of
  the same operator, which is that operator's computer already (a shift change logs in many TUs,
  one line each).  ``logout`` goes to the machine the TU is logged in on.
* World lines: encode the line into frames (:mod:`encode`), apply it to the world and the
  reference Stack, deliver the frames to the machine where that TU is logged in (none: Electron
  holds no session for it, the frames are not sent).  While a TU's socket is down
  (``socket_down`` … ``reconnect``, README revision 2) its platform socket events — the
  operator's own-send echoes included — are not sent (the world and Stack still change, the
  sidecar's passes still see it); ``reconnect`` sends ``platform.reconnected {project, tu}``
  to the machine the TU is logged in on.  After an RU chat message's
  ``platform.event`` is answered, the driver samples whether an ``unanswered_message`` is open
  (pairs blocked either way are not sampled).
* The operator model (first looks, the backlog worked in the sidecar's order) is
  :mod:`electron_stub.operator_model`; its own-send echoes go through :meth:`LinePlayer.delivered`.
* Routing-world lines (``target``, ``rule``, ``emit``, ``target_fault``, ``manage`` of
  ``rules.*``) are played by :mod:`electron_stub.routing_world` (loopback receivers, the
  sidecars' router config, rules on every new data dir); the trace gets ``delivery`` lines (the
  sidecars' ``delivery`` notes) and ``webhook.received`` lines (the receivers' records).
* Sender health (:mod:`electron_stub.senders_lines`): ``group`` lines are created on every
  machine the replay starts, ``manage`` lines of ``groups.*`` / ``senders.*`` are called on the
  current machine (an expected ``error`` must come with that code and change nothing),
  ``sender`` / ``history`` expectations ask the machines (``senders.get``, ``senders.history``).
* ``expect`` lines are evaluated at their ``t``.
"""
from __future__ import annotations

from typing import Any

from electron_stub import encode
from electron_stub import expect as ex
from electron_stub import scenario as sc
from electron_stub.replay_sidecars import Sidecars, VirtualTime
from electron_stub.report import RunStats
from electron_stub.routing_world import RoutingWorld, evaluate_delivery, evaluate_received
from electron_stub.senders_lines import SenderLines
from electron_stub.stack_server import StackServer
from electron_stub.trace import Recorder
from electron_stub.world import World

# timeline lines that are no world event (the routing world's are played by their own modules)
NOT_WORLD = (sc.Login, sc.Logout, sc.Crash, sc.StackFault, sc.Expect, sc.Emit, sc.TargetFault, sc.Manage,
             sc.SocketDown, sc.Reconnect)
# Routing-world lines (README "Routing world") the harness cannot play yet: each yields a failed
# result naming the issue that brings it, so such a scenario never passes vacuously.  Every
# routing-world line is played today (routing_world, senders_lines).
ROUTING_LINES: dict[type, str] = {}
SENDER_METHODS = ("groups.", "senders.")  # manage lines sender health plays (senders_lines)


class LinePlayer:
    """Applies timeline lines (the operator's answers are :mod:`electron_stub.operator_model`)."""

    def __init__(self, scenario: sc.Scenario, clock: VirtualTime, *, world: World, stack: StackServer,
                 rec: Recorder, routing: RoutingWorld, senders: SenderLines, sidecars: Sidecars,
                 results: list[ex.Result], samples: list[ex.MessageSample], stats: RunStats) -> None:
        self.sc, self.clock = scenario, clock
        self.world, self.stack, self.rec = world, stack, rec
        self.routing, self.senders, self.sidecars = routing, senders, sidecars
        self.results, self.samples, self.stats = results, samples, stats
        self.socket_down: set[str] = set()  # TUs whose platform socket is down (socket_down … reconnect)

    # ---- one timeline line -----------------------------------------------------------------

    async def apply(self, line: Any) -> None:
        k, now, sd = type(line), self.clock.now, self.sidecars
        start = self.clock.start
        if k is sc.Login:
            m = sd.current
            fresh_same = m is not None and m.fresh and m.operator == line.operator and line.tu not in m.tus
            if line.fresh and not fresh_same:
                await sd.flush_stack()  # the new machine's login reads Stack
                m = await sd.new_machine(fresh=True, operator=line.operator)
            assert m is not None
            old = sd.tu_machine.get(line.tu)
            if old is not None and old is not m:
                self.stats.warnings.append(f"line {line.lineno}: {line.tu} logged in on {m.name} while "
                                           f"still logged in on {old.name}")
            m.tus[line.tu] = (line.project, line.operator)
            sd.tu_machine[line.tu] = m
            self.rec.context(now, "login", machine=m.name, project=line.project, tu=line.tu, operator=line.operator)
            await sd.send(m, "session.login", {"tu": line.tu, "project": line.project, "operator": line.operator})
            await sd.retire_idle()
        elif k is sc.Logout:
            m = sd.tu_machine.pop(line.tu, None)
            self.rec.context(now, "logout", machine=m.name if m else None, project=line.project, tu=line.tu)
            if m is not None:
                m.tus.pop(line.tu, None)
                await sd.send(m, "session.logout", {"tu": line.tu})
                await sd.retire_idle()
        elif k is sc.Crash:
            self.rec.context(now, "crash", machines=[m.name for m in sd.machines if m.running])
            await sd.crash()
        elif k is sc.SocketDown:
            self.socket_down.add(line.tu)
            self.rec.context(now, "socket_down", project=line.project, tu=line.tu)
        elif k is sc.Reconnect:
            self.socket_down.discard(line.tu)
            m = sd.tu_machine.get(line.tu)
            self.rec.context(now, "reconnect", machine=m.name if m else None, project=line.project, tu=line.tu)
            if m is not None and m.running:
                await sd.send(m, "platform.reconnected", {"project": line.project, "tu": line.tu})
        elif k is sc.StackFault:
            self.stack.set_fault(line.mode, line.value)
            self.rec.context(now, "stack", mode=line.mode, value=line.value)
        elif k is sc.Expect and line.what == "decision":
            rows = await sd.why(line.tu, line.ru)
            self.results.append(ex.evaluate_decision(line, rows, start))
        elif k is sc.Expect and line.what == "delivery":
            since = start + (line.between or (0.0, 0.0))[0] - ex.TOLERANCE_S
            self.results.append(evaluate_delivery(line, await sd.deliveries(line.target, since), start))
        elif k is sc.Expect and line.what == "received":
            since = start + line.between[0] - ex.TOLERANCE_S
            received = self.routing.receivers.records("webhook.received") if self.routing.receivers else []
            self.results.append(evaluate_received(line, received, await sd.deliveries(line.target, since), start))
        elif k is sc.Expect and line.what == "sender" and sd.current is not None:
            self.results.append(await self.senders.expect_sender(sd.current, line))
        elif k is sc.Expect and line.what == "history":
            self.results.append(await self.senders.expect_history(sd.machines, line, start))
        elif k is sc.Expect:
            if line.what == "marker":
                await sd.flush_stack()  # the check reads the reference Stack
            self.results.append(ex.evaluate(line, self.rec, self.stack.marker))
        elif k is sc.Emit:
            await sd.emit(line)
        elif k is sc.TargetFault:
            self.rec.context(now, "target_fault", target=line.target, mode=line.mode, value=line.value)
            problem = self.routing.fault(line)
            if problem:
                self.stats.warnings.append(problem)
        elif k is sc.Manage and line.method.startswith(SENDER_METHODS) and sd.current is not None:
            await self.senders.manage(sd.current, line)
        elif k is sc.Manage:
            assert sd.current is not None
            self.results.append(await self.routing.manage(line, sd.manage_call(sd.current)))
        elif k in ROUTING_LINES:
            self.results.append(ex.not_yet(line.lineno, line.kind_name(), ROUTING_LINES[k]))
        else:
            await self.world_line(line)

    def apply_world(self, line: Any, at: float | None = None) -> None:
        """``line``'s change to the world and to the reference Stack at ``at`` (unix seconds;
        None: the clock's ``now``)."""
        k = type(line)
        self.world.apply(line, self.clock.now if at is None else at)
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

    def sample(self, line: Any, at: float | None = None) -> None:
        """After an RU chat message was handled: is an ``unanswered_message`` open for the pair?"""
        if type(line) is sc.Message and line.from_ == "ru":
            fav = self.world.favorite(line.project, line.tu, line.ru) or {}
            if not (fav.get("blocked_by_tu") or fav.get("blocked_by_ru")):
                t = self.rec.open_task(line.tu, line.ru, "unanswered_message")
                self.samples.append(ex.MessageSample(at=(self.clock.now if at is None else at) - self.clock.start,
                                                     tu=line.tu, ru=line.ru, msg_id=line.id, lineno=line.lineno,
                                                     open_task=t.task_id if t else None))

    def delivered(self, tu: str | None, frames: list[encode.Frame], line: Any = None) -> list[encode.Frame]:
        """The frames of ``line`` that reach the sidecar: none of the platform's socket events
        while the TU's socket is down (README revision 2 ``socket_down``; ``favorite.update``
        frames are Stack's and the operator's UI, not the socket, and still go); and no
        ``favorite`` line's update for a TU Stack has no list for (``stack_favorites: false``:
        that favorite is the platform world's only)."""
        if type(line) is sc.Favorite and tu in self.stack.no_favorites:
            return []
        if tu not in self.socket_down:
            return frames
        return [f for f in frames if f[0] != "platform.event"]

    async def world_line(self, line: Any) -> None:
        frames = encode.frames_for(line, self.clock.now, self.world)
        self.apply_world(line)
        tu = getattr(line, "tu", None)
        m = self.sidecars.tu_machine.get(tu) if tu else None
        if m is None or not m.running:
            return
        withheld = tu in self.socket_down
        for method, params in self.delivered(tu, frames, line):
            await self.sidecars.send(m, method, params)
        if not withheld:  # a withheld message is no socket event: nothing to sample
            self.sample(line)
