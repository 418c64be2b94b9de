"""What a Stack write looks like: path, body, idempotency key, ordering pair (DESIGN §9).

Rules / theory of operation
---------------------------
* Every Stack write is built here and handed to the router as the routing event it stands for
  (:meth:`StackWrite.event`; DESIGN §10 sources ``markers`` / ``tasks`` / ``candidates``); the
  router's built-in route turns it into a pending ``stack`` delivery in the same store
  transaction as the state change that caused it.  The hot builders (:func:`task_routed`,
  :func:`candidate_event`) leave the event's payload to its body (``RoutingEvent.facts``): the
  router makes it only for an event a rule can reach.
* Contract (DESIGN §9):
  - marker: ``PUT /v1/tus/{tu}/favorites/{ru}/markers/{name}``, body ``{"value": <marker|null>}``
    (the whole marker; ``null`` clears it);
  - task event: ``POST /v1/tus/{tu}/tasks``, body ``{"event": "created"|"closed", "task": {...}}``;
  - candidate: ``POST /v1/tus/{tu}/candidates``, body ``{"ru", "type", "source", "at", "outcome",
    "task_id", "detail"}``.
  Instants in the task and candidate bodies are unix seconds (UTC) floats, like everywhere in the
  sidecar and in the reference Stack (``electron-stub/electron_stub/stack_server.py``), so the task
  history that ``startup`` serves back sorts and restores without parsing; ISO strings appear only
  inside the seeds' marker values (``nextCheckAt``), which are sent as the services built them.
  Path segments are percent-quoted.
* Idempotency keys: the seed's key extended with the marker field and the operation, so a clear
  never reuses the key of the set before it — ``followUpChat:TU:RU:<src>:<step>:set|clear``,
  ``followUpMail:TU:RU:postChat:<task>:set``; tasks ``task:<task_id>:created|closed``; candidates
  ``candidate:TU:RU:<type>:<ref>:<outcome>``.  Equal keys mean "the same write": the router keeps
  one pending ``stack`` delivery per key and Stack applies it once.
* ``pair`` = ``"tu/ru"``: every write about one dialog (markers, its tasks, its candidates) goes
  through one ordered lane, so e.g. ``closed`` never overtakes ``created``.
"""
from __future__ import annotations

import functools
from typing import Any
from urllib.parse import quote

import msgspec

from sidecar.domain.tasks import STACK_FIELDS, Task, view_struct
from sidecar.router.model import RoutingEvent
from sidecar.router.model import StackWrite as RoutedWrite


@functools.lru_cache(maxsize=16384)  # every RU of 60 TUs × 150 favorites
def seg(value: str) -> str:
    """Quote one path segment of a Stack URL (ids may hold any character).  Cached: the same
    few TU and RU ids are quoted for every write (~8 % of an event's time)."""
    return quote(str(value), safe="")


@functools.lru_cache(maxsize=1024)  # one per TU (60 in a shift)
def _tasks_path(tu: str) -> str:
    """``/v1/tus/{tu}/tasks``; cached like :func:`seg`: two Stack writes per created task name
    one of a few TUs, and an f-string around a cached call costs more than the cached path."""
    return f"/v1/tus/{seg(tu)}/tasks"


@functools.lru_cache(maxsize=1024)
def _candidates_path(tu: str) -> str:
    """``/v1/tus/{tu}/candidates`` (as :func:`_tasks_path`)."""
    return f"/v1/tus/{seg(tu)}/candidates"


_encode = msgspec.json.Encoder().encode

MARKER_NAMES = ("followUpChat", "followUpMail")
TASK_EVENTS = ("created", "closed")


