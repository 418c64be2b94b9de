"""A TU that Stack has no favorites list for is made visible, not left silent (DESIGN §12.5, §9,
§10's ``sidecar/tu/no_favorites`` row; issue 22 item 2).

Source: seed 003 question 5 — «Якщо фаворитів рахуємо у себе — бутстрап першого запуску TU все
одно звідкись треба брати» (if we compute the favorites ourselves, the first-run bootstrap still
has to come from somewhere).  The rule that computes favorites lives in a document the seeds cite
("Plan") and do not include, so the sidecar guesses none.

Rules / theory of operation
---------------------------
* Applies only when Stack **answered** and its startup data has no list (``favorites`` missing or
  ``null``; :func:`sidecar.stack.startup.parse_startup` gives None).  ``[]`` is Stack's list, empty:
  nothing is raised.  Stack unreachable: the local cache stands in and nothing is raised either —
  the sidecar does not know Stack has no list, and Stack's outage has its own alert
  (``sidecar/stack/unreachable``); see docs/decisions.md.
* With no list the TU has no favorites (DESIGN §6: follow-ups only for favorites Stack lists; a
  favorite Stack stops listing is dropped at the next login), so cached ones are dropped — and
  counted, so a list that vanished shows in the alert.
* :func:`announce` adds to the login's step: one decision-log row for the TU (``ru`` =
  :data:`~sidecar.runtime.decisions.TU_WIDE`, type ``favorites``, source ``login``, outcome
  ``no_list``), shown by ``why`` for every RU of the TU and by ``sidecar why TU``; and one
  ``sidecar/tu/no_favorites`` event (priority ``high``) whose ``dedup_key`` is the TU and the UTC
  day, so the router delivers it once per TU per day (a same-day re-login is a ``duplicate``).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from sidecar.router.model import RoutingEvent
from sidecar.runtime import decisions

if TYPE_CHECKING:  # pragma: no cover
    from sidecar.runtime.step import Step
    from sidecar.runtime.tu import TuRuntime

DAY_S = 86400.0


def announce(step: Step, rt: TuRuntime, dropped: int) -> None:
    """Log and route "Stack has no favorites list for ``rt.tu``" in the login's ``step``;
    ``dropped``: cached favorites the login dropped (int >= 0)."""
    detail = {"local_favorites_dropped": dropped}
    decisions.record(step, rt, decisions.Decision(rt.tu, decisions.TU_WIDE, step.now, "favorites",
                                                  "login", "no_list", None, detail))
    day = int(step.now // DAY_S)  # the UTC day (unix seconds)
    step.emit(RoutingEvent(source="sidecar", subject="tu", action="no_favorites", priority="high",
                    payload={"tu": rt.tu, "project": rt.project, "operator": rt.operator,
                             "local_favorites_dropped": dropped},
                    dedup_key=f"tu-no-favorites:{rt.tu}:{day}"))
