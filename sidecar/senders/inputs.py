"""The inputs of the sender health machine (seed 000 §1–§4; DESIGN §10).  Pure data.

Rule 1.  One input is one of six tagged msgspec Structs, :data:`HealthInput`; the tag (the class
         name, in the ``type`` field) is the "input type" of a row of
         :data:`~.table.TRANSITIONS`, and the machine dispatches on it with ``match``.
Rule 2.  Times are unix seconds: ``at`` is when the input happens (the machine's only clock);
         ``started_at`` is when the delivery attempt it reports began, so a result of an attempt
         started before the current (or last) cooldown is recognised as late.
Rule 3.  Inputs are values: frozen, compared by value, and :func:`decode_input` reads one back
         from JSON (a bad one is a ``msgspec.ValidationError`` naming the field).
"""
from __future__ import annotations

from typing import Union

import msgspec

from .groups import Group


class Failed(msgspec.Struct, frozen=True, tag=True):
    """A delivery attempt failed.  ``retryable`` per DESIGN §10 (terminal failures never count);
    ``final`` = the delivery's last retry (it does not count but runs the check, seed 000 §1);
    ``group`` = the sender's active group now (its threshold and cooldown delays)."""

    at: float
    started_at: float
    retryable: bool = True
    final: bool = False
    group: Group | None = None


class Delivered(msgspec.Struct, frozen=True, tag=True):
    """A delivery attempt succeeded (resets ``failed_in_row``; counts toward the ladder reset)."""

    at: float
    started_at: float


class Sent(msgspec.Struct, frozen=True, tag=True):
    """A delivery attempt starts now (pacing by ``group``'s send interval, seconds)."""

    at: float
    group: Group | None = None


class ProbeResult(msgspec.Struct, frozen=True, tag=True):
    """The warm-up probe's answer: ``ok`` delivered; ``terminal`` a failure that is not retryable."""

    at: float
    ok: bool
    terminal: bool = False


class Tick(msgspec.Struct, frozen=True, tag=True):
    """The scheduler's timer for this sender fired (probe slot or verdict)."""

    at: float


class Recover(msgspec.Struct, frozen=True, tag=True):
    """Manual recovery (seed 000 §4); ``by`` = who asked, for the history note."""

    at: float
    by: str = "manual"


HealthInput = Union[Failed, Delivered, Sent, ProbeResult, Tick, Recover]

_DECODER = msgspec.json.Decoder(HealthInput)


def decode_input(data: bytes | str) -> HealthInput:
    """One input from JSON, e.g. ``{"type": "Tick", "at": 1780000000.0}``; raises
    ``msgspec.ValidationError`` (the message names the field) or ``msgspec.DecodeError``."""
    return _DECODER.decode(data)


def input_type(ev: HealthInput) -> str:
    """The input's tag: the input-type column of :data:`~.table.TRANSITIONS`."""
    return type(ev).__name__
