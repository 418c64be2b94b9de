"""Follow-up mail's 6 h source at a grid RU Online pass (seed 001 "Останній лист TU старший за 6
годин"; DESIGN §5, §8.1, §13), judged again only for pairs whose facts changed
(docs/decisions.md, "poll answers as differences").

Rules / theory of operation
---------------------------
* Every online pair of a **grid** RU Online pass (``scheduled``: the same instants across a
  restart, DESIGN §5) is offered to :meth:`SixHourPass.judge`, in RU order.  A pair held for its
  limit (``six_h_hold``) or whose last known TU letter is not yet 6 h old (``six_h_after``) is
  skipped; else the eligibility of the joint check (:func:`~.check.refusal`, in its order: the
  favorite's own refusals — not a favorite, inactive, white, freeloader, blocked — then the
  pair's open Unanswered / Follow-up mail) from the few facts it reads; a refusal goes to the
  decision log (which keeps a repeated refusal once, DESIGN §13); an eligible pair with no 6 h
  candidate in the last 6 h and no other mail source pending offers a ``last_mail_6h`` trigger
  (:func:`~.sources.six_hour_trigger`), read and decided by the service's joint check.
* **Differences, not lists.**  A refusal that follows from the favorite value alone
  (:data:`FAVORITE_REFUSALS`) is remembered with that value.  While the pair's favorite is the
  very same value (a :class:`~sidecar.domain.favorites.Favorite` is frozen; every change makes a
  new one, and holding the value here keeps its id from being reused) and the decision log's
  last outcome for the pair's 6 h source is still that refusal, judging the pair again would
  compute the same refusal and the log would drop it: the pass does nothing for the pair.  Any
  other outcome logged for the source meanwhile, a logout (the log forgets the TU, the memory is
  cleared) or a new favorite value makes the next pass judge it in full.  So a pass that changes
  nothing costs a dictionary look-up per refused pair (bench/pass_loop.py: 680 k → 474 k
  instructions per unchanged Golden pass of 30 online RUs).
* The open tasks are looked up only for a pair the favorite's refusals leave eligible (the
  order of :func:`~.check.refusal`, so the same reason comes out).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from sidecar.domain.favorites import Favorite
from sidecar.domain.tasks import TaskType
from sidecar.runtime.decisions import record_outcome
from sidecar.services.follow_up_mail import check
from sidecar.services.follow_up_mail import sources as src

if TYPE_CHECKING:  # pragma: no cover
    from sidecar.runtime.tu import TuRuntime
    from sidecar.services.base import Step
    from sidecar.services.follow_up_mail.lock import PairLocks
    from sidecar.services.follow_up_mail.marker import MailMarker


class MailService(Protocol):
    """What the 6 h source reads of the Follow-up mail service (no import of it: one way)."""

    tu: "TuRuntime"
    six_h_hold: set[str]  # refused for the limit: wait for a change
    six_h_after: dict[str, float]  # ru -> the 6 h source may pass only later (unix s)
    locks: "PairLocks"

    def marker(self, ru: str) -> "MailMarker": ...

TYPE = TaskType.FOLLOW_UP_MAIL
MAIL = TYPE.value  # history rows and the log's keys carry the value
MAIL_TASKS = frozenset({TaskType.UNANSWERED_MAIL, TaskType.FOLLOW_UP_MAIL})
# 6 h refusals that follow from the favorite value alone (check.refusal with the pair online)
FAVORITE_REFUSALS = frozenset({"not_favorite", "inactive", "white", "freeloader", "blocked"})


class SixHourPass:
    """The 6 h source's side of a grid pass for one TU's service (module rules)."""

    def __init__(self) -> None:
        # ru -> (favorite value or None, its 6 h refusal): judged again only once either moved
        self.refused: dict[str, tuple[Favorite | None, str]] = {}

    def clear(self) -> None:
        """The session ended (logout)."""
        self.refused.clear()

    def judge(self, svc: MailService, step: "Step", ru: str) -> None:
        """Pair ``ru`` of a grid pass (module rules)."""
        rt = svc.tu
        if ru in svc.six_h_hold or step.now <= svc.six_h_after.get(ru, float("-inf")):
            return
        fav = rt.favorites.get(ru)
        seen = self.refused.get(ru)
        if seen is not None and seen[0] is fav:
            last = rt.decisions.last.get((rt.tu, ru, MAIL, src.LAST_MAIL_6H))
            if last is not None and last[0] == seen[1]:
                return  # the same value, the same refusal, already the log's last word
        reason = check.refusal(fav, fav is not None and rt.client.is_freeloader(fav), ru in rt.online,
                               False, True)
        if reason is None and any(t.type in MAIL_TASKS for t in rt.factory.open_of_pair(rt.tu, ru)):
            reason = "stronger_task_open"
        if reason is not None:  # the decision log keeps a repeated refusal once (DESIGN §13)
            outcome = f"refused:{reason}"
            if reason in FAVORITE_REFUSALS:
                self.refused[ru] = (fav, outcome)
            record_outcome(step, rt, ru, TYPE, src.LAST_MAIL_6H, outcome)
            return
        last_6h = next((r for r in reversed(rt.history.get(ru, ()))
                        if r.type == MAIL and r.source == src.LAST_MAIL_6H), None)
        # "очікує перевірки з іншого mail-джерела": a trigger queued or in flight, and an armed
        # post-chat timer (its check is coming; a 6 h mail now would only block or double it)
        other_pending = svc.locks.pending(ru) or svc.marker(ru).post_chat_pending
        trigger = src.six_hour_trigger(step.now, False, other_pending,  # no mail task is open here
                                       None if last_6h is None else last_6h.created_at)
        if trigger is not None:
            svc.locks.offer(ru, trigger)


__all__ = ["FAVORITE_REFUSALS", "SixHourPass"]
