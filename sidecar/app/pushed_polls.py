"""Poll answers pushed into the frame: the sidecar's side of
:mod:`sidecar.protocol.polls`.

Rules / theory of operation
---------------------------
* **Listing.** After a ``clock.advance_to`` / ``platform.events`` that asked (``polls_ahead_s``),
  :meth:`PushedPolls.list_into` names every grid poll pass with fixed params due at or before
  ``next_due + polls_ahead_s`` (:meth:`sidecar.services.passes.PassService.ahead`), per logged-in
  TU, in time order (ties by TU, then pass name) — but only the ones not listed to this
  connection before, and at most :data:`~sidecar.protocol.polls.MAX_POLLS_LISTED` of them (cut
  between two instants, never inside one; the later ones are listed by the next answers): the client keeps what it was told until it reaches it, so an answer lists
  a pass once (most answers list none or one, where listing everything ahead each time cost
  about what a round trip saves).  A TU that logs in later has its passes listed from the
  horizon on; the ones before it go by round trip.  A replayer reaches no further before it sends
  its next frame when it advances at most its operator's shortest delay past ``next_due``
  (electron-stub README, "Virtual time steps").
* **Taking.** The call's ``poll_answers`` are offered for the call only (:meth:`offered`, under
  the step lock): a scheduled pass step's request (service ``passes``, context
  :data:`~sidecar.services.passes.SCHEDULED`) whose ``(tu, pass, at)`` and params match an
  offered answer takes it (:meth:`take`) instead of a round trip; its answer step runs exactly as
  a round trip's would.  What the call did not take is dropped when it ends — a pass that did
  not run (a logout, a later instant) — as a late answer is dropped today.  ``used`` lists what
  was taken (indices into ``poll_answers``), in the order the passes ran.
* Nothing here runs on the wall clock: the app offers answers and lists passes only on the
  virtual clock, where a step's requests are made inline (:mod:`sidecar.runtime.executor`).
"""
from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

from sidecar.protocol.polls import MAX_POLLS_LISTED, PollAhead, PollAnswer
from sidecar.runtime.engine import Engine
from sidecar.runtime.step import Request
from sidecar.services.passes import SCHEDULED, PassService

PASSES = PassService.name  # the service whose grid steps may take a pushed answer
Outcome = tuple[Any, str | None]  # (result, None) or (None, error text): sidecar.app.requests


class PushedPolls:
    """Lists the passes ahead and holds the answers offered to the call under way."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        # (tu, pass, at) -> (index, result); a request's ``at`` is never None on the virtual clock
        self._offered: dict[tuple[str, str, float | None], tuple[int, Any]] = {}
        self.used: list[int] = []  # indices taken in the call under way
        self._conn: object = None  # the connection the passes were listed to (a new one: from scratch)
        self._until = -math.inf  # every pass due by then was listed to it (unix seconds)

    def listed(self, after: float, until: float) -> list[PollAhead]:
        """Every grid pass with fixed params due after ``after`` and at or before ``until``
        (unix seconds), in time order (ties by TU, then pass)."""
        out: list[PollAhead] = []
        for tu in sorted(self.engine.tus):
            rt = self.engine.tus[tu]
            svc = rt.services.named(PASSES)
            if not rt.logged_in or not isinstance(svc, PassService):
                continue
            for at, p in svc.ahead(after, until):
                out.append(PollAhead(project=rt.project, tu=tu, pass_=p.name, at=at, method=p.method,
                                     params=dict(p.params)))
        out.sort(key=lambda x: (x.at, x.tu, x.pass_))
        return out

    def list_into(self, result: dict, ahead_s: float | None, next_due: float | None, conn: object) -> dict:
        """``result`` of a call that asked ``polls_ahead_s`` (``ahead_s``; None: not asked, or
        the wall clock) with ``polls``: the passes due by ``next_due + ahead_s`` that were not
        listed before to the connection ``conn`` (module rules)."""
        if ahead_s is None:
            return result
        if conn is not self._conn:  # a new connection: it knows nothing yet
            self._conn, self._until = conn, -math.inf
        until = -math.inf if next_due is None else next_due + ahead_s
        polls = self.listed(self._until, until) if until > self._until else []
        if len(polls) > MAX_POLLS_LISTED:  # cut after the last whole instant that fits
            ats = [p.at for p in polls]
            # one instant holding more than the cap is listed whole (a pass is never half-known)
            cut = bisect_left(ats, ats[MAX_POLLS_LISTED]) or bisect_right(ats, ats[0])
            polls, until = polls[:cut], ats[cut - 1]
        result["polls"] = polls
        self._until = max(self._until, until)
        return result

    async def perform_many(self, reqs: list[Request], one: Callable[[Request], Awaitable[Outcome]],
                           many: Callable[[list[Request]], Awaitable[list[Outcome]]]) -> list[Outcome]:
        """One step's requests: the pushed ones take their answer, the rest are asked — by
        ``many`` in one round trip when several are left, else by ``one``."""
        taken = [self.take(r) for r in reqs]
        ask = [r for r, (hit, _) in zip(reqs, taken) if not hit]
        asked = await many(ask) if len(ask) > 1 else [await one(r) for r in ask]
        it = iter(asked)
        return [(res, None) if hit else next(it) for hit, res in taken]

    @contextmanager
    def offered(self, answers: list[PollAnswer] | None) -> Iterator[list[int]]:
        """Offer ``answers`` for the call inside (the caller holds the step lock); yields the
        list of indices taken, complete when the block ends.  What was not taken is dropped."""
        self._offered = {(a.tu, a.pass_, a.at): (i, a.result) for i, a in enumerate(answers or ())}
        self.used = used = list[int]()
        try:
            yield used
        finally:
            self._offered = {}
            self.used = []

    def take(self, req: Request) -> tuple[bool, Any]:
        """``(True, result)`` when an offered answer is this request's (module rules), which
        it consumes; else ``(False, None)``: ask by round trip."""
        if not self._offered or req.service != PASSES or req.context != SCHEDULED:
            return False, None
        key = (req.tu, req.tag, req.at)
        hit = self._offered.get(key)
        if hit is None:
            return False, None
        rt = self.engine.tus.get(req.tu)
        if rt is None or req.params != dict(rt.client.pass_named(req.tag).params):
            return False, None  # e.g. open_limits, whose params carry a cursor: never pushed
        del self._offered[key]
        self.used.append(hit[0])
        return True, hit[1]
