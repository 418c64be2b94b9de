"""The work budget of template renders (DESIGN §10; issue 9 follow-up, a breaker's finds F1–F3):
the bounds every render is held to and the pool one event's renders share.

Rules / theory of operation
---------------------------
* A render may take :data:`MAX_STEPS` loop steps and :data:`MAX_WORK` work units (what a unit
  is and what charges one: :mod:`.cost`).
* The renders of one event together may take :data:`EVENT_WORK` units (:class:`EventWork`): an
  event fanned out to many rules × 50 actions, each at its own budget, would otherwise cost that
  many budgets.
* No Jinja here: the router builds an :class:`EventWork` for every event it routes, and an
  event whose actions have no template never loads Jinja (:mod:`.render` imports it on the
  first template; a sidecar starts ~50 ms sooner without it — issue 11, the suite's launches).
"""
from __future__ import annotations

MAX_STEPS = 10_000  # loop iterations + range() items per render
MAX_WORK = 1_000_000  # work units per render (see .cost)
EVENT_WORK = 4 * MAX_WORK  # work units of every render of one event together (its fan-out)


class EventWork:
    """The work units left to the renders of one event (:data:`EVENT_WORK`); each render draws
    on it (:meth:`sidecar.router.cost.RenderBudget.drawing_on`) and is charged its work afterwards."""

    def __init__(self, units: int = EVENT_WORK) -> None:
        self.left = units