class StackWrite(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """A Stack write ready to queue (plain values: not tracked by the garbage collector)."""

    pair: str  # ordering lane "tu/ru"
    idem_key: str  # Idempotency-Key
    method: str  # "PUT" | "POST"
    path: str  # request path
    body: bytes  # JSON body
    kind: str  # "marker" | "task" | "candidate"
    tu: str | None = None  # structured columns of the delivery row (the path stays the request's)
    ru: str | None = None
    marker: str | None = None  # a marker write's name

    def event(self, subject: str, action: str, payload: dict[str, Any]) -> RoutingEvent:
        """The routing event this write stands for (DESIGN §10 table: ``markers`` high,
        ``tasks`` normal, ``candidates`` low); the built-in route delivers exactly this write."""
        return _routed(self.kind, subject, action, payload, self.pair, self.idem_key,
                       self.method, self.path, self.body, self.tu, self.ru)


#: write kind -> (router source, priority) (DESIGN §10's table of the sidecar's own sources)
_SOURCES = {"marker": ("markers", "high"), "task": ("tasks", "normal"),
            "candidate": ("candidates", "low")}


def _routed(kind: str, subject: str, action: str, payload: dict[str, Any], pair: str,
            idem_key: str, method: str, path: str, body: bytes, tu: str | None,
            ru: str | None) -> RoutingEvent:
    """The routing event of a Stack write of ``kind``, built straight from the write's fields:
    the three hot builders below skip the intermediate :class:`StackWrite` (one Struct and a
    field-by-field copy per write).  Equal to ``StackWrite(...).event(...)``.
    Positional, in the Structs' field order (docs/decisions.md "Keywords vs positions")."""
    source, priority = _SOURCES[kind]
    return RoutingEvent(source, subject, action, priority, payload, None, None,
                 RoutedWrite(pair, idem_key, method, path, body, tu, ru))


#: a task write's ``task``: Task's :data:`~sidecar.domain.tasks.STACK_FIELDS` view, built
#: positionally (encoding a Struct is cheaper than building and encoding the dict of
#: :func:`task_body`, and gives the same bytes: tests/app/test_task_views.py)
_TaskBody = view_struct("_TaskBody", STACK_FIELDS, gc=False)


class _TaskEventBody(msgspec.Struct, gc=False):
    """A task write's body ``{"event", "task"}``; also its routing event's
    :attr:`~sidecar.router.model.RoutingEvent.facts` (the payload is made from it only when a
    rule can see the event)."""

    event: str
    task: Any  # a _TaskBody (a Struct made at import: no static type)

    def payload(self, event: RoutingEvent) -> dict[str, Any]:
        """The ``tasks`` event's payload (DESIGN §10), in this key order."""
        t = self.task
        return {"tu": t.tu, "ru": t.ru, "project": t.project, "task_id": t.task_id,
                "type": t.type, "source": t.source, "reason": t.reason, "vip": t.vip}


class _CandidateBody(msgspec.Struct, gc=False):
    """A candidate write's body, keys in :func:`candidate`'s order (same bytes); also its
    routing event's ``facts`` (as :class:`_TaskEventBody`)."""

    ru: str
    type: str
    source: str
    at: float
    outcome: str
    task_id: str | None
    detail: dict

    def payload(self, event: RoutingEvent) -> dict[str, Any]:
        """The ``candidates`` event's payload (DESIGN §10), in this key order; the TU is the
        write's (the body has none)."""
        assert event.write is not None  # a candidate's event always carries its write
        return {"tu": event.write.tu, "ru": self.ru, "type": self.type, "source": self.source,
                "outcome": self.outcome, "task_id": self.task_id}


#: the ``payload`` of an event whose payload is still in its ``facts`` (shared, never written:
#: :func:`sidecar.router.model.with_payload` replaces it)
_NO_PAYLOAD: dict[str, Any] = {}


def _value(v: Any) -> Any:
    """An enum member's value (``TaskType``, ``CloseReason``), any other value as is.  Reads the
    member's ``_value_`` slot: ``Enum.value`` is a descriptor that costs ~10× more on 3.11."""
    return getattr(v, "_value_", v)


def marker_event(tu: str, ru: str, name: str, value: Any, idem_key: str) -> RoutingEvent:
    """``markers`` / ``<name>`` / ``set`` | ``clear``: a marker change and its Stack write
    (:func:`marker_write`'s)."""
    if name not in MARKER_NAMES:
        raise ValueError(f"unknown marker {name!r}")
    return _routed("marker", name, "clear" if value is None else "set",
                   {"tu": tu, "ru": ru, "name": name, "value": value}, pair_of(tu, ru), idem_key,
                   "PUT", f"/v1/tus/{seg(tu)}/favorites/{seg(ru)}/markers/{seg(name)}",
                   _encode({"value": value}), tu, ru)


def task_routed(task: Task, event: str) -> RoutingEvent:
    """``tasks`` / ``task`` / ``created`` | ``closed`` with the task's Stack history write
    (:func:`task_event`'s)."""
    if event != "created":
        _check_task_event(task, event)
    type_, reason = getattr(task.type, "_value_", task.type), getattr(task.reason, "_value_", task.reason)
    tu, ru, task_id, project, source, vip = task.tu, task.ru, task.task_id, task.project, task.source, task.vip
    body = _TaskEventBody(event, _TaskBody(  # task_body(task): STACK_FIELDS, in their order
        task_id, type_, project, tu, ru, source, task.created_at, task.deadline, task.closed_at,
        reason, vip, task.meta))
    # _routed("task", ...), inlined; the payload left to the body (RoutingEvent.facts)
    return RoutingEvent("tasks", "task", event, "normal", _NO_PAYLOAD, None, None,
        RoutedWrite(f"{tu}/{ru}", f"task:{task_id}:{event}", "POST", _tasks_path(tu),
                    _encode(body), tu, ru), body)


def candidate_event(tu: str, ru: str, type: str, source: str, at: float, *, outcome: str,
                    task_id: str | None = None, detail: dict | None = None) -> RoutingEvent:
    """``candidates`` / ``<task type>`` / ``created`` | ``refused`` | ``miss`` with its Stack
    write (``outcome`` keeps the reason: ``refused:offline``)."""
    type_ = getattr(type, "_value_", type)
    body = _CandidateBody(ru, type_, source, at, outcome, task_id, detail or {})
    # _routed, inlined; the payload left to the body (RoutingEvent.facts)
    return RoutingEvent("candidates", type_, outcome.partition(":")[0], "low", _NO_PAYLOAD, None,
                        None, RoutedWrite(
            f"{tu}/{ru}", f"candidate:{tu}:{ru}:{type_}:{source}@{at:.3f}:{outcome}", "POST",
            _candidates_path(tu), _encode(body), tu, ru), body)


def pair_of(tu: str, ru: str) -> str:
    return f"{tu}/{ru}"


def marker_key(name: str, tu: str, ru: str, *parts: object, op: str = "set") -> str:
    """``name:TU:RU:<parts...>:<op>`` — the generic marker idempotency key."""
    if op not in ("set", "clear"):
        raise ValueError(f"marker op must be 'set' or 'clear', not {op!r}")
    return ":".join([name, tu, ru, *map(str, parts), op])


def followup_chat_key(tu: str, ru: str, source_task_id: str, step: int | str, op: str = "set") -> str:
    """Seed 004's ``TU+RU+sourceUnansweredTaskId+step`` + operation; ``step`` may carry a suffix
    (``"2:end"``: the record of a chain ended before its third attempt, a key never used before)."""
    return marker_key("followUpChat", tu, ru, source_task_id, step, op=op)


def followup_mail_key(tu: str, ru: str, field: str, ref: str, op: str = "set") -> str:
    """Seed 001's key: ``field`` = ``postChat`` | ``burst`` | ``read``, ``ref`` = the source task
    id or statistics event key; e.g. ``followUpMail:TU:RU:postChat:<task>:set``."""
    return marker_key("followUpMail", tu, ru, field, ref, op=op)


def marker_write(tu: str, ru: str, name: str, value: Any, idem_key: str) -> StackWrite:
    """``PUT …/markers/{name}`` with ``{"value": value}`` (``None`` = clear the marker)."""
    if name not in MARKER_NAMES:
        raise ValueError(f"unknown marker {name!r}")
    return StackWrite(
        pair=pair_of(tu, ru), idem_key=idem_key, method="PUT",
        path=f"/v1/tus/{seg(tu)}/favorites/{seg(ru)}/markers/{seg(name)}",
        body=_encode({"value": value}), kind="marker", tu=tu, ru=ru, marker=name)


def task_body(task: Task) -> dict:
    """A task as Stack stores it: its :data:`~sidecar.domain.tasks.STACK_FIELDS` (instants in
    unix seconds, enums as their values)."""
    return {name: _value(getattr(task, name)) for name in STACK_FIELDS}


def _check_task_event(task: Task, event: str) -> None:
    if event not in TASK_EVENTS:
        raise ValueError(f"task event must be one of {TASK_EVENTS}, not {event!r}")
    if event == "closed" and task.closed_at is None:
        raise ValueError(f"task {task.task_id} is open: cannot send 'closed'")


def task_event(task: Task, event: str) -> StackWrite:
    """``POST /v1/tus/{tu}/tasks`` with ``{"event": event, "task": …}``; key
    ``task:<task_id>:<event>``.  ``event`` is ``created`` or ``closed`` (a closed event needs a
    closed task)."""
    _check_task_event(task, event)
    return StackWrite(
        pair=pair_of(task.tu, task.ru), idem_key=f"task:{task.task_id}:{event}", method="POST",
        path=f"/v1/tus/{seg(task.tu)}/tasks",
        body=_encode({"event": event, "task": task_body(task)}), kind="task", tu=task.tu,
        ru=task.ru)


def candidate(tu: str, ru: str, type: str, source: str, at: float, *, outcome: str,
              ref: str | None = None, task_id: str | None = None,
              detail: dict | None = None) -> StackWrite:
    """``POST /v1/tus/{tu}/candidates``: a service's proposal and what the Task Factory did with
    it (``outcome`` = ``created`` | ``refused:<reason>`` | ``miss``).  ``ref`` names the candidate
    stably (e.g. ``<src>:<step>``; default ``<source>@<at ms>``) so a re-run step reuses its key."""
    type_ = _value(type)
    ref = ref if ref is not None else f"{source}@{at:.3f}"
    return StackWrite(
        pair=pair_of(tu, ru), idem_key=f"candidate:{tu}:{ru}:{type_}:{ref}:{outcome}",
        method="POST", path=f"/v1/tus/{seg(tu)}/candidates",
        body=_encode({"ru": ru, "type": type_, "source": source, "at": at,
                      "outcome": outcome, "task_id": task_id, "detail": detail or {}}),
        kind="candidate", tu=tu, ru=ru)
