"""Batched frames of the replay (issue 11 item 3): which queue items travel together in ONE
``platform.events`` frame, and the bookkeeping that keeps the result the same as one by one.

Rules / theory of operation
---------------------------
* A frame carries consecutive queue items up to the next sync point, each with its own
  ``received_at`` (its instant), so the sidecar's advance runs inside the frame — its timers and
  delivery passes between the events too, each at its own instant, exactly as
  ``clock.advance_to`` runs them:

  - timeline world lines whose frames are platform events for the one running sidecar (a line
    for a TU with no running sidecar, e.g. an RU going online, has no event: it is a world-only
    item, applied by its time, below — also before the frame's first event);
  - operator answers on the chat or mail channel (an own-send event) anywhere in the frame, sent
    with ``if_open: task_id``: the operator answers only a task still open, and whether it is
    depends on what the sidecar did earlier in the frame — so the sidecar decides at the
    event's turn and skips it (``skipped`` result, listed in ``batch_skipped`` of later
    requests) when the task closed; a skipped answer changes no world and writes no
    ``operator.sent``, as one by one, which checks the task after its advance.  An answer to a
    task the recorder already knows closed is no answer (a world-only item without change).

* A frame ends before: a line that is not a platform event (login, logout, crash, expectation,
  manage, favorite update, …), an e-mail answer (``task.close``), a line past ``end``, and every
  item at or past the **answer horizon**: a task the sidecar creates in this frame is created no
  sooner than its first event or ``next_due`` (announced before the frame), and answered no
  sooner than the operator's shortest delay after that, so the items before the horizon are the
  ones one by one would play before any answer the frame's tasks bring.
* The world as of the asking step: a ``platform.request`` carries ``at`` (its step's instant)
  and ``batch_seen`` (events the sidecar has begun); every item before event ``batch_seen`` and
  every item earlier than ``at`` is applied first (``seen``) — a line at the very instant of a
  timer comes after it, as one by one advances to that instant before playing the line.  Each
  answer is the world as of the asking step, in both modes.
* Calls the sidecar makes inside the frame (Stack's flushes, webhooks, Telegram) carry their
  instant (``Sidecar-Virtual-At``); the reference Stack and the receivers record that, so their
  records do not depend on where the driver is.
* The sidecar's notifications during the frame are held and handed on after it in stream order,
  with each item's own follow-up (the RU message's open-task sample, ``operator.sent``) placed
  after the notifications of its event's step — the per-event ``seq`` of the answer says where
  they end — exactly where one by one sees them.  A timer's notes between two events fall
  between their follow-ups, as one by one's advance between them.  A world-only item's
  ``settle`` (an operator's pass-over while the TU's hand is busy) runs once every note is
  through: it reads what it needs as of its instant from the notes' own instants.
* ``stop_at_due`` (the sidecar stops before any event a timer of its own precedes, ``taken`` <
  sent) is no longer asked for; items not taken (an older sidecar) still go back with the same
  keys.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

MAX_EVENTS = 500  # events per frame: the frame stays well under the bridge's frame size


@dataclass
class Item:
    """One queue item in a frame: its queue ``entry`` (put back when not taken), its event's
    params (None: a world-only item), ``apply`` (its world change), ``after`` (what follows
    its event once the event's notifications were handed on), ``settle`` (a world-only
    item's follow-up once every notification of the frame was handed on) and ``then`` (what
    follows once the whole frame is through, skipped or not: a backlog look's pick, which
    reads the sidecar at the look's instant — so an item with ``then`` ends its frame)."""

    entry: tuple
    event: dict | None
    apply: Callable[[], None] | None = None
    after: Callable[[], None] | None = None
    settle: Callable[[], None] | None = None
    then: Callable[[], Awaitable[None]] | None = None
    first_event: int = 0  # events of the frame before this item (its event's index)
    applied: bool = False

    @property
    def t(self) -> float:
        return self.entry[0]


@dataclass
class Frame:
    """The items of one frame, their world changes not yet applied and the held notifications."""

    items: list[Item]
    start: float = 0.0  # the scenario's start (unix seconds): items' ``t`` are relative to it
    held: list[tuple[Any, str, Any]] = field(default_factory=list)
    skipped: set[int] = field(default_factory=set)  # ``if_open`` events the sidecar skipped

    def __post_init__(self) -> None:
        n = 0
        for it in self.items:
            it.first_event = n
            n += it.event is not None

    @property
    def events(self) -> list[dict]:
        return [it.event for it in self.items if it.event is not None]

    def skip(self, indices: Any) -> None:
        """The sidecar skipped these ``if_open`` events (``batch_skipped`` / results): their
        task had closed, so their world change and follow-up never happen."""
        if isinstance(indices, list):
            self.skipped.update(i for i in indices if isinstance(i, int))

    def seen(self, begun: int, before: float | None = None) -> float | None:
        """The sidecar has begun ``begun`` events and its step is at ``before`` (unix seconds;
        None: unknown): apply, in order, every item before event ``begun`` and every item
        earlier than ``before`` (a world-only line between two events, before a timer of the
        sidecar that runs between them — one by one applies it before that advance; a line at
        the timer's very instant comes after it).  Returns the instant (seconds from start) of
        the last event applied, or None before the first."""
        at = None
        for it in self.items:
            if it.first_event >= begun and (before is None or self.start + it.t >= before):
                break
            if not it.applied:
                it.applied = True
                if it.apply is not None and not (it.event is not None and it.first_event in self.skipped):
                    it.apply()
            if it.event is not None:
                at = it.t
        return at

    def taken_items(self, taken: int) -> tuple[list[Item], list[Item]]:
        """``(done, rest)``: the items whose event (or place) is before event ``taken``, and
        the ones to put back."""
        done = [it for it in self.items if it.first_event < taken]
        return done, self.items[len(done):]

    def hand_on(self, done: list[Item], results: list[Any], deliver: Callable[[Any, str, Any], None]) -> None:
        """Hand the held notifications on in arrival (stream) order, each item's ``after``
        once the notifications of its event's step (``results[i]["seq"]``) are through."""
        held, i = self.held, 0
        for it in done:
            if it.event is None:
                continue
            res = results[it.first_event] if it.first_event < len(results) else None
            upto = res.get("seq") if isinstance(res, dict) else None
            while upto is not None and i < len(held) and (_seq(held[i]) or 0) <= upto:
                deliver(*held[i])  # a note without seq (not the stream's) goes with its neighbours
                i += 1
            if it.after is not None and it.first_event not in self.skipped:
                it.after()
        for note in held[i:]:
            deliver(*note)
        self.held = []
        for it in done:  # they read the recorder as of their own instant, by its notes' instants
            if it.event is None and it.settle is not None:
                it.settle()


def _seq(note: tuple[Any, str, Any]) -> int | None:
    params = note[2]
    seq = params.get("seq") if isinstance(params, dict) else None
    return seq if isinstance(seq, int) else None
