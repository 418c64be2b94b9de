"""Follow-up message chain: the pure state machine (seed 004 "Стан ланцюжка", "Оновлення
ланцюжка"; seed 003 "Follow-up message" scenarios 1–10; DESIGN §7).

Rules / theory of operation
---------------------------
Marker ``favorite.followUpChat = {sourceUnansweredTaskId, step, nextCheckAt}``; ``step`` counts
finished attempts (0–3).  Every function here is pure: it takes the chain, ``now`` (unix seconds)
and the keyed RNG and returns the new chain, never touching a clock, a timer or a store.

==================  ===========================================  ==============================
state / input       condition                                    result
==================  ===========================================  ==============================
(none) / Unanswered closed ``answered`` at c  —                  WAIT(step 0, next = c + U(60,180))
WAIT / next ≤ now   RU offline                                   WAIT unchanged, no re-arming
WAIT / next ≤ now   RU online, final check refuses               WAIT, still due (no roll)
WAIT / next ≤ now   RU online, check ok, roll hit (100/75/50 %)  candidate → factory
  candidate created                                              TASK(task_id)
  candidate refused                                              WAIT, still due (no re-roll)
WAIT / next ≤ now   RU online, check ok, roll miss               WAIT(step+1, next = now + U)
                                                                 or END when step+1 = 3
TASK / task closed  any reason but logout, at c                  WAIT(step+1, next = c + U)
                                                                 or END when step+1 = 3
TASK / closed by logout                                          WAIT, attempt still due
any / new Unanswered message                                     REMOVED, marker cleared
any / block either way                                           REMOVED, marker cleared
any / favorite inactive or white                                 REMOVED, marker ENDED
any / now ≥ last TU message + 3600 s                             REMOVED, marker ENDED
                                                                 (→ "over 60 min" check)
==================  ===========================================  ==============================

* Every draw is keyed by (TU, RU, sourceUnansweredTaskId, step, purpose), so a restart, a crash or
  another machine re-derives the same delay and the same roll: a miss stays a miss.
* A manual TU send does not advance the chain; it only moves the 60-minute boundary, which counts
  from the TU's last message.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from sidecar.core.clock import from_iso, to_iso
from sidecar.core.rng import KeyedRandom
from sidecar.domain.tasks import HistoryRow

CHANCES = (1.0, 0.75, 0.5)  # chance of attempt ``step`` (seed 003: 1-й 100 %, 2-й 75 %, 3-й 50 %)
MAX_STEPS = len(CHANCES)  # three attempts, not three guaranteed tasks
DELAY_S = (60.0, 180.0)  # U(60, 180) s between attempts
BOUNDARY_S = 3600.0  # the chain lives until 60 min after the TU's last message


@dataclass(frozen=True, slots=True)
class Chain:
    """One pair's live chain (the runtime pool's entry)."""

    source: str  # sourceUnansweredTaskId
    step: int  # finished attempts, 0..2 while live
    next_check_at: float  # unix seconds
    last_tu_at: float  # the TU's last message (boundary anchor)
    task_id: str | None = None  # the created Follow-up task waiting for its close

    @property
    def boundary(self) -> float:
        return self.last_tu_at + BOUNDARY_S

    @property
    def waiting_task(self) -> bool:
        return self.task_id is not None


def delay(rng: KeyedRandom, tu: str, ru: str, source: str, step: int) -> float:
    """U(60, 180) s before attempt ``step`` of the chain started by ``source``."""
    return rng.uniform(DELAY_S[0], DELAY_S[1], "followUpChat", tu, ru, source, step, "delay")


def ms(t: float) -> float:
    """Chain instants are kept to the millisecond: the marker's ISO ``nextCheckAt`` carries
    milliseconds, so a chain restored from it on another machine or after a crash checks at
    exactly the instant the live one would have."""
    return round(t, 3)


def roll(rng: KeyedRandom, tu: str, ru: str, source: str, step: int) -> tuple[float, bool]:
    """(chance, hit) of attempt ``step`` — the same on every machine and after every restart."""
    chance = CHANCES[step]
    return chance, rng.chance(chance, "followUpChat", tu, ru, source, step, "roll")


def start(rng: KeyedRandom, tu: str, ru: str, source: str, closed_at: float) -> Chain:
    """An Unanswered message ``source`` closed as answered at ``closed_at``."""
    return Chain(source, 0, ms(closed_at + delay(rng, tu, ru, source, 0)), closed_at)


def advance(rng: KeyedRandom, tu: str, ru: str, chain: Chain, at: float) -> Chain | None:
    """One attempt finished at ``at`` (a miss at check time, or the close of its task): the next
    attempt is U(60, 180) s later; None when that was the third."""
    step = chain.step + 1
    if step >= MAX_STEPS:
        return None
    return Chain(chain.source, step, ms(at + delay(rng, tu, ru, chain.source, step)),
                 chain.last_tu_at)


def with_task(chain: Chain, task_id: str) -> Chain:
    return replace(chain, task_id=task_id)


def tu_wrote(chain: Chain, at: float) -> Chain:
    """The TU sent a message: the 60-minute boundary moves; nothing else changes."""
    return chain if at <= chain.last_tu_at else replace(chain, last_tu_at=at)


def marker(chain: Chain) -> dict:
    """The seed's marker value for a live chain."""
    return {"sourceUnansweredTaskId": chain.source, "step": chain.step,
            "nextCheckAt": to_iso(chain.next_check_at)}


