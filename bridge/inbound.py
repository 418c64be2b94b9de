"""The inbound queue between the readers and the one worker, bounded in frames AND bytes.

Rules / theory of operation
---------------------------
* Items are ``(session, message, size)``; ``size`` is the raw frame's length in bytes.  The queue
  takes an item while it holds fewer than ``max_frames`` items and, unless it is empty, while the
  bytes it holds plus ``size`` stay within ``max_bytes`` — so a frame larger than the byte cap
  still goes in alone, and the worker always has something to do.
* A reader that finds no room waits (:meth:`InboundQueue.put`) and meanwhile does not read its
  socket: the client is back-pressured by TCP instead of the sidecar buffering.  Counting frames
  only let 1 MB frames behind a busy worker grow memory to 1 GB.
* :meth:`put` gives up (False) as soon as ``closing`` is set.
* The one worker takes the head with :meth:`get`, and may look at the next item (:meth:`peek`)
  and take it at once (:meth:`get_nowait`) — how it gathers the frames of one commit group
  (:class:`~bridge.server.BridgeServer` ``group_handler``).  One consumer only.
"""
from __future__ import annotations

import asyncio
from collections import deque
from typing import Any

__all__ = ["InboundQueue"]


class InboundQueue:
    def __init__(self, max_frames: int, max_bytes: int) -> None:
        self._q: deque[tuple[Any, Any, int]] = deque()  # (session, Request|Notification, bytes)
        self._ready = asyncio.Event()  # set while the queue holds an item (the worker waits on it)
        self.max_frames = max_frames  # items the queue may hold
        self.max_bytes = max_bytes  # raw bytes the queue may hold (one frame always fits)
        self.queued_bytes = 0  # raw bytes in the queue now
        self._room = asyncio.Event()  # set whenever an item is taken off

    def qsize(self) -> int:
        return len(self._q)

    def has_room(self, size: int) -> bool:
        q = self._q
        return len(q) < self.max_frames and (not q or self.queued_bytes + size <= self.max_bytes)

    def put_nowait(self, item: tuple[Any, Any, int]) -> None:
        """Add without checking (call :meth:`has_room` first)."""
        self.queued_bytes += item[2]
        self._q.append(item)
        self._ready.set()

    async def put(self, item: tuple[Any, Any, int], closing: asyncio.Event) -> bool:
        """Wait for room, then add; False (not added) if ``closing`` is set first."""
        stop = asyncio.ensure_future(closing.wait())
        try:
            while not self.has_room(item[2]):
                if closing.is_set():
                    return False
                self._room.clear()
                room = asyncio.ensure_future(self._room.wait())
                try:
                    await asyncio.wait({room, stop}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    room.cancel()
        finally:
            stop.cancel()
        self.put_nowait(item)
        return True

    async def get(self) -> tuple[Any, Any, int]:
        """Take the oldest item, waiting for one (a cancelled wait takes nothing)."""
        while not self._q:
            self._ready.clear()
            await self._ready.wait()
        return self.get_nowait()

    def peek(self) -> tuple[Any, Any, int] | None:
        """The oldest item without taking it, or None when the queue is empty."""
        return self._q[0] if self._q else None

    def get_nowait(self) -> tuple[Any, Any, int]:
        """Take the oldest item now (IndexError when the queue is empty)."""
        item = self._q.popleft()
        self.queued_bytes -= item[2]
        self._room.set()
        return item
