"""The decision log: every candidate and what became of it, chain misses and removals (DESIGN
§13 "The decision log ("why")", §9 "Candidates").

Rule 1.  A **decision** is a fact about one pair at one instant (unix seconds): a task type, the trigger
         (``source``: ``socket``, ``chain``, ``over_60m``, ``follow_up_pass``, ``notification``,
         ``scroll_new`` …) and an ``outcome``:

         - ``created`` — the Task Factory made the task (``task_id`` set);
         - ``refused:<reason>`` — a service's final check or the Task Factory said no, e.g.
           ``stronger_task_open``, ``offline``, ``no_chat_limit``, ``limit_unknown``, ``not_favorite``,
           ``blocked``, ``white``, ``inactive``, ``freeloader``, ``logged_out``;
         - ``miss`` — a Follow-up chain attempt whose keyed roll failed (seed 003: "шанс не випав");
         - ``found`` — Golden's backup read (DESIGN §12.7, :mod:`sidecar.services.golden_backup`) saw
           an RU message no Unanswered message covers (``detail.message_at``); the candidate's own
           ``created`` / ``refused`` row follows;
         - ``removed:<reason>`` — a Follow-up chain left the runtime pool (seed 004 "Видалення"):
           ``new_unanswered``, ``blocked``, ``inactive``, ``white``, ``attempts_done``, ``past_60m``.
Rule 2.  Services and the Task Factory hand facts up through :func:`record`; it appends the store op
         (:class:`~sidecar.store.ops.PutDecision`) and, for a candidate (``created`` / ``refused`` /
         ``miss``), the Stack write ``POST /v1/tus/{tu}/candidates`` to the **caller's step**, so the
         decision commits in the same transaction as the state change it explains and reaches Stack
         through the outbox (DESIGN §9).  Nothing is written outside a step.
Rule 3.  A refusal that a service re-checks on every RU Online pass (DESIGN §7) is logged **once per
         change**: the same outcome for the same (TU, RU, type, source) is not repeated until a different
         outcome was logged in between.  One fact reported twice in one step (the Task Factory and the
         chain both report a factory refusal) is logged once.
Rule 4.  A fact about the **whole TU** is a row with ``ru`` = :data:`TU_WIDE` (``""``): Stack had no
         favorites list at login (type ``favorites``, source ``login``, outcome ``no_list``;
         :mod:`sidecar.runtime.no_favorites`).  ``why`` lists such rows with every pair of the TU — they
         answer "why no reminder for this customer" too.  Kept :data:`RETENTION_S` (7 days);
         :func:`housekeeping_ops` prunes older decisions and closed tasks (Stack keeps the task
         history), run at every login and once a day.
Rule 5.  Read side: the app serves the bridge method ``why {tu, ru, since?}``; ``sidecar why TU
         RU`` (:mod:`sidecar.cli.why`) reads the data dir.  Each row carries ``text``, a sentence a shift
         lead can read without knowing the code (:func:`explain`).
"""
from __future__ import annotations

import functools
from datetime import UTC, datetime
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import msgspec

from sidecar.domain.tasks import TaskType
from sidecar.stack import writes as stack_out
from sidecar.store import ops

if TYPE_CHECKING:  # pragma: no cover
    from sidecar.runtime.step import Step

RETENTION_S = 7 * 86400.0  # DESIGN §13: the decision log is kept 7 days
HOUSEKEEPING_PERIOD_S = 86400.0  # prune once a day while a TU stays logged in
CANDIDATE_OUTCOMES = ("created", "refused", "miss")  # outcomes Stack hears of (DESIGN §9)
TU_WIDE = ""  # the ``ru`` of a decision about the whole TU (no RU id is empty)


class Decision(msgspec.Struct, frozen=True, gc=False):
    """One row of the decision log.  ``at``: unix seconds (UTC).  Not ``kw_only``: one is
    built per decision, positionally in this field order (see :class:`~sidecar.domain.tasks.Task`)."""

    tu: str
    ru: str
    at: float
    type: str  # task type of the candidate (follow_up_message for chain removals; favorites: TU-wide)
    source: str  # trigger name, as on the task (``chain``, ``socket``, ``over_60m``, ``follow_up_pass`` …)
    outcome: str  # created | refused:<reason> | miss | removed:<reason>
    task_id: str | None = None  # the created (or blocking) task, when there is one
    detail: dict = {}  # e.g. {"step": 1, "chance": 0.75} or {"open_type": "like"}


