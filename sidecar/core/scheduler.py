"""One ordered timer queue (DESIGN §5, seed 003 question 6: ticks over one queue, not scattered
``setTimeout``s).

Rules
-----
* A timer is ``(due, key, payload)``; ``key`` is unique: scheduling an existing key moves it,
  :meth:`Scheduler.cancel` removes it.  Keys name what the timer is for, e.g.
  ``("expire", task_id)`` or ``("pass", tu, "online")``, so cancellation never needs a handle.
* :meth:`pop_due` yields timers in ``(due, insertion order)`` order, one at a time, so a handler
  may schedule or cancel timers (including ones due now) and the next pop sees that change.
* The scheduler holds no clock and runs nothing itself: the runtime asks it what is due at
  ``now`` and when the next timer is (to sleep in wall mode).
"""
from __future__ import annotations

import heapq
import itertools
from typing import Any, Hashable, Iterator


class Scheduler:
    """Heap with lazy deletion; O(log n) schedule/cancel/pop."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Hashable]] = []  # (due, seq, key), may hold stale rows
        self._live: dict[Hashable, tuple[float, int, Any]] = {}  # key -> (due, seq, payload)
        self._seq = itertools.count()  # tie-break: equal due times fire in scheduling order

    def __len__(self) -> int:
        return len(self._live)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._live

    def schedule(self, key: Hashable, due: float, payload: Any = None) -> None:
        """Arm ``key`` at ``due`` (unix seconds), replacing any earlier arming of the same key."""
        seq = next(self._seq)
        self._live[key] = (due, seq, payload)
        heapq.heappush(self._heap, (due, seq, key))

    def cancel(self, key: Hashable) -> bool:
        """Disarm ``key``; True if it was armed."""
        return self._live.pop(key, None) is not None

    def cancel_where(self, pred) -> int:
        """Disarm every key for which ``pred(key)`` is true (e.g. all timers of a TU at logout)."""
        doomed = [k for k in self._live if pred(k)]
        for k in doomed:
            del self._live[k]
        return len(doomed)

    def due_of(self, key: Hashable) -> float | None:
        entry = self._live.get(key)
        return None if entry is None else entry[0]

    def next_due(self) -> float | None:
        """The earliest armed instant, or None when the queue is empty."""
        self._drop_stale()
        return self._heap[0][0] if self._heap else None

    def next_due_besides(self, key: Hashable) -> float | None:
        """The earliest armed instant of any key other than ``key``, or None."""
        self._drop_stale()
        if not self._heap:
            return None
        if self._heap[0][2] != key:
            return self._heap[0][0]
        return min((due for k, (due, _, _) in self._live.items() if k != key), default=None)

    def pop_due(self, now: float) -> tuple[Hashable, float, Any] | None:
        """Remove and return the earliest timer with ``due <= now`` as ``(key, due, payload)``."""
        self._drop_stale()
        if not self._heap or self._heap[0][0] > now:
            return None
        due, seq, key = heapq.heappop(self._heap)
        _, _, payload = self._live.pop(key)
        return key, due, payload

    def iter_due(self, now: float) -> Iterator[tuple[Hashable, float, Any]]:
        """Pop due timers one by one (handlers may change the queue between pops)."""
        while (item := self.pop_due(now)) is not None:
            yield item

    def _drop_stale(self) -> None:
        heap, live = self._heap, self._live
        while heap:
            due, seq, key = heap[0]
            entry = live.get(key)
            if entry is not None and entry[1] == seq:
                return
            heapq.heappop(heap)
