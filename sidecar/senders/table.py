"""The sender health transition table (seed 000 §1–§4; DESIGN §10 "Sender health").  Pure data.

Rule 1.  Every step of :class:`~.health.HealthMachine` is one row here: the key is (state now,
         input type, outcome); the row gives the next state and the history code the step
         writes (``None`` = it writes none).  The machine decides only the outcome label; the
         state it moves to and the code it records are read from the row, so this table is the
         whole state graph and cannot drift from the code.
Rule 2.  A key with no row is a bug in the machine, never bad input: :func:`lookup` raises
         :class:`MissingTransition` instead of guessing.
Rule 3.  The keys are distinct: :func:`index` refuses a duplicate (a dict literal would keep the
         last one silently), so the count of rows is the count of transitions.
Rule 4.  A counted failure's 109 row comes first when the same step also starts a cooldown or
         Need Check: the row's code is the step's last history row (the transition's own).

The history codes are the seed's (109 failure counted, 104 warm-up sent, 105 warm-up confirmed,
100 cooldown finished) and ours (101 cooldown started, 102 extended, 103 Need Check, 106 manual
recovery).
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Literal, NamedTuple

StateName = Literal["active", "cooldown", "need_check"]
ACTIVE: StateName = "active"
COOLDOWN: StateName = "cooldown"
NEED_CHECK: StateName = "need_check"

FAILED, WARMUP_SENT, WARMUP_OK, FINISHED = 109, 104, 105, 100
STARTED, EXTENDED, NEED_CHECK_CODE, RECOVERED = 101, 102, 103, 106


class MachineInvariantError(AssertionError):
    """The sender health machine broke one of its own rules (a bug, not an input error).
    An ``AssertionError`` so that it is never mistaken for a refusal of bad input."""


class MissingTransition(MachineInvariantError):
    """No row of :data:`TRANSITIONS` for ``key`` = (state, input type, outcome)."""

    def __init__(self, key: tuple[str, str, str]) -> None:
        super().__init__(f"no sender health transition for state={key[0]!r}, input={key[1]!r}, outcome={key[2]!r}")
        self.key = key


class Transition(NamedTuple):
    """One row's consequence: the next state and the history code (``None`` = no row)."""

    to: StateName
    code: int | None


Key = tuple[StateName, str, str]

#: (state, input type, outcome, next state, history code) — the order is the reading order only.
ROWS: tuple[tuple[StateName, str, str, StateName, int | None], ...] = (
    # a delivery attempt fails (§1 trigger, §2 check)
    (ACTIVE, "Failed", "below threshold", ACTIVE, FAILED),
    (ACTIVE, "Failed", "final retry below threshold", ACTIVE, None),
    (ACTIVE, "Failed", "terminal", ACTIVE, None),
    (ACTIVE, "Failed", "late", ACTIVE, None),
    (ACTIVE, "Failed", "threshold", COOLDOWN, STARTED),
    (ACTIVE, "Failed", "ladder exhausted", NEED_CHECK, NEED_CHECK_CODE),
    (ACTIVE, "Failed", "ladder exhausted, never need check", COOLDOWN, STARTED),
    (COOLDOWN, "Failed", "late or held", COOLDOWN, None),
    (NEED_CHECK, "Failed", "held", NEED_CHECK, None),
    # a delivery succeeds
    (ACTIVE, "Delivered", "counted", ACTIVE, None),
    (ACTIVE, "Delivered", "late", ACTIVE, None),
    (COOLDOWN, "Delivered", "late or held", COOLDOWN, None),
    (NEED_CHECK, "Delivered", "held", NEED_CHECK, None),
    # an attempt starts (pacing only)
    (ACTIVE, "Sent", "paced", ACTIVE, None),
    (COOLDOWN, "Sent", "paced", COOLDOWN, None),
    (NEED_CHECK, "Sent", "paced", NEED_CHECK, None),
    # the warm-up probe (§3)
    (COOLDOWN, "Tick", "probe sent", COOLDOWN, WARMUP_SENT),
    (COOLDOWN, "ProbeResult", "confirmed", COOLDOWN, WARMUP_OK),
    (COOLDOWN, "ProbeResult", "not confirmed", COOLDOWN, None),  # failed, or delivered after 3 h
    (COOLDOWN, "ProbeResult", "stale answer", COOLDOWN, None),
    # the verdict (§3)
    (COOLDOWN, "Tick", "proven", ACTIVE, FINISHED),
    (COOLDOWN, "Tick", "neutral", ACTIVE, FINISHED),
    (COOLDOWN, "Tick", "fail-open", ACTIVE, FINISHED),
    (COOLDOWN, "Tick", "extension", COOLDOWN, EXTENDED),
    (COOLDOWN, "Tick", "probe failed terminally", NEED_CHECK, NEED_CHECK_CODE),
    (COOLDOWN, "Tick", "nothing due", COOLDOWN, None),
    # the Stack group's health probe at its cooldown's end (DESIGN §10 "Groups")
    (COOLDOWN, "Tick", "end probe sent", COOLDOWN, None),
    (COOLDOWN, "ProbeResult", "proven at the end", ACTIVE, FINISHED),  # after its 105
    (COOLDOWN, "ProbeResult", "unproven", COOLDOWN, EXTENDED),
    (COOLDOWN, "Tick", "unproven", COOLDOWN, EXTENDED),  # its answer never came (a lost probe)
    # manual recovery
    (ACTIVE, "Recover", "manual", ACTIVE, RECOVERED),
    (COOLDOWN, "Recover", "manual", ACTIVE, RECOVERED),
    (NEED_CHECK, "Recover", "manual", ACTIVE, RECOVERED),
    # inputs that change nothing where they arrive (stale timers and answers)
    (ACTIVE, "Tick", "stale timer", ACTIVE, None),
    (ACTIVE, "ProbeResult", "stale answer", ACTIVE, None),
    (NEED_CHECK, "Tick", "stale timer", NEED_CHECK, None),
    (NEED_CHECK, "ProbeResult", "stale answer", NEED_CHECK, None),
)


def index(rows: Iterable[tuple[StateName, str, str, StateName, int | None]]) -> dict[Key, Transition]:
    """The rows as a dict keyed by (state, input type, outcome); a repeated key is a
    :class:`MachineInvariantError` (Rule 3)."""
    table: dict[Key, Transition] = {}
    for state, kind, outcome, to, code in rows:
        key = (state, kind, outcome)
        if key in table:
            raise MachineInvariantError(f"duplicate sender health transition {key}")
        table[key] = Transition(to, code)
    return table


#: Every transition: (state, input type, outcome) → (next state, history code or None).
TRANSITIONS: dict[Key, Transition] = index(ROWS)


def lookup(state: StateName, kind: str, outcome: str) -> Transition:
    """The row for (state, input type, outcome); :class:`MissingTransition` when there is none."""
    row = TRANSITIONS.get((state, kind, outcome))
    if row is None:
        raise MissingTransition((state, kind, outcome))
    return row


def describe() -> str:
    """The table as bullet lines for a module docstring (``state × input (outcome) → next [code]``)."""
    return "\n".join(f"* {s} × {e} ({o}) → {t}" + (f" [{c}]" if c else "") for (s, e, o), (t, c) in TRANSITIONS.items())
