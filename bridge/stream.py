"""The resumable outbound stream and one connection's delivery order (sans-I/O).

Rules / theory of operation
---------------------------
* Every notification the sidecar sends (``task.created``, ``sender.state``, ...) is a stream
  frame.  :meth:`OutboundStream.append` gives it the next sequence number (the first is 1),
  stamps it into the params object as ``"seq"``, encodes the whole JSON-RPC notification to bytes
  **once**, and keeps those bytes until the client acknowledges them.  Params may be a msgspec
  Struct, a mapping or None; anything that does not encode to a JSON object is a ``TypeError``.
* ``stream.ack {seq}`` (:meth:`OutboundStream.ack`) releases every frame with a number ``<= seq``.
  Acks are cumulative and idempotent; an ack below what was already released does nothing (an old
  ack arriving late is harmless); an ack above the last issued number raises :class:`SeqBeyond`
  and changes nothing — the client claims frames it cannot have seen (an ack of another stream, a
  counter gone wrong), and releasing everything would drop frames it never showed.
* On (re)connect a connection starts right after the last released frame, so it replays every
  unacked frame once, in order, before anything new: the client loses nothing, and sees a frame
  twice only if it saw it on an earlier connection but did not ack it (it can drop those by seq).
* **Cap.**  At most ``limit`` frames are kept.  Appending beyond that drops the *oldest* unacked
  frame, counts it in :attr:`OutboundStream.dropped` and logs a warning.  The alternative —
  blocking or failing ``append`` — would stall or crash the sidecar's task engine because the UI
  is away; losing the oldest UI notifications instead is recoverable: the client sees a gap in
  ``seq`` (the first replayed frame is not its last acked + 1) and re-reads the task list
  (``tasks.list``).  Memory stays bounded by ``limit`` frames either way.
* :class:`Delivery` is one connection's send order.  Stream frames and that connection's own
  frames (responses, requests) go out in the order they were produced: a control frame queued
  after stream frame N is sent after N.  So a response leaves only after every notification its
  handler emitted — the harness relies on that (an answer means "everything before it is out").
  Stream frames are read from the stream by number, not copied, so released or dropped frames are
  skipped and a slow connection cannot hold more than the cap.
"""
from __future__ import annotations

import logging
from collections import deque
from collections.abc import Mapping
from typing import Any, NamedTuple

import msgspec

from . import jsonrpc

__all__ = ["Frame", "OutboundStream", "Delivery", "SeqBeyond"]

log = logging.getLogger("bridge.stream")

_WARN_EVERY = 10_000  # after the first dropped frame, warn again every this many drops


class SeqBeyond(ValueError):
    """A ``stream.ack`` of a seq this stream has not issued (module rules): nothing was released."""


class Frame(NamedTuple):
    """One stream frame."""

    seq: int  # sequence number, 1-based, strictly increasing without gaps
    method: str  # notification method (kept for logs and tests)
    data: bytes  # the complete encoded JSON-RPC notification, seq stamped in params


