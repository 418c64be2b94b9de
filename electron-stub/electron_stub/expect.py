"""Expectations (scenario ``expect`` lines) and the whole-run consistency checks.

Rules / theory of operation
---------------------------
* :func:`evaluate` checks one ``expect`` line at its ``t`` against what the trace recorder saw so
  far and what the reference Stack holds (README "Expectations"):

  - ``task_created`` — at least one task of ``type`` for (``tu``, ``ru``) [and ``source``] with
    ``t1 - 1 <= created_at <= t2 + 1`` (seconds from start: windows are inclusive and take a 1 s
    tolerance for the scheduler's own step);
  - ``no_task`` — none in that window; ``count`` — the number in the window (``tu``/``ru``
    optional) is within [``min``, ``max``];
  - ``task_open`` — such a task is open now; ``task_closed`` — the last such task (by creation)
    is closed [with ``reason``]; ``task_overdue`` — such a task is open, past its deadline, and
    the sidecar announced it (``task.updated {overdue: true}``, DESIGN §6);
  - ``marker`` — Stack holds marker ``name`` of (``tu``, ``ru``) and ``value`` is a subset of it
    (dicts recursively; other values by equality); ``value: null`` means absent;
  - ``requests`` — the platform requests of ``method`` the sidecar made for ``tu`` (naming
    ``ru``, when given: its ``params.ru`` or one of its ``ru_ids``) with ``t1 - 1 <= at <= t2 + 1``
    number within [``min``, ``max``] (README revision 2; the trace's ``platform.request`` lines);
  - ``decision`` — the pair's decision log, as the sidecars' ``why`` answers it, holds an entry
    with that ``outcome`` [and ``type``] at ``t1 - 1 <= at <= t2 + 1`` (:func:`evaluate_decision`;
    ``outcome`` ``refused`` / ``removed`` alone matches any reason).

* :func:`consistency` checks the whole run (DESIGN §6): no task closed twice (two different
  closes); never two open tasks of one type for a (TU, RU) (an interval overlap; a close and a new
  task at the same instant is fine); ``deadline == created_at + TTL`` (``unanswered_email``:
  the e-mail's ``received_at`` + 12 h; 0.01 s tolerance); and every RU chat message delivered to
  a logged-in TU had an open ``unanswered_message`` when its ``platform.event`` was answered
  (the replay samples that, :class:`MessageSample`).  And the revised semantics (DESIGN §6, §7,
  §9), given the scenario:
  - no answer-awaiting task (``unanswered_*``, ``like``) ever closes ``expired``, and each one
    still open a second past its deadline was announced overdue by then (``overdue_missing``);
  - no follow-up (``follow_up_message`` / ``follow_up_mail``) for an RU that is not a favorite —
    listed by an initial ``favorite`` line, or by a timeline ``favorite`` line before the task;
  - no online-only follow-up (post-chat mail excepted) left open more than an RU Online pass
    period (+ 1 s) after its RU went offline and stayed offline (``follow_up_offline_open``);
  - no Stack idempotency key reused for a different write (``key_conflict``, from the reference
    Stack's record).
* Results are values (:class:`Result`, :class:`Violation`); printing is :mod:`report`'s job.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable

import msgspec

from electron_stub import keyed
from electron_stub import scenario as sc
from electron_stub.trace import Recorder, Task

TOLERANCE_S = 1.0
DEADLINE_EPS_S = 0.01
ANSWER_AWAITING = ("unanswered_message", "unanswered_mail", "unanswered_email", "like")  # DESIGN §6
FOLLOW_UPS = ("follow_up_message", "follow_up_mail")
PASS_PERIOD_S = {"golden": 15.0, "chathouse": 60.0, "prime": 60.0}  # RU Online (seed 003)


class Result(msgspec.Struct, kw_only=True):
    lineno: int
    what: str
    ok: bool
    detail: str


class Violation(msgspec.Struct, kw_only=True):
    kind: str  # closed_twice | two_open | deadline | unanswered_missing | answer_awaiting_expired |
    # overdue_missing | follow_up_non_favorite | follow_up_offline_open | key_conflict
    detail: str


class MessageSample(msgspec.Struct, kw_only=True):
    """After an RU chat message's ``platform.event`` was answered: was an Unanswered open?"""

    at: float  # seconds from start
    tu: str
    ru: str
    msg_id: str
    lineno: int
    open_task: str | None


