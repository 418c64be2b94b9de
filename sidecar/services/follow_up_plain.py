"""The Follow-up Message service after a chain's boundary (seed 004 "Після 60 хв"; DESIGN §7):
the plain check and Chathouse notifications, the methods :class:`PlainChecks` lends
:class:`~sidecar.services.follow_up_message.FollowUpMessageService` (its state: ``tu``,
``pool``, ``contact``).

Rules / theory of operation
---------------------------
* After the boundary the pair moves, without a gap, to the plain check ("over 60 min"): active
  favorite, TU wrote last, last contact older than 60 min, chat limit on Chathouse/Prime; checked
  at once when online, else on the RU's next appearance; and on every pass, since seed 003 checks
  the condition "прямо в цих проходах онлайну".  Decision (DESIGN §7): after a Follow-up for the
  pair closes, it is eligible again only 60 min later.
* Chathouse ``new_notification`` ONLINE_NOW / RECENT_PURCHASE: the same final check, no chain
  state, and only for a dialog that is not being worked (no open task, no live chain).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from sidecar.runtime.decisions import record_outcome
from sidecar.domain.tasks import TaskType
from sidecar.runtime.factory import Candidate
from sidecar.services import chain as ch
from sidecar.services.base import Step
from sidecar.services.follow_up_checks import Contact, chain_allowed, final_check

if TYPE_CHECKING:
    from sidecar.runtime.tu import TuRuntime

PLAIN_COOLDOWN_S = 3600.0  # DESIGN §7 decision: eligible again 60 min after a Follow-up closed


class PlainChecks:
    """The post-boundary checks, mixed into the service (no state of their own)."""

    tu: "TuRuntime"
    pool: dict[str, ch.Chain]  # ru -> live chain
    contact: dict[str, Contact]  # ru -> last chat contact, when known

    # checks -----------------------------------------------------------------------------------
    def _plain_prefilter(self, ru: str) -> bool:
        return chain_allowed(self.tu.favorites.get(ru))

    def _plain_check(self, step: Step, ru: str) -> None:
        """The "over 60 min" condition (seed 004 "Після 60 хв")."""
        rt = self.tu
        if not rt.inbox_synced or ru in self.pool or ru not in rt.online or not self._plain_prefilter(ru):
            return
        c = self.contact.get(ru)
        if c is None or c.last_from != "tu" or c.last_at is None:
            return
        if step.now - c.last_at <= ch.BOUNDARY_S:
            return
        last = rt.last_task(ru, TaskType.FOLLOW_UP_MESSAGE.value)
        if last is not None:
            if last.closed_at is None or step.now - last.closed_at < PLAIN_COOLDOWN_S:
                return
        if (reason := final_check(self.tu, ru)) is not None:
            record_outcome(step, rt, ru, TaskType.FOLLOW_UP_MESSAGE, "over_60m", reason)
            return
        rt.propose(step, Candidate(TaskType.FOLLOW_UP_MESSAGE, ru, "over_60m"))

    def _notification(self, step: Step, ru: str) -> None:
        rt = self.tu
        if ru in self.pool or rt.factory.open_of_pair(rt.tu, ru):
            # "якщо діалог уже ведеться — нічого"
            record_outcome(step, rt, ru, TaskType.FOLLOW_UP_MESSAGE, "notification",
                           "dialog_in_progress")
            return
        if (reason := final_check(self.tu, ru)) is not None:
            record_outcome(step, rt, ru, TaskType.FOLLOW_UP_MESSAGE, "notification", reason)
            return
        rt.propose(step, Candidate(TaskType.FOLLOW_UP_MESSAGE, ru, "notification"))