class OutboundStream:
    """Sequenced, acked, capped store of outbound notifications.

    Attributes (read-only for callers): ``limit``, ``last_seq``, ``acked_seq``, ``released_seq``,
    ``dropped``.
    """

    def __init__(self, limit: int = 100_000):
        if limit < 1:
            raise ValueError("stream limit must be >= 1")
        self.limit = limit  # maximum number of frames kept (oldest dropped beyond it)
        self.last_seq = 0  # number of the last appended frame; 0 = none yet
        self.acked_seq = 0  # highest seq the client acknowledged (capped at last_seq)
        self.released_seq = 0  # every frame <= this is gone (acked or dropped by the cap)
        self.dropped = 0  # frames dropped unacked by the cap, since creation
        self._frames: deque[Frame] = deque()  # kept frames, seqs released_seq+1 .. last_seq

    def __len__(self) -> int:
        return len(self._frames)

    def append(self, method: str, params: Any = None) -> int:
        """Add a notification; return its seq.  ``params``: Struct, mapping or None.

        Raises ``TypeError`` if params is not object-like or not encodable; the stream is then
        unchanged (the seq is not consumed).
        """
        seq = self.last_seq + 1
        data = jsonrpc.encode_notification(method, _stamp(params, seq))
        self.last_seq = seq
        self._frames.append(Frame(seq, method, data))
        if len(self._frames) > self.limit:
            self._frames.popleft()
            self.released_seq += 1
            self.dropped += 1
            if self.dropped == 1 or self.dropped % _WARN_EVERY == 0:
                log.warning(
                    "outbound stream over its cap of %d unacked frames: dropped the oldest "
                    "(seq %d); %d dropped so far — the client will see a seq gap",
                    self.limit, self.released_seq, self.dropped,
                )
        return seq

    def ack(self, seq: int) -> int:
        """Release every frame with number ``<= seq``; return how many were released now.
        Raises :class:`SeqBeyond` (nothing changed) for a ``seq`` above :attr:`last_seq`."""
        if seq > self.last_seq:
            raise SeqBeyond(f"seq {seq} is beyond the last issued seq {self.last_seq}")
        if seq > self.acked_seq:
            self.acked_seq = seq
        released = 0
        frames = self._frames
        while frames and frames[0].seq <= seq:
            frames.popleft()
            released += 1
        if seq > self.released_seq:
            self.released_seq = seq
        return released

    def unacked(self) -> list[Frame]:
        """Every kept frame, oldest first."""
        return list(self._frames)

    def get(self, seq: int) -> Frame | None:
        """The kept frame with this number, or None (released, dropped or not issued yet)."""
        index = seq - self.released_seq - 1
        if 0 <= index < len(self._frames):
            return self._frames[index]
        return None


def _stamp(params: Any, seq: int) -> dict:
    """A new dict of ``params`` with ``"seq": seq`` (the caller's object is not modified)."""
    if params is None:
        return {"seq": seq}
    if isinstance(params, msgspec.Struct):
        params = msgspec.to_builtins(params)
    if not isinstance(params, Mapping):
        raise TypeError(f"stream params must encode to a JSON object, not {type(params).__name__}")
    stamped = dict(params)
    stamped["seq"] = seq
    return stamped


class Delivery:
    """One connection's outgoing order: stream frames interleaved with its own control frames.

    ``cursor`` is the last stream seq handed out on this connection.  A control frame (a response
    or a request, already encoded) remembers the stream's ``last_seq`` when it was queued and is
    handed out once every stream frame up to that number has been (or was released/dropped).
    """

    def __init__(self, stream: OutboundStream):
        self._stream = stream  # the shared stream
        self.cursor = stream.released_seq  # replay starts after the last released frame
        self._control: deque[tuple[int, bytes]] = deque()  # (stream seq it follows, frame)
        self.control_bytes = 0  # bytes of control frames waiting (bounded by the session)

    def push(self, data: bytes, *, first: bool = False) -> None:
        """Queue a control frame after everything appended so far (``first``: before all)."""
        self.control_bytes += len(data)
        if first:
            self._control.appendleft((self.cursor, data))
        else:
            self._control.append((self._stream.last_seq, data))

    def next(self) -> bytes | None:
        """The next frame to send, or None when there is nothing to send now."""
        stream = self._stream
        if self.cursor < stream.released_seq:
            self.cursor = stream.released_seq  # skip what was acked or dropped meanwhile
        control = self._control
        if control and control[0][0] <= self.cursor:
            return self._pop_control()
        frame = stream.get(self.cursor + 1)
        if frame is not None:
            self.cursor = frame.seq
            return frame.data
        if control:  # (unreachable while the invariants hold; never strand a control frame)
            return self._pop_control()
        return None

    def _pop_control(self) -> bytes:
        data = self._control.popleft()[1]
        self.control_bytes -= len(data)
        return data

    def pending(self) -> int:
        """How many frames are waiting (stream frames after the cursor + control frames)."""
        behind = max(self._stream.last_seq - max(self.cursor, self._stream.released_seq), 0)
        return behind + len(self._control)
