"""The bridge's ONE worker: hands the inbound frames to the application's handler strictly in
arrival order, and queues each request's answer.  :class:`~bridge.server.BridgeServer` owns it:
its readers fill the :class:`~bridge.inbound.InboundQueue` this worker empties, and its
:meth:`~bridge.server.BridgeServer.close` settles the frames left (:meth:`Worker.cut_short`,
:meth:`Worker.answer_queued`).

Rules / theory of operation
---------------------------
* ONE **worker** task (per server, across connections) awaits ``handler(method, params)`` strictly
  in arrival order.  Absent ``params`` are passed as ``{}``.  With ``raw_params=True`` the
  handler gets them undecoded instead, as a :class:`msgspec.Raw` (absent: ``Raw(b"{}")``), so the
  application decodes each method's params once, straight into its own type
  (:mod:`sidecar.protocol.methods`); the bridge's own ``auth`` and ``stream.ack`` are decoded here.  A request is answered with the
  returned value (Struct, dict, list, scalar, None), or the raised :class:`RpcError`; any other
  exception is logged and answered ``-32603`` with its message; the connection stays up.  Errors
  of notifications are only logged.
* **Groups** (the wall clock's latency): frames that queued up while the worker was
  busy — behind a step's commit, say — need not pay a step and a commit each.  With a
  ``group_handler``, when the frame the worker takes is of one of ``group_methods`` and the next
  queued frames are of the same method, the worker takes that whole run (at most ``group_max``,
  never past a frame of another method, so arrival order holds) and awaits
  ``group_handler(method, [params, ...])`` once; it returns one outcome per frame, in order — the
  result, or an :class:`RpcError` instance as that frame's error answer — and the answers are
  queued in frame order after it returns (so after every notification the group emitted).  A
  raise of the group handler is every frame's answer.  A lone frame still goes to ``handler``.  Frames of a replaced connection are still handled (nothing
  Electron sent is lost); their answers are dropped.
* Once the server's close began (``closing`` set), a frame taken off the queue is never handed
  to the handler: it is answered -32002 :data:`NOT_BEGUN` (:class:`~bridge.errors.ShuttingDown`);
  the call in flight that outlives the close's grace is answered -32003 :data:`CUT_SHORT`
  (:class:`~bridge.errors.CutShort`; see :mod:`bridge.server`), with the ``data`` the server's
  ``cut_short_data(method)`` gives (what the call kept so far; the sidecar: ``{now}`` of an
  advance, ``{taken, now}`` of ``platform.events``).  Neither is -32603, a failed step's code.
* A stop's refusals are counted, not logged one by one (a flood during a stop once wrote 7–13 k
  INFO lines): :attr:`Worker.refused` counts every -32002 answer (the handler's own included),
  and the server logs the count once when it closes.
* A handler may return a :class:`Deferred`: the request is answered when the application
  resolves it (``sidecar.shutdown`` is answered once the store is flushed, after the worker
  stopped); the worker goes on with the next frame meanwhile.
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import msgspec
from msgspec import UNSET

from . import jsonrpc
from .errors import INTERNAL_ERROR, CutShort, InternalError, RpcError, ShuttingDown, as_rpc_error
from .inbound import InboundQueue
from .session import Session

__all__ = ["CUT_SHORT", "Deferred", "EMPTY_RAW", "GroupHandler", "Handler", "NOT_BEGUN", "Worker", "error_frame"]

# the worker is the server's: it logs under the server's name, as before it had a module
log = logging.getLogger("bridge.server")

Handler = Callable[[str, Any], Awaitable[Any]]  # handler(method, params) -> result
# group_handler(method, [params, ...]) -> one outcome per params, in order: the result, or an
# RpcError instance (that frame's error answer)
GroupHandler = Callable[[str, list[Any]], Awaitable[list[Any]]]

EMPTY_RAW = msgspec.Raw(b"{}")  # absent params, undecoded (raw_params)
#: -32002 to a request taken off the queue after close() began (the handler never saw it)
NOT_BEGUN = "the sidecar is shutting down; nothing was done"
#: -32003 to the request in flight when close() began that did not end within its grace
CUT_SHORT = ("the sidecar is shutting down; this request did not finish within the shutdown"
             " budget (what it completed before is kept)")


class Worker:
    """The one worker of a :class:`~bridge.server.BridgeServer` (module rules).

    ``queue``: the frames the readers took, ``(session, msg, raw size)``.  ``handler`` /
    ``group_handler`` / ``group_methods`` / ``group_max`` / ``raw_params``: as the server's.
    ``closing``: the server's close flag.  :attr:`idle` is set while the worker waits for the
    next frame; :attr:`in_flight` holds the frames the handler call is working on."""

    def __init__(self, queue: InboundQueue, handler: Handler, closing: asyncio.Event, *,
                 raw_params: bool, group_handler: GroupHandler | None,
                 group_methods: Iterable[str], group_max: int,
                 cut_short_data: Callable[[str], Any] | None = None) -> None:
        self._queue = queue  # readers → this worker
        self._handler = handler  # async (method, params) -> result
        self._raw_params = raw_params  # params reach the handler undecoded (msgspec.Raw)
        self._group_handler = group_handler  # async (method, [params]) -> [result | RpcError]
        # methods whose queued runs go to group_handler (none without one)
        self._group_methods = frozenset(group_methods) if group_handler is not None else frozenset()
        self._group_max = group_max  # frames per group_handler call at most
        self._closing = closing  # set by the server's close(): answer NOT_BEGUN from then on
        # method -> the ``data`` of its CUT_SHORT answer (what the call kept so far), or None
        self._cut_short_data = cut_short_data
        self.refused = 0  # frames answered (or, notifications, dropped) -32002 "shutting down"
        self.idle = asyncio.Event()  # set while the worker waits for the next frame
        # the frames the worker's handler call is working on (one, or a group's), unanswered yet
        self.in_flight: list[tuple[Session, Any]] = []

    async def run(self) -> None:
        """The one worker: handle queued frames strictly in arrival order; a run of queued frames
        of one groupable method goes to ``group_handler`` at once (module rules)."""
        queue, handler = self._queue, self._handler
        grouped, group_max = self._group_methods, self._group_max
        absent = EMPTY_RAW if self._raw_params else {}
        while True:
            self.idle.set()
            session, msg, _ = await queue.get()
            self.idle.clear()
            if self._closing.is_set():  # the handler never sees it (module rules)
                self._answer(session, msg, ShuttingDown(NOT_BEGUN))
                continue
            if msg.method in grouped and (head := queue.peek()) is not None and head[1].method == msg.method:
                batch = [(session, msg)]
                while (len(batch) < group_max and (head := queue.peek()) is not None
                       and head[1].method == msg.method):
                    batch.append(queue.get_nowait()[:2])
                self.in_flight = batch
                await self._handle_group(msg.method, batch, absent)
                continue
            params = absent if msg.params is UNSET else msg.params
            self.in_flight = [(session, msg)]
            try:
                outcome: Any = await handler(msg.method, params)
            except asyncio.CancelledError:
                outcome = self._cancelled(msg.method)
            except Exception as exc:  # noqa: BLE001 — the handler's bug must not kill the bridge
                outcome = _failure(msg.method, exc)
            else:
                outcome = _Result(outcome)
            self.in_flight = []
            self._answer(session, msg, outcome)

    async def _handle_group(self, method: str, batch: list[tuple[Session, Any]], absent: Any) -> None:
        """One call of ``group_handler`` for ``batch`` (frames of ``method`` in arrival order),
        then each frame's answer in that order; a raise of the group handler is every frame's."""
        assert self._group_handler is not None
        try:
            results = await self._group_handler(
                method, [absent if msg.params is UNSET else msg.params for _, msg in batch])
            if len(results) != len(batch):
                raise RuntimeError(f"group handler gave {len(results)} outcomes for {len(batch)} frames")
            outcomes: list[Any] = [r if isinstance(r, RpcError) else _Result(r) for r in results]
        except asyncio.CancelledError:
            outcomes = [self._cancelled(method)] * len(batch)
        except Exception as exc:  # noqa: BLE001 — the handler's bug must not kill the bridge
            outcomes = [_failure(method, exc)] * len(batch)
        self.in_flight = []
        for (session, msg), outcome in zip(batch, outcomes):
            self._answer(session, msg, outcome)

    @staticmethod
    def _cancelled(method: str) -> RpcError:
        me = asyncio.current_task()
        if me is not None and me.cancelling():
            raise asyncio.CancelledError  # close() is stopping the worker
        log.error("handler for %s was cancelled from inside", method)
        return InternalError("cancelled")

    def _answer(self, session: Session, msg: Any, outcome: Any) -> None:
        """Queue the answer of a request: its :class:`_Result` or its :class:`RpcError`
        (logged for a notification, which gets no answer; a -32002 refusal is only counted,
        module rules).  A :class:`Deferred` result is bound to the request, answered later."""
        if isinstance(outcome, RpcError):
            if isinstance(outcome, ShuttingDown):
                self.refused += 1
            else:
                log.info("%s failed: %r", msg.method, outcome)
            if type(msg) is jsonrpc.Request:
                session.send(error_frame(msg.id, outcome))
            return
        if type(msg) is not jsonrpc.Request:
            return
        if isinstance(outcome.value, Deferred):
            outcome.value.bind(session, msg.id)
            return
        try:
            frame = jsonrpc.encode_result(msg.id, outcome.value)
        except Exception as exc:  # noqa: BLE001 — unencodable result
            log.error("result of %s is not JSON-encodable: %s", msg.method, exc)
            frame = error_frame(msg.id, InternalError(f"result not encodable: {exc}"))
        session.send(frame)


    def cut_short(self) -> None:
        """The handler call in flight did not end within the server's close's grace: answer its
        frames -32603 :data:`CUT_SHORT` now (the worker is cancelled right after, in the same
        loop step, so it never answers them too)."""
        frames, self.in_flight = self.in_flight, []
        for session, msg in frames:
            data = None
            if self._cut_short_data is not None:
                try:
                    data = self._cut_short_data(msg.method)
                except Exception:  # noqa: BLE001 — the answer goes out anyway, without data
                    log.exception("cut_short_data(%s) raised", msg.method)
            self._answer(session, msg, CutShort(CUT_SHORT, data=data))

    def refuse(self, session: Session, msg: Any) -> None:
        """Answer a frame the handler will never see (the server is closing) -32002
        :data:`NOT_BEGUN` (a notification is only counted)."""
        self._answer(session, msg, ShuttingDown(NOT_BEGUN))

    def answer_queued(self) -> None:
        """Frames still queued once the call in flight is settled: -32002 :data:`NOT_BEGUN`."""
        while self._queue.qsize():
            session, msg, _ = self._queue.get_nowait()
            self._answer(session, msg, ShuttingDown(NOT_BEGUN))


class Deferred:
    """A result the application gives later: a handler returns it, the worker binds it to the
    request (:meth:`bind`) and moves on; :meth:`resolve` sends the answer on that request's
    connection — if it is still open — exactly once.  Resolved before it is bound (the handler
    resolved its own answer), the answer goes out at the bind.  ``value``: any JSON-encodable
    result; an :class:`RpcError` is sent as the error answer."""

    __slots__ = ("_target", "_value", "_done")

    def __init__(self) -> None:
        self._target: tuple[Session, Any] | None = None  # (session, request id) once bound
        self._value: Any = None
        self._done = False  # resolve() was called

    @property
    def bound(self) -> bool:
        """True once a request waits for this answer."""
        return self._target is not None

    def bind(self, session: Session, request_id: Any) -> None:
        self._target = (session, request_id)
        if self._done:
            self._send()

    def resolve(self, value: Any) -> None:
        """Answer the bound request with ``value`` (once; later calls are ignored)."""
        if self._done:
            return
        self._done, self._value = True, value
        if self._target is not None:
            self._send()

    def _send(self) -> None:
        assert self._target is not None
        session, request_id = self._target
        if session.closed:
            return
        value = self._value
        if isinstance(value, RpcError):
            session.send(error_frame(request_id, value))
            return
        try:
            frame = jsonrpc.encode_result(request_id, value)
        except Exception as exc:  # noqa: BLE001 — unencodable result
            frame = error_frame(request_id, InternalError(f"result not encodable: {exc}"))
        session.send(frame)


class _Result:
    """A handler's return value (so that a returned RpcError instance is never taken for a raise)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


def _failure(method: str, exc: Exception) -> RpcError:
    """The answer to a handler's raise: an :class:`RpcError` as it is, an exception with its
    own error object that object (:func:`bridge.errors.as_rpc_error`), anything else -32603."""
    err = as_rpc_error(exc)
    if err is None or (err is not exc and err.code == INTERNAL_ERROR):
        log.error("handler for %s raised", method, exc_info=exc)
    return err if err is not None else InternalError(f"{type(exc).__name__}: {exc}")



def error_frame(request_id: Any, error: RpcError) -> bytes:
    """Encode an error answer; fall back to a bare -32603 if ``data``/``message`` won't encode."""
    try:
        return jsonrpc.encode_error(request_id, error)
    except Exception:  # noqa: BLE001 — e.g. data holds an unencodable object
        message = error.message.encode("utf-8", "replace").decode("utf-8")
        return jsonrpc.encode_error(request_id, RpcError(error.code, message))

