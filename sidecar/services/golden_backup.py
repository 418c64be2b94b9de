"""Golden's backed-up messages: an RU message that reached no socket is not lost (DESIGN §12.7,
§6).

Source: seed 003, "Unanswered message", Golden column, row «При перегляді активних фаворитів
онлайн»: «генерація Follow-up підстрахує» (when the online active favorites are looked through,
Follow-up generation backs it up).  Golden has no unanswered column («Колонка Unanswered з API ❌»),
so a message the RU sent while the TU was logged out, during a socket gap or an app restart would
otherwise never become a task.  A decision (DESIGN §12.7), the seed being elliptical: a Follow-up
cannot back it up itself (seed 004's over-60-min check needs «останньою писала TU», a chain needs a
closed Unanswered), so the pass raises an **Unanswered message**.

Rule 1.  **No extra reads.**  Only where the follow-up logic reads a favorite's ``chat_history``
         anyway — the pair appearing in RU Online, a due chain step or the over-60-min check
         (:meth:`~sidecar.services.follow_up_message.FollowUpMessageService.on_result`, one read per
         pair per occasion) — is the same answer looked at here (:func:`uncovered`).
Rule 2.  The history's **last item** (latest ``at``; items without a numeric ``at`` or a ``from`` of
         ru/tu skipped, as :func:`~sidecar.services.follow_up_checks.parse_history` does) must be an
         RU chat **message**: a 🌹 (``kind`` like/rose, or text 🌹 — seed 003 "Golden — текст 🌹")
         raises nothing here (Likes have their own rules), nor does a TU message (the RU was
         answered).
Rule 3.  The message (unix seconds ``at``) is **covered** — nothing raised — by an Unanswered
         message task of the pair that did not close with ``logout`` and was created at or after it,
         or was open when it came (an RU writing three messages in a row is one task, DESIGN §6: its
         dismissal covers all three).  So a dismissal sticks, and a task a logout closed (never
         acted on, seed 003 «таск можна створити, не закрити і вийти») comes back.  The pair's task
         history is Stack's startup rows plus the local ones, kept current by the runtime
         (:attr:`~sidecar.runtime.tu.TuRuntime.history`).
Rule 4.  Uncovered: a decision-log row ``found`` (type ``unanswered_message``, source
         ``follow_up_pass``, ``detail.message_at``) says why, then the candidate goes to the Task
         Factory with source ``follow_up_pass`` and its deadline from now, the discovery (DESIGN §6:
         «except a message found late by Golden's backup read, whose deadline counts from its
         discovery»); the factory's own ``created`` / ``refused:<reason>`` row follows.  The new
         Unanswered message wipes the pair's chain like any other (seed 003 scenario 1).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from platform_clients.base import list_field
from sidecar.domain.tasks import CloseReason, TaskType
from sidecar.runtime.decisions import record_outcome
from sidecar.runtime.factory import Candidate

if TYPE_CHECKING:  # pragma: no cover
    from sidecar.domain.tasks import HistoryRow
    from sidecar.runtime.tu import TuRuntime
    from sidecar.services.base import Step

SOURCE = "follow_up_pass"
EPS = 1e-6  # seconds: a task made for the message at the message's own instant covers it
_LOGOUT = CloseReason.LOGOUT.value
_UNANSWERED = TaskType.UNANSWERED_MESSAGE.value


def last_ru_messages(rt: TuRuntime, result: Any, asked: set[str]) -> dict[str, float]:
    """A Golden ``chat_history`` answer (``{"dialogs": [{"ru", "messages": [{"id", "from", "at",
    "kind", "text"?}]}]}``) → ``{ru: at}`` for each asked RU whose last item is an RU chat message
    (not a like).  BadAnswer when the answer is unusable as a whole (the caller decoded it already)."""
    out: dict[str, float] = {}
    for dialog in list_field(result, "dialogs", rt.project):
        if not isinstance(dialog, dict) or dialog.get("ru") not in asked:
            continue
        msgs = [m for m in dialog.get("messages") or () if isinstance(m, dict)
                and isinstance(m.get("at"), (int, float)) and not isinstance(m.get("at"), bool)
                and m.get("from") in ("ru", "tu")]
        if not msgs:
            continue
        last = max(msgs, key=lambda m: m["at"])
        kind = rt.client.message_kind(last.get("kind"), last.get("text"))
        if last["from"] == "ru" and kind in (None, "message"):
            out[dialog["ru"]] = float(last["at"])
    return out


def covered(rows: list[HistoryRow], at: float) -> bool:
    """Is the RU message of ``at`` (unix s) covered by one of the pair's task history ``rows``?"""
    for r in rows:
        if r.type != _UNANSWERED or r.reason == _LOGOUT:
            continue
        if r.created_at >= at - EPS:
            return True  # created at or after it
        if r.closed_at is None or r.closed_at >= at - EPS:
            return True  # open when it came: the same burst's task
    return False


def back_up(step: Step, rt: TuRuntime, ru: str, at: float) -> None:
    """Raise the Unanswered message for ``ru``'s uncovered last message of ``at`` (module rules)."""
    if covered(rt.history.get(ru, []), at):
        return
    record_outcome(step, rt, ru, TaskType.UNANSWERED_MESSAGE, SOURCE, "found",
                   detail={"message_at": at})
    rt.propose(step, Candidate(TaskType.UNANSWERED_MESSAGE, ru, SOURCE, None, {"message_at": at}))