def subset(expected: Any, actual: Any) -> bool:
    """``expected`` ⊆ ``actual``: dict keys recursively, everything else by equality."""
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(k in actual and subset(v, actual[k]) for k, v in expected.items())
    if isinstance(expected, list):
        return isinstance(actual, list) and len(expected) == len(actual) and all(
            subset(e, a) for e, a in zip(expected, actual))
    if isinstance(expected, (int, float)) and isinstance(actual, (int, float)) and not isinstance(expected, bool):
        return float(expected) == float(actual)
    return expected == actual


def _desc(e: sc.Expect) -> str:
    parts = [e.what] + [f"{k}={getattr(e, k)}" for k in ("type", "tu", "ru", "source", "reason", "name")
                        if getattr(e, k) is not None]
    if e.between is not None:
        parts.append(f"between={list(e.between)}")
    return " ".join(parts)


def outcome_matches(expected: str, actual: str) -> bool:
    """``refused:offline`` matches itself; a bare ``refused`` or ``removed`` any reason of it."""
    if expected in ("refused", "removed"):
        return actual.startswith(expected + ":")
    return expected == actual


def evaluate_decision(e: sc.Expect, decisions: list[dict], start: float) -> Result:
    """A ``decision`` expectation over the pair's ``why`` rows (``at`` unix seconds; every
    machine's log merged)."""
    lo, hi = e.between[0] - TOLERANCE_S, e.between[1] + TOLERANCE_S
    hits = [d for d in decisions if lo <= d["at"] - start <= hi and outcome_matches(e.outcome, d["outcome"])
            and (e.type is None or d["type"] == e.type)]
    seen = [f"{d['type']}@{d['at'] - start:.1f}({d['source']}) {d['outcome']}" for d in decisions
            if e.type is None or d["type"] == e.type]
    shown = "[" + ", ".join(seen[:8]) + (" …" if len(seen) > 8 else "") + "]"
    return Result(lineno=e.lineno, what=e.what, ok=bool(hits),
                  detail=f"{_desc(e)} outcome={e.outcome}: found {len(hits)}; the pair's log: {shown}")


def _in_window(tasks: list[Task], start: float, between: tuple[float, float]) -> list[Task]:
    lo, hi = between[0] - TOLERANCE_S, between[1] + TOLERANCE_S
    return [t for t in tasks if lo <= t.created_at - start <= hi]


def _show(tasks: Iterable[Task], start: float) -> str:
    items = [f"{t.type}@{t.created_at - start:.1f}({t.source}{', ' + t.reason if t.reason else ''})" for t in tasks]
    return "[" + ", ".join(items[:8]) + (" …" if len(items) > 8 else "") + "]"


# Expectations the scenario format defines but this harness cannot evaluate yet, with the issue
# that brings them.  They fail (never pass vacuously), so a scenario using them is an honest
# expected failure until that issue lands.
NOT_YET: dict[str, str] = {}


def not_yet(lineno: int, what: str, why: str) -> Result:
    """A failed result for a line the harness cannot play or evaluate yet."""
    return Result(lineno=lineno, what=what, ok=False, detail=f"{what}: not supported by this harness yet — {why}")


