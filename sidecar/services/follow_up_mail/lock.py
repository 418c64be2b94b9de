"""One lock per TU+RU (seed 001 "Спільна фінальна перевірка": "Усі джерела сходяться в один
lock для TU+RU"; "Якщо одночасно готові кілька причин однієї пари, ці відповіді
використовуються спільно").

Rules / theory of operation
---------------------------
* Sources :meth:`PairLocks.offer` triggers during a step; at the step's end the runtime calls
  :meth:`PairLocks.flush`, which hands out, per pair, every trigger queued so far — the pair's
  sources ready at once — as one batch, and marks the pair busy.  One batch = one
  :func:`~.check.plan` = at most one mail-history read = at most one candidate.
* While a pair's read is in flight, new triggers wait for the next batch (the answer may predate
  them: "the TU has not mailed since the event" must be judged on a read made after the event).
  :meth:`PairLocks.release` frees the pair when its answer (or error) is handled; triggers that
  waited are flushed with the next step.
* A trigger equal to one already queued or in flight (same source and ref) is one check.
* State is runtime memory only (seed 001 "Runtime-стан причин живе в пам'яті сервісу"); a
  restart rebuilds what matters from the marker and task history.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from sidecar.services.follow_up_mail.sources import Trigger


@dataclass(slots=True)
class PairLocks:
    queued: dict[str, list[Trigger]] = field(default_factory=dict)  # ru -> waiting triggers
    busy: dict[str, tuple[Trigger, ...]] = field(default_factory=dict)  # ru -> batch in flight

    def offer(self, ru: str, trigger: Trigger) -> bool:
        """Queue ``trigger`` for pair ``ru``; False when the same check is already queued or in
        flight."""
        key = (trigger.source, trigger.ref)
        waiting = self.queued.setdefault(ru, [])
        if any((t.source, t.ref) == key for t in (*waiting, *self.busy.get(ru, ()))):
            if not waiting:
                self.queued.pop(ru, None)
            return False
        waiting.append(trigger)
        return True

    def pending(self, ru: str, source: str | None = None) -> bool:
        """A trigger of ``ru`` (of ``source``, or of any source) is queued or in flight."""
        ts = (*self.queued.get(ru, ()), *self.busy.get(ru, ()))
        return any(source is None or t.source == source for t in ts)

    def flush(self) -> dict[str, tuple[Trigger, ...]]:
        """The batches to check now (pairs not busy, in RU order); they become busy."""
        out: dict[str, tuple[Trigger, ...]] = {}
        for ru in sorted(self.queued):
            if ru in self.busy or not self.queued[ru]:
                continue
            out[ru] = tuple(self.queued.pop(ru))
            self.busy[ru] = out[ru]
        return out

    def release(self, ru: str) -> bool:
        """The pair's batch is decided; True when triggers wait for the next flush."""
        self.busy.pop(ru, None)
        return bool(self.queued.get(ru))

    def drop(self, ru: str | None = None) -> None:
        """Forget one pair (block, favorite gone) or, with None, every pair (logout)."""
        if ru is None:
            self.queued.clear()
            self.busy.clear()
        else:
            self.queued.pop(ru, None)
            self.busy.pop(ru, None)