def ended_marker(chain: Chain) -> dict:
    """The record left when the chain is removed before its third attempt (60-minute boundary,
    favorite inactive or white): the step it reached and no next check.  Restore never rebuilds a
    chain whose marker says it ended — later TU messages move the last contact, but they do not
    revive a chain the live sidecar had already ended (DESIGN §7: the marker "stays as the record
    of where the chain ended")."""
    return {"sourceUnansweredTaskId": chain.source, "step": chain.step, "nextCheckAt": None}


def finished_marker(source: str) -> dict:
    """The record left after the third attempt (DESIGN §7: the marker is not cleared, so no
    machine rebuilds and re-rolls a finished chain)."""
    return {"sourceUnansweredTaskId": source, "step": MAX_STEPS, "nextCheckAt": None}


def parse_marker(value: object) -> tuple[str, int, float | None] | None:
    """(source, step, nextCheckAt) of a stored marker, None when absent or unreadable."""
    if not isinstance(value, dict):
        return None
    source, step, nxt = value.get("sourceUnansweredTaskId"), value.get("step"), value.get("nextCheckAt")
    if not isinstance(source, str) or not isinstance(step, int):
        return None
    try:
        at = from_iso(nxt) if isinstance(nxt, str) else (float(nxt) if nxt is not None else None)
    except (TypeError, ValueError):
        at = None
    return source, step, at


def restore(rng: KeyedRandom, tu: str, ru: str, *, last_unanswered: HistoryRow | None,
            follow_ups: list[HistoryRow], marker_value: object, now: float,
            last_tu_at: float | None) -> Chain | None:
    """Rebuild a pair's chain at login (seed 004 "Ініціалізація", seed 003 scenarios 3 and 6).

    ``last_unanswered``: the newest closed Unanswered message history row (``task_id``,
    ``closed_at``, ``reason``); ``follow_ups``: the pair's chain Follow-up rows created after it;
    ``last_tu_at``: the TU's last known message.  The marker's ``nextCheckAt`` wins; without a
    marker the first attempt is re-derived with the same keyed draw as live.  Returns None when
    there is no unfinished chain or the 60-minute boundary has passed (the plain check takes over).
    """
    if (last_unanswered is None or last_unanswered.reason != "answered"
            or last_unanswered.closed_at is None):
        return None
    source = last_unanswered.task_id
    closed_at = last_unanswered.closed_at
    anchor = max(closed_at, last_tu_at or closed_at)
    for row in follow_ups:
        if row.reason == "answered" and row.closed_at is not None:
            anchor = max(anchor, row.closed_at)
    parsed = parse_marker(marker_value)
    if parsed is not None and parsed[0] == source:
        _, step, nxt = parsed
        if step >= MAX_STEPS or nxt is None:
            return None  # finished, or ended (ended_marker): never rebuilt
        chain = Chain(source, step, ms(nxt), anchor)
    else:
        # a task closed by a logout was never acted on: its attempt is still due (DESIGN §7)
        done = [r.closed_at for r in follow_ups if r.closed_at is not None and r.reason != "logout"]
        step = len(done)
        if step >= MAX_STEPS:
            return None
        base = done[-1] if done else closed_at
        chain = Chain(source, step, ms(base + delay(rng, tu, ru, source, step)), anchor)
    open_rows = [r for r in follow_ups if r.closed_at is None]
    if open_rows:
        chain = with_task(chain, open_rows[-1].task_id)
    if now >= chain.boundary and not chain.waiting_task:
        return None
    return chain
