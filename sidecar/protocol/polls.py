"""Poll answers pushed into the frame (protocol 1.3): the wire shapes.  Why and what it saves:
docs/decisions.md, "Poll answers pushed into the frame".

Rules / theory of operation
---------------------------
* Virtual clock only, and only for a client that asks: ``clock.advance_to`` and
  ``platform.events`` take ``polls_ahead_s`` (seconds ≥ 0).  Their answer then lists in ``polls``
  (:class:`PollAhead`) every grid poll pass (:mod:`sidecar.services.passes` rule 5) the sidecar
  will run at or before ``next_due + polls_ahead_s`` whose params are fixed and that it has not
  listed to this connection before — per TU and pass its instant ``at`` (unix seconds),
  ``method`` and ``params``, exactly the ``platform.request`` it would make then.  The client
  keeps them until it reaches them.  One answer lists at most :data:`MAX_POLLS_LISTED` of them
  (the earliest; the passes of one instant are never split): the rest are listed by the next
  answers that ask, so an answer stays far below a client's frame limit whatever the horizon
  (86,400 s of 12 TUs was 1.2 MB, over the TypeScript client's 1 MiB).  Prime's ``open_limits`` scroll is never listed: its ``cursor`` is what the
  previous page answered (DESIGN §12.3).
* The client may attach, to its next ``clock.advance_to`` / ``platform.events``, the answer of any
  listed pass as the platform would give it at ``at`` (:class:`PollAnswer` in ``poll_answers``).
  The pass's step then uses it instead of a ``platform.request`` round trip; the answer names
  which it used (``poll_answers_used``: indices into ``poll_answers``).  An attached answer
  whose pass does not run in that call (a logout, another login session, a later instant) is
  dropped, as a late answer is today.  Nothing else changes: a client that attaches nothing
  (the TypeScript client, an older harness) is asked by round trip, and the wall clock never
  lists nor takes any.
* Answers that depend on the step (a chain's ``chat_history`` naming the RUs an answer found,
  mail reads, the login's and a reconnect's passes) always go by round trip.
"""
from __future__ import annotations

from typing import Annotated, Any

import msgspec

from sidecar.protocol.patterns import NO_CONTROL

_Id = Annotated[str, msgspec.Meta(min_length=1, max_length=256, pattern=NO_CONTROL)]
_Name = Annotated[str, msgspec.Meta(min_length=1, max_length=64, pattern=NO_CONTROL)]
AheadS = Annotated[float, msgspec.Meta(ge=0.0, le=86400.0)]  # seconds past next_due to list
MAX_POLL_ANSWERS = 10_000  # answers one call may carry (the frame cap bounds them anyway)
#: passes one answer lists at most (~150 bytes each: ~150 kB); the rest go to the next answers
MAX_POLLS_LISTED = 1_000


class PollAnswer(msgspec.Struct, kw_only=True, forbid_unknown_fields=False):
    """One pushed answer: the platform's answer (``result``, the same JSON a ``platform.request``
    would be answered with) to the pass ``pass`` of ``tu`` at ``at`` (unix seconds, the ``at`` of
    a :class:`PollAhead` the sidecar listed)."""

    tu: _Id
    pass_: _Name = msgspec.field(name="pass")
    at: float
    result: Any


class PollAhead(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """One poll pass the sidecar will run (module rules): ``project``, ``tu``, its ``pass`` name,
    ``at`` (unix seconds), and the ``method`` / ``params`` of the ``platform.request`` it makes."""

    project: str
    tu: str
    pass_: str = msgspec.field(name="pass")
    at: float
    method: str
    params: dict[str, Any]