# record / record_outcome build these positionally: keep in step with their fields
assert Decision.__struct_fields__ == ("tu", "ru", "at", "type", "source", "outcome", "task_id", "detail")
assert ops.PutDecision.__struct_fields__ == ("tu", "ru", "at", "task_type", "source", "outcome",
                                             "task_id", "detail")

def refused(reason: str) -> tuple[str, dict]:
    """``(outcome, detail)`` for a refusal reason as services and the factory return it.

    Reasons are normalised to DESIGN §13's names: ``open`` (the same type is open) and
    ``stronger_task:<type>`` both become ``stronger_task_open`` with ``detail.open_type`` (DESIGN
    §6: a candidate is refused while a stronger *or the same* task of its channel is open)."""
    reason = reason.removeprefix("refused:")
    if reason.startswith("stronger_task:"):
        return "refused:stronger_task_open", {"open_type": reason.split(":", 1)[1]}
    if reason == "open":
        return "refused:stronger_task_open", {}
    return f"refused:{reason}", {}


class DecisionLog:
    """Per process: which outcome was logged last per (TU, RU, type, source) — the memory that
    keeps a refusal re-checked every pass from being logged every pass."""

    def __init__(self) -> None:
        self.last: dict[tuple[str, str, str, str], tuple[str, float]] = {}  # key -> (outcome, at)
        self.logged = 0  # rows written by this process (status)

    def admit(self, d: Decision) -> bool:
        key = (d.tu, d.ru, d.type, d.source)
        if self.repeated(key, d.outcome, d.at):
            return False
        self.last[key] = (d.outcome, d.at)
        self.logged += 1
        return True

    def repeated(self, key: tuple[str, str, str, str], outcome: str, at: float) -> bool:
        """True when :meth:`admit` would refuse ``outcome`` at ``at`` for ``key`` (TU, RU, type,
        source): it repeats the last logged outcome.  Read-only."""
        prev = self.last.get(key)
        return prev is not None and prev[0] == outcome and (prev[1] == at or _repeats(outcome))

    def forget_tu(self, tu: str) -> None:
        """At logout: a new session logs its first refusals again."""
        for key in [k for k in self.last if k[0] == tu]:
            del self.last[key]


def _repeats(outcome: str) -> bool:
    return outcome.startswith("refused:")


class Recorder(Protocol):
    """What a decision needs of the TU it concerns (a :class:`~sidecar.runtime.tu.TuRuntime`)."""

    tu: str
    decisions: DecisionLog  # the process's decision log memory (shared by every TU)

    def blocking_type(self, ru: str, type_: TaskType) -> TaskType | None: ...


def record(step: Step, rt: Recorder, d: Decision) -> bool:
    """Log ``d`` in ``step`` (store row + Stack candidate write); False when it repeats the last
    logged outcome (see the module rules)."""
    log: DecisionLog = rt.decisions
    if not log.admit(d):
        return False
    step.ops.append(ops.PutDecision(d.tu, d.ru, d.at, d.type, d.source, d.outcome, d.task_id,
                                    dict(d.detail)))  # positional: PutDecision's field order
    if d.outcome.partition(":")[0] in CANDIDATE_OUTCOMES:
        # the candidate's detail is encoded into the write's body at once: no copy needed
        step.events.append(stack_out.candidate_event(d.tu, d.ru, d.type, d.source, d.at,
                                                     outcome=d.outcome, task_id=d.task_id,
                                                     detail=d.detail))  # step.emit, inlined
    return True


def record_outcome(step: Step, rt: Recorder, ru: str, type_: Any, source: str, outcome: str,
                   *, task_id: str | None = None, detail: dict | None = None) -> bool:
    """Convenience for services: ``outcome`` is ``created``, ``miss``, ``found``, ``removed:<why>`` or a
    refusal (``refused:<reason>`` or a bare reason, normalised by :func:`refused`)."""
    type_ = getattr(type_, "_value_", type_)  # a TaskType's value (Enum.value is a slow descriptor)
    if outcome not in ("created", "miss", "found") and not outcome.startswith("removed:"):
        outcome, extra = refused(outcome)
        # a refusal re-checked on every pass is refused by the log: say so before its detail
        # (a blocking-task look-up) and its row are built for nothing
        if rt.decisions.repeated((rt.tu, ru, type_, source), outcome, step.now):
            return False
        if outcome == "refused:stronger_task_open" and not (detail or {}).get("open_type"):
            blocking = rt.blocking_type(ru, TaskType(type_))
            if blocking is not None:
                extra["open_type"] = blocking.value
        detail = {**extra, **detail} if detail else extra
    else:
        detail = dict(detail) if detail else {}  # the row owns its detail
    return record(step, rt, Decision(rt.tu, ru, step.now, type_, source, outcome, task_id, detail))


