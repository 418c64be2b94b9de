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
    is closed [with ``reason``];
  - ``marker`` — Stack holds marker ``name`` of (``tu``, ``ru``) and ``value`` is a subset of it
    (dicts recursively; other values by equality); ``value: null`` means absent.

* :func:`consistency` checks the whole run (DESIGN §6): no task closed twice (two different
  closes); never two open tasks of one type for a (TU, RU) (an interval overlap; a close and a new
  task at the same instant is fine); ``deadline == created_at + TTL`` (``unanswered_email``:
  the e-mail's ``received_at`` + 12 h; 0.01 s tolerance); and every RU chat message delivered to
  a logged-in TU had an open ``unanswered_message`` when its ``platform.event`` was answered
  (the replay samples that, :class:`MessageSample`).
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


class Result(msgspec.Struct, kw_only=True):
    lineno: int
    what: str
    ok: bool
    detail: str


class Violation(msgspec.Struct, kw_only=True):
    kind: str  # closed_twice | two_open | deadline | unanswered_missing
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


def _in_window(tasks: list[Task], start: float, between: tuple[float, float]) -> list[Task]:
    lo, hi = between[0] - TOLERANCE_S, between[1] + TOLERANCE_S
    return [t for t in tasks if lo <= t.created_at - start <= hi]


def _show(tasks: Iterable[Task], start: float) -> str:
    items = [f"{t.type}@{t.created_at - start:.1f}({t.source}{', ' + t.reason if t.reason else ''})" for t in tasks]
    return "[" + ", ".join(items[:8]) + (" …" if len(items) > 8 else "") + "]"


# Expectations the scenario format defines but this harness cannot evaluate yet, with the issue
# that brings them.  They fail (never pass vacuously), so a scenario using them is an honest
# expected failure until that issue lands.
NOT_YET: dict[str, str] = {
    "task_overdue": "overdue tasks (issue 6)",
    "decision": "the decision log (issue 6)",
    "delivery": "the router (issue 9)",
    "sender": "sender health (issue 10)",
    "history": "sender health (issue 10)",
}


def not_yet(lineno: int, what: str, why: str) -> Result:
    """A failed result for a line the harness cannot play or evaluate yet."""
    return Result(lineno=lineno, what=what, ok=False, detail=f"{what}: not supported by this harness yet — {why}")


def evaluate(e: sc.Expect, rec: Recorder, marker_of: Callable[[str, str, str], Any]) -> Result:
    """Evaluate one ``expect`` line now.  ``marker_of(tu, ru, name)`` reads Stack (None = absent)."""
    start, w = rec.start, e.what
    if w in NOT_YET:
        return not_yet(e.lineno, w, NOT_YET[w])
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


def consistency(rec: Recorder, email_received: Callable[[str, str], list[float]],
                samples: Iterable[MessageSample] = ()) -> list[Violation]:
    """Every whole-run check over the recorder's tasks and the replay's message samples."""
    tasks = list(rec.tasks.values())
    return (check_closed_twice(tasks) + check_two_open(tasks, rec.start)
            + check_deadlines(tasks, email_received, rec.start) + check_messages(samples))