def evaluate(e: sc.Expect, rec: Recorder, marker_of: Callable[[str, str, str], Any]) -> Result:
    """Evaluate one ``expect`` line now.  ``marker_of(tu, ru, name)`` reads Stack (None = absent)."""
    start, w = rec.start, e.what
    if w in NOT_YET:
        return not_yet(e.lineno, w, NOT_YET[w])
    if w == "decision":  # needs the sidecars' why rows, which only the replay can ask for
        raise ValueError("a decision expectation is evaluated by evaluate_decision over why rows")
    if w in ("sender", "history"):  # the sidecars' sender health: the replay asks them
        raise ValueError(f"a {w} expectation is evaluated by electron_stub.senders_lines")
    if w == "received":  # needs the receivers' records and every machine's rows
        raise ValueError("a received expectation is evaluated by routing_world.evaluate_received")
    if w == "delivery":  # needs the sidecars' delivery rows (electron_stub.routing_world)
        raise ValueError("a delivery expectation is evaluated by routing_world.evaluate_delivery")
    if w == "requests":
        lo, hi = (start + e.between[0] - TOLERANCE_S, start + e.between[1] + TOLERANCE_S)
        n = rec.requests_of(e.tu, e.method, e.ru, lo, hi)
        return Result(lineno=e.lineno, what=w, ok=e.min <= n <= e.max,
                      detail=f"{_desc(e)} method={e.method}: wanted {e.min}..{e.max}, found {n}")
    if w == "marker":
        actual = marker_of(e.tu, e.ru, e.name)
        if e.value is None:
            ok = actual is None
        else:
            ok = actual is not None and subset(e.value, actual)
        return Result(lineno=e.lineno, what=w, ok=ok,
                      detail=f"{_desc(e)}: expected {e.value!r}, Stack holds {actual!r}")
    tasks = rec.of(e.type, e.tu, e.ru, e.source)
    if w in ("task_created", "no_task", "count"):
        hits = _in_window(tasks, start, e.between)
        if w == "task_created":
            ok, want = bool(hits), "at least one"
        elif w == "no_task":
            ok, want = not hits, "none"
        else:
            ok, want = e.min <= len(hits) <= e.max, f"{e.min}..{e.max}"
        seen = _show(rec.of(e.type, e.tu, e.ru), start)
        return Result(lineno=e.lineno, what=w, ok=ok,
                      detail=f"{_desc(e)}: wanted {want}, found {len(hits)}; all of that type: {seen}")
    if w == "task_open":
        open_ = [t for t in tasks if t.is_open]
        return Result(lineno=e.lineno, what=w, ok=bool(open_),
                      detail=f"{_desc(e)}: open {len(open_)}; all: {_show(tasks, start)}")
    if w == "task_overdue":
        now = start + (e.t or 0.0)
        open_ = [t for t in tasks if t.is_open]
        late = [t for t in open_ if t.deadline <= now + DEADLINE_EPS_S]
        told = [t for t in late if t.overdue_at is not None and t.overdue_at <= now + DEADLINE_EPS_S]
        return Result(lineno=e.lineno, what=w, ok=bool(told),
                      detail=f"{_desc(e)}: open {len(open_)}, past the deadline {len(late)}, announced "
                             f"overdue {len(told)}; all: {_show(tasks, start)}")
    # task_closed
    if not tasks:
        return Result(lineno=e.lineno, what=w, ok=False, detail=f"{_desc(e)}: no such task was created")
    last = tasks[-1]
    ok = not last.is_open and (e.reason is None or last.reason == e.reason)
    state = "open" if last.is_open else f"closed {last.reason} at {last.closed_at - start:.1f}"
    return Result(lineno=e.lineno, what=w, ok=ok, detail=f"{_desc(e)}: last one is {state}")


# ---- consistency --------------------------------------------------------------------------

def check_closed_twice(tasks: Iterable[Task]) -> list[Violation]:
    return [Violation(kind="closed_twice", detail=f"task {t.task_id} ({t.type} {t.tu}/{t.ru}) closed "
                      f"{len(t.closes)} times: {t.closes}") for t in tasks if len(t.closes) > 1]


