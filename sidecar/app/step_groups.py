"""Wall clock: the frames that queued up behind a busy worker run as ONE commit group, so
that p99 ``platform.event`` → ``task.created`` stays ≤ 2 ms at 1,000 events/s on the wall clock.

Rules / theory of operation
---------------------------
* Measured before this module: one ``platform.event`` cost the sidecar ~1–2.7 ms of CPU on the
  shared 2-core machine, a step with its own SQLite commit (one thread hop) each.  At 1,000
  events/s that is more than a core: the bridge's queue grew without bound and the latency was
  the queue — seconds, not milliseconds.  Grouping makes the cost per event fall as the queue
  grows: the bridge's one worker hands every queued frame of one groupable method to
  :meth:`StepGroups.handle` at once (:class:`bridge.server.BridgeServer` ``group_handler``),
  and here they become the steps of ONE :meth:`~sidecar.runtime.executor.StepExecutor.group`
  — one transaction, one thread hop — so frames that arrive while a commit is in flight join
  the next group.  A lone frame still takes the ordinary path (``SidecarApp.handle``).
* Every step keeps the executor's rules: each runs alone on the memory the one before left, in
  arrival order; its ``task.created`` (any note) is sent only after the group's commit, and its
  answer is given only after that commit (DESIGN §3, §9); a failed group commit sends nothing of
  any of its steps and answers each of them -32603 (crash-only, DESIGN §13).
* Each frame gets exactly the answer it would have got alone: bad params → -32602 naming the
  method; a refusal (``refusals``: unknown TU, bad raw event — raised before anything changed)
  → -32602 for that frame only, the others go on; the process stopped after a failed step →
  -32603; shutdown began (:class:`~sidecar.runtime.ports.Stopping`) → the frames whose steps
  ran are committed and answered, the rest get -32002 "shutting down" (nothing of them done).
* The virtual clock never groups here: its driver awaits each answer, and ``platform.events``
  is its batch (:mod:`sidecar.app.batches`).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bridge.errors import InternalError, RpcError, ShuttingDown, as_rpc_error
from sidecar.protocol.methods import Methods
from sidecar.runtime.executor import StepExecutor
from sidecar.runtime.ports import StepFailed, Stopping
from sidecar.runtime.step import Step

StepOf = Callable[[Any], Callable[[Step], Any]]  # decoded params -> the step's engine input
AnswerOf = Callable[[Any], Any]  # what the engine input returned -> the frame's result


@dataclass(frozen=True, slots=True)
class _Grouped:
    step_of: StepOf
    answer_of: AnswerOf


class StepGroups:
    """The ``group_handler`` of the wall clock's bridge (module rules).

    ``methods``: the app's registry (each frame's params are decoded by its method, as alone);
    ``executor`` and ``lock``: the app's one executor and step lock; ``refusals``: the domain's
    refusal types, answered -32602 with their text; ``stopped()``: the -32603 error to answer
    once the process stopped after a failed step, else None; ``shutting_down``: the -32603
    text once shutdown began."""

    def __init__(self, methods: Methods, executor: StepExecutor, lock: Any, *,
                 refusals: tuple[type[BaseException], ...],
                 stopped: Callable[[], RpcError | None], shutting_down: str) -> None:
        self._methods = methods
        self._executor = executor
        self._lock = lock
        self._refusals = refusals
        self._stopped = stopped
        self._shutting_down = shutting_down
        self._grouped: dict[str, _Grouped] = {}

    def register(self, name: str, step_of: StepOf, answer_of: AnswerOf) -> None:
        """Let frames of method ``name`` (registered in ``methods``) group: ``step_of(params)``
        is the step's engine input, ``answer_of(value)`` the frame's result."""
        self._methods.get(name)  # MethodNotFound: a grouped method is a registered method
        self._grouped[name] = _Grouped(step_of, answer_of)

    @property
    def names(self) -> frozenset[str]:
        """The methods whose queued runs the bridge hands here."""
        return frozenset(self._grouped)

    async def handle(self, method: str, params: list[Any]) -> list[Any]:
        """One outcome per frame of ``params`` (undecoded), in order: its result, or the
        :class:`RpcError` that is its answer (module rules).  Never raises for one frame's
        fault; a cancellation propagates (nothing of an uncommitted group was sent)."""
        spec = self._grouped[method]
        m = self._methods.get(method)
        out: list[Any] = [None] * len(params)
        todo: list[tuple[int, Any]] = []
        for i, raw in enumerate(params):
            try:
                todo.append((i, m.decode(raw)))
            except RpcError as exc:
                out[i] = exc
        if not todo:
            return out
        stopped = self._stopped()
        if stopped is not None or self._executor.stopping:
            err = stopped if stopped is not None else ShuttingDown(self._shutting_down)
            for i, _ in todo:
                out[i] = err
            return out
        async with self._lock:
            await self._run(spec, todo, out)
        return out

    async def _run(self, spec: _Grouped, todo: list[tuple[int, Any]], out: list[Any]) -> None:
        """The steps of ``todo`` as one group (the caller holds the lock); fills ``out``."""
        ex = self._executor
        ran: list[int] = []  # frames whose steps joined the group (answered once it committed)
        try:
            async with ex.group():
                for k, (i, args) in enumerate(todo):
                    try:
                        value = await ex.run(spec.step_of(args))
                    except self._refusals as exc:  # a SidecarError: its own error object
                        out[i] = as_rpc_error(exc)
                        continue
                    except RpcError as exc:
                        out[i] = exc
                        continue
                    except Stopping:  # shutdown began: the steps so far commit, the rest never run
                        for j, _ in todo[k:]:
                            out[j] = ShuttingDown(self._shutting_down)
                        break
                    out[i] = spec.answer_of(value)
                    ran.append(i)
        except StepFailed as exc:  # nothing of the group was committed or sent (crash-only)
            self._fail(todo, ran, out, InternalError(str(exc)))
        except Stopping:  # the group's commit met the closing store: abandoned, not written
            self._fail(todo, ran, out, ShuttingDown(self._shutting_down))

    @staticmethod
    def _fail(todo: list[tuple[int, Any]], ran: list[int], out: list[Any], err: RpcError) -> None:
        """The group left nothing: the frames that ran, and those never answered, get ``err``;
        a refusal's answer stands (it changed nothing either way)."""
        for i in ran:
            out[i] = err
        for i, _ in todo:
            if out[i] is None:
                out[i] = err


__all__ = ["StepGroups"]
