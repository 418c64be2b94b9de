"""Sender health's plug into the router: what the pump asks and tells it, as lists in and lists
out — one admission and one settlement per pump round, not one call per row (DESIGN §10 "Targets
are isolated", "Sender health"; seed 000 §1–§3; docs/decisions.md "One sender-health exchange
per pass").

Rules / theory of operation
---------------------------
* **Admission** (:meth:`BatchHealth.admit`): the pump hands one :class:`Want` per target — how
  many due rows of it the round could send, in order — and gets one :class:`Grant` per want:
  the first ``admitted`` rows may go, the next one waits (``refusal``: when to ask again, None =
  parked until health releases the target) — or sender health raised asking (``error``, a bug:
  that row waits the router's health-error wait).  Admitting ``n`` rows of a sender is exactly
  ``n`` answers of "may it send now?" in a row, each admitted one an attempt that starts now
  (its ``Sent``: the active group's send interval paces the next), stopping at the first "no":
  a paced sender gets one row of a batch, a sender in cooldown none.
* **Settlement** (:meth:`BatchHealth.settle`): the pump hands every :class:`Told` of the round
  — one per ATTEMPT (one HTTP request: a Stack batch is one, seed 000 §1 "+1 per failed send"),
  ``final`` on a delivery's last attempt, or a warm-up probe's answer (``probe``) — in the order
  the attempts ended, and gets one :class:`Settlement`: the store ops to commit with the
  outcomes (sender rows, history, :class:`~.attempt.ReleaseTarget` …), the router events
  (``sidecar/sender/...``), and a :class:`Fault` for each told item whose bookkeeping raised (a
  bug: logged by the pump, the others are kept; the outcome itself is recorded anyway).
* A health that offers only the per-row calls (:class:`SenderHealth`: ``may_send``,
  ``report``, ``probes_due``, ``probe_result`` — test stand-ins, :class:`AlwaysOpen`) is
  adapted by :class:`PerCall` (:func:`as_batch`), whose answers are the same calls in the same
  order; :class:`~sidecar.senders.gate.HealthGate` answers the lists itself.
* Pure: no clock, no I/O; every instant is unix seconds handed in.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import msgspec

from sidecar.store.ops import Op

from .model import RoutingEvent
from .outcome import Kind, Outcome


class Admission(msgspec.Struct, frozen=True, kw_only=True):
    allowed: bool
    not_before: float | None = None  # when to ask again; None = wait for ReleaseTarget
    reason: str | None = None  # e.g. "cooldown until …" (shown in the row's last_error)


class Report(msgspec.Struct, frozen=True, kw_only=True):
    ops: tuple[Op, ...] = ()
    events: tuple[RoutingEvent, ...] = ()


YES = Admission(allowed=True)
NOTHING = Report()


class Want(msgspec.Struct, frozen=True):
    """The round could send ``rows`` due rows of ``target`` (a sender), in order."""

    target: str
    channel: str
    rows: int


@dataclass(frozen=True, slots=True)
class Grant:
    """Health's answer to a :class:`Want`: the first ``admitted`` rows go; the next waits for
    ``refusal`` or, when health raised asking (``error``), the health-error wait."""

    target: str
    admitted: int
    refusal: Admission | None = None
    error: BaseException | None = None


class Told(msgspec.Struct, frozen=True, kw_only=True):
    """How one attempt of ``target`` ended at ``at`` (unix seconds), or — ``probe`` — the
    answer of its warm-up probe.  ``about`` names it for a log line (a delivery id, "a request
    of 12 writes", "probe")."""

    target: str
    channel: str
    outcome: Outcome
    at: float
    final: bool = False
    probe: bool = False
    about: str = ""


@dataclass(frozen=True, slots=True)
class Fault:
    """Sender health raised taking ``told`` (a bug): logged by the pump, the rest is kept."""

    told: Told
    error: BaseException


class Settlement(msgspec.Struct, frozen=True, kw_only=True):
    ops: tuple[Op, ...] = ()
    events: tuple[RoutingEvent, ...] = ()
    faults: tuple[Fault, ...] = ()


class SenderHealth(Protocol):
    """Sender health one call at a time (seed 000); a sender is one target."""

    def may_send(self, target: str, channel: str, now: float) -> Admission: ...

    def report(self, target: str, channel: str, outcome: Outcome, now: float, *,
               final: bool) -> Report: ...

    def probes_due(self, now: float) -> list[str]:
        """Targets whose warm-up probe is to be sent now (seed 000 §3); each is returned once."""
        ...

    def probe_result(self, target: str, outcome: Outcome, now: float) -> Report:
        """The answer of a probe :meth:`probes_due` asked for."""
        ...


class BatchHealth(Protocol):
    """Sender health as the pump asks it: once per round (module rules)."""

    def admit(self, wants: Sequence[Want], now: float) -> list[Grant]: ...

    def settle(self, told: Sequence[Told], now: float) -> Settlement: ...

    def probes_due(self, now: float) -> list[str]: ...


def admit_each(may_send: Callable[[str, str, float], Admission], wants: Sequence[Want],
               now: float) -> list[Grant]:
    """The grants of ``wants`` from "may it send now?" asked row by row, stopping at a
    target's first "no" or error (module rules)."""
    out: list[Grant] = []
    for w in wants:
        n = 0
        try:
            while n < w.rows:
                adm = may_send(w.target, w.channel, now)
                if not adm.allowed:
                    out.append(Grant(w.target, n, refusal=adm))
                    break
                n += 1
            else:
                out.append(Grant(w.target, n))
        except Exception as exc:  # noqa: BLE001 - a bug of one sender's health stops only its rows
            out.append(Grant(w.target, n, error=exc))
    return out


def settle_each(report: Callable[[Told], Report], probe_result: Callable[[Told], Report],
                told: Sequence[Told]) -> Settlement:
    """The settlement of ``told`` from one report (or probe answer) per item, in order; an
    item whose bookkeeping raised is a :class:`Fault`, the others stand."""
    ops: list[Op] = []
    events: list[RoutingEvent] = []
    faults: list[Fault] = []
    for t in told:
        try:
            rep = probe_result(t) if t.probe else report(t)
        except Exception as exc:  # noqa: BLE001 - one outcome's bookkeeping bug keeps the others
            faults.append(Fault(t, exc))
            continue
        ops.extend(rep.ops)
        events.extend(rep.events)
    return Settlement(ops=tuple(ops), events=tuple(events), faults=tuple(faults))


class PerCall:
    """A :class:`SenderHealth` answering as a :class:`BatchHealth`: the same calls, in order."""

    def __init__(self, health: SenderHealth) -> None:
        self.health = health

    def admit(self, wants: Sequence[Want], now: float) -> list[Grant]:
        return admit_each(self.health.may_send, wants, now)

    def settle(self, told: Sequence[Told], now: float) -> Settlement:
        return settle_each(
            lambda t: self.health.report(t.target, t.channel, t.outcome, t.at, final=t.final),
            lambda t: self.health.probe_result(t.target, t.outcome, t.at), told)

    def probes_due(self, now: float) -> list[str]:
        return self.health.probes_due(now)


def as_batch(health: SenderHealth | BatchHealth) -> BatchHealth:
    """``health`` itself when it answers lists (``admit`` and ``settle``), else :class:`PerCall`."""
    if callable(getattr(health, "admit", None)) and callable(getattr(health, "settle", None)):
        return health  # type: ignore[return-value]
    return PerCall(health)  # type: ignore[arg-type]


class AlwaysOpen:
    """Sender health before it exists: every sender may always send; nothing is recorded."""

    def may_send(self, target: str, channel: str, now: float) -> Admission:
        return YES

    def report(self, target: str, channel: str, outcome: Outcome, now: float, *,
               final: bool) -> Report:
        return NOTHING

    def probes_due(self, now: float) -> list[str]:
        return []

    def probe_result(self, target: str, outcome: Outcome, now: float) -> Report:
        return NOTHING


def told_of(target: str, channel: str, outcome: Outcome, at: float, *, final: bool,
            about: str = "") -> Told | None:
    """What health is told of an attempt that ended with ``outcome``: nothing for ``held`` (no
    attempt) and ``flooded`` (no failure: ``failed_in_row`` stays as it was, DESIGN §10)."""
    if outcome.kind in (Kind.HELD.value, Kind.FLOODED.value):
        return None
    return Told(target=target, channel=channel, outcome=outcome, at=at, final=final, about=about)