def check_two_open(tasks: Iterable[Task], start: float = 0.0) -> list[Violation]:
    """Never two open tasks of one type for a pair: per (tu, ru, type), by creation, each task must
    be created no earlier than the previous one closed."""
    by: dict[tuple[str, str, str], list[Task]] = {}
    for t in tasks:
        by.setdefault((t.tu, t.ru, t.type), []).append(t)
    out = []
    for (tu, ru, ty), ts in by.items():
        ts.sort(key=lambda t: (t.created_at, t.task_id))
        for a, b in zip(ts, ts[1:]):
            if a.closed_at is None or b.created_at < a.closed_at - 1e-6:
                end = "still open" if a.closed_at is None else f"closed at {a.closed_at - start:.3f}"
                out.append(Violation(kind="two_open", detail=f"{ty} {tu}/{ru}: {b.task_id} created at "
                                     f"{b.created_at - start:.3f} while {a.task_id} was open ({end})"))
    return out


def check_deadlines(tasks: Iterable[Task], email_received: Callable[[str, str], list[float]],
                    start: float = 0.0) -> list[Violation]:
    """``deadline == created_at + TTL``; ``unanswered_email`` from an e-mail's ``received_at``
    (``email_received(tu, ru)`` lists the pair's receipt instants, unix seconds)."""
    out = []
    for t in tasks:
        ttl = keyed.TTL_S.get(t.type)
        if ttl is None:
            out.append(Violation(kind="deadline", detail=f"{t.task_id}: unknown task type {t.type!r}"))
            continue
        if t.type == "unanswered_email":
            anchors = email_received(t.tu, t.ru)
            if any(abs(t.deadline - (r + ttl)) <= DEADLINE_EPS_S for r in anchors):
                continue
            want = f"an e-mail's received_at + {ttl:.0f} (received: {[round(r - start, 3) for r in anchors]})"
        else:
            if abs(t.deadline - (t.created_at + ttl)) <= DEADLINE_EPS_S:
                continue
            want = f"created_at {t.created_at - start:.3f} + {ttl:.0f}"
        out.append(Violation(kind="deadline", detail=f"{t.type} {t.task_id} {t.tu}/{t.ru}: deadline "
                             f"{t.deadline - start:.3f}, expected {want}"))
    return out


def check_messages(samples: Iterable[MessageSample]) -> list[Violation]:
    return [Violation(kind="unanswered_missing", detail=f"line {s.lineno}: RU message {s.msg_id} {s.tu}/{s.ru} "
                      f"at {s.at:.3f}: no open unanswered_message after its platform.event was answered")
            for s in samples if s.open_task is None]


def check_overdue(tasks: Iterable[Task], end: float, start: float = 0.0) -> list[Violation]:
    """Answer-awaiting tasks never expire, and are announced overdue within 1 s of the deadline
    when still open then (``end``: the run's last instant, unix seconds)."""
    out = []
    for t in tasks:
        if t.type not in ANSWER_AWAITING:
            continue
        if t.reason == "expired":
            out.append(Violation(kind="answer_awaiting_expired", detail=f"{t.type} {t.task_id} {t.tu}/{t.ru} "
                                 f"closed expired at {t.closed_at - start:.3f}: it should stay open, overdue"))
        open_until = end if t.closed_at is None else t.closed_at
        if open_until > t.deadline + TOLERANCE_S and (t.overdue_at is None or t.overdue_at > t.deadline + TOLERANCE_S):
            out.append(Violation(kind="overdue_missing", detail=f"{t.type} {t.task_id} {t.tu}/{t.ru}: open past its "
                                 f"deadline {t.deadline - start:.3f} with no task.updated overdue by then"))
    return out


def listed_favorites(scenario: Any) -> dict[tuple[str, str], float]:
    """(tu, ru) -> the instant (t, seconds from start; -inf = initial) Stack first lists it.  A
    TU with ``stack_favorites: false`` has no list at all: its favorites are the world's only."""
    out: dict[tuple[str, str], float] = {}
    unlisted = {x.tu for x in scenario.world if isinstance(x, sc.Tu) and not x.stack_favorites}
    for line in scenario.world:
        if isinstance(line, sc.Favorite) and line.tu not in unlisted:
            out.setdefault((line.tu, line.ru), float("-inf"))
    for line in scenario.timeline:
        if isinstance(line, sc.Favorite) and line.tu not in unlisted:
            out.setdefault((line.tu, line.ru), line.t)
    return out