def recorded(propose: Callable) -> Callable:
    """Decorator for ``TaskFactory.propose(step, rt, candidate)``: logs what the factory decided
    (``created`` with the task id, or ``refused:<reason>``) and returns its result unchanged."""

    @functools.wraps(propose)
    def wrapper(self, step: Step, rt: Recorder, cand: Any) -> Any:
        result = propose(self, step, rt, cand)
        task_id = getattr(result, "task_id", None)
        if task_id is not None:  # record_outcome(..., "created", task_id=task_id), inlined: one
            # per created task, and "created" needs none of its normalising
            type_ = cand.type
            record(step, rt, Decision(rt.tu, cand.ru, step.now, getattr(type_, "_value_", type_),
                                      cand.source, "created", task_id, {}))
        else:
            record_outcome(step, rt, cand.ru, cand.type, cand.source,
                           getattr(result, "reason", "unknown"))
        return result

    return wrapper


def housekeeping_ops(now: float) -> list[ops.Op]:
    """Prune decisions and closed tasks older than :data:`RETENTION_S` (unix seconds ``now``)."""
    before = now - RETENTION_S
    return [ops.PruneDecisions(before=before), ops.PruneTasks(closed_before=before)]


# ---- read side ---------------------------------------------------------------------------------

REASON_TEXT = {
    "stronger_task_open": "a stronger or the same task was already open for this customer",
    "offline": "the customer was offline",
    "no_chat_limit": "no chat limit left",
    "no_mail_limit": "no mail limit left",
    "limit_unknown": "the limit was not known yet (counts as none)",
    "not_favorite": "the customer is not an active favorite in Stack",
    "blocked": "blocked (by the profile or by the customer)",
    "white": "the favorite is whitelisted (never reminded)",
    "inactive": "the favorite is not active",
    "freeloader": "the customer is a freeloader",
    "tu_mailed_since": "the profile already mailed since",
    "logged_out": "the profile was not logged in",
    "dialog_in_progress": "the dialog was already being worked",
    "new_unanswered": "the customer wrote again (a new Unanswered message)",
    "attempts_done": "all three attempts were used",
    "past_60m": "60 minutes passed since the profile's last message",
    # Follow-up mail (seed 001)
    "tu_mail_recent": "the profile's last letter is not older than 6 hours",
    "read_already_processed": "this read of the letter was already handled",
    "burst_already_processed": "this burst was already rolled (never re-rolled)",
    "follow_up_mail_after_read": "a Follow-up mail already followed this read",
    "history_error": "the mail history could not be read (retried, nothing moved)",
    "merged": "checked together with another reason, which made the task",
}


def explain(row: dict) -> str:
    """One sentence for a shift lead, e.g. ``follow_up_message (chain) refused: the customer was
    offline``."""
    outcome = row["outcome"]
    if outcome == "no_list":
        dropped = (row.get("detail") or {}).get("local_favorites_dropped")
        gone = f"; {dropped} cached favorites were dropped" if dropped else ""
        return ("Stack had no favorites list for this profile at login: no Follow-up message or "
                f"mail for any customer until Stack has one (the shift lead was alerted){gone}")
    head = f"{row['type']} ({row['source']})"
    kind, _, reason = outcome.partition(":")
    detail = row.get("detail") or {}
    if kind == "found":
        at = detail.get("message_at")
        when = ""
        if isinstance(at, (int, float)):
            when = " of " + datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d %H:%M:%S") + " UTC"
        return (f"{head}: the chat history read for the follow-up check shows the customer's last "
                f"message{when} unanswered and no task for it (it reached no socket: logged out, a "
                "gap or a restart) — an Unanswered message is raised")
    if kind == "created":
        return f"{head} created as task {row.get('task_id')}"
    if kind == "miss":
        chance = detail.get("chance")
        pct = f" ({chance:.0%} chance)" if isinstance(chance, (int, float)) else ""
        step = detail.get("step")
        which = f"attempt {step + 1} of 3" if isinstance(step, int) else "attempt"
        return f"{head} {which}: the roll missed{pct}"
    text = REASON_TEXT.get(reason, reason.replace("_", " "))
    if detail.get("open_type"):
        text += f" ({detail['open_type']})"
    verb = "chain removed" if kind == "removed" else "refused"
    return f"{head} {verb}: {text}"