def check_follow_up_favorites(tasks: Iterable[Task], scenario: Any, start: float = 0.0) -> list[Violation]:
    """Follow-ups only for favorites Stack lists (DESIGN §6)."""
    listed = listed_favorites(scenario)
    out = []
    for t in tasks:
        if t.type in FOLLOW_UPS:
            since = listed.get((t.tu, t.ru))
            if since is None or t.created_at - start < since:
                out.append(Violation(kind="follow_up_non_favorite", detail=f"{t.type} {t.task_id} {t.tu}/{t.ru} "
                                     f"at {t.created_at - start:.3f}: the RU is not a favorite"))
    return out


def offline_spans(scenario: Any, end_rel: float) -> dict[tuple[str, str], list[tuple[float, float]]]:
    """(project, ru) -> [(went offline, back online or the end)] in seconds from start."""
    spans: dict[tuple[str, str], list[tuple[float, float]]] = {}
    off: dict[tuple[str, str], float] = {}
    for line in scenario.timeline:
        if isinstance(line, sc.Online):
            key = (line.project, line.ru)
            if not line.online and key not in off:
                off[key] = line.t
            elif line.online and key in off:
                spans.setdefault(key, []).append((off.pop(key), line.t))
    for key, t0 in off.items():
        spans.setdefault(key, []).append((t0, end_rel))
    return spans


def check_offline_follow_ups(tasks: Iterable[Task], scenario: Any, end: float, start: float = 0.0) -> list[Violation]:
    """An online-only follow-up closes within a pass period (+1 s) of its RU going offline for
    good (DESIGN §6: "as soon as RU Online says the RU went offline")."""
    spans = offline_spans(scenario, end - start)
    out = []
    for t in tasks:
        if t.type not in FOLLOW_UPS or t.source == "post_chat":
            continue
        period = PASS_PERIOD_S.get(t.project, 60.0) + TOLERANCE_S
        created = t.created_at - start
        closed = (end if t.closed_at is None else t.closed_at) - start
        for off, on in spans.get((t.project, t.ru), ()):
            begin = max(off, created)
            if on - begin > period and closed > begin + period:
                out.append(Violation(kind="follow_up_offline_open", detail=f"{t.type} {t.task_id} {t.tu}/{t.ru}: "
                                     f"RU offline from {off:.3f}, task open until {closed:.3f}"))
                break
    return out


def check_key_conflicts(conflicts: Iterable[dict]) -> list[Violation]:
    return [Violation(kind="key_conflict", detail=f"Idempotency-Key {c['key']} reused: first {c['first'][:200]} "
                      f"then {c['then'][:200]}") for c in conflicts]


def consistency(rec: Recorder, email_received: Callable[[str, str], list[float]],
                samples: Iterable[MessageSample] = (), *, scenario: Any = None, end: float | None = None,
                stack_conflicts: Iterable[dict] = ()) -> list[Violation]:
    """Every whole-run check over the recorder's tasks and the replay's message samples;
    ``scenario`` and ``end`` (unix seconds) enable the checks that need the world's timeline."""
    tasks = list(rec.tasks.values())
    out = (check_closed_twice(tasks) + check_two_open(tasks, rec.start)
           + check_deadlines(tasks, email_received, rec.start) + check_messages(samples))
    if end is not None:
        out += check_overdue(tasks, end, rec.start)
    if scenario is not None:
        out += check_follow_up_favorites(tasks, scenario, rec.start)
        if end is not None:
            out += check_offline_follow_ups(tasks, scenario, end, rec.start)
    return out + check_key_conflicts(stack_conflicts)
