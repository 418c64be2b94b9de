"""What a delivery sends: sandboxed Jinja2 templates and the per-channel message (DESIGN §10;
seed 002 "Шаблон обязан быть устойчив к отсутствию полей payload").

Rules / theory of operation
---------------------------
* Templates are Jinja2 in :class:`~.sandbox.BoundedSandbox` — Jinja's immutable sandbox (no
  attribute tricks, no mutation of the context) whose renders cost bounded work: loop steps,
  value sizes and output are counted and capped (:mod:`.sandbox`) — over ``payload``,
  ``source``, ``subject``, ``action``, ``priority``.  Undefined values are :class:`~jinja2.ChainableUndefined`: ``{{ payload.a.b }}``
  of a missing ``a`` renders empty and never raises — a missing field never fails a delivery.
* A template that does not compile, or fails while rendering for any other reason (a sandbox
  violation, a type error, a bound of the sandbox: "template too costly: …"), raises
  :class:`TemplateFailure`; the router records that delivery as ``failed`` at once (a terminal
  outcome, DESIGN §10: it does not count against the sender).  A *missing* field never does.
* Rendered text is capped at :data:`MAX_TEXT` characters (Telegram's ``sendMessage`` limit is
  4096): the render stops there and the text ends with ``…`` — the alert still goes out, and the
  reader sees it was cut.
* Messages (the exact bytes a channel sends, stored in the delivery row):
  - ``telegram``: the rendered text, or a default line ``"[priority] source/subject action"``
    followed by the payload as JSON when the action has no template;
  - ``webhook`` / ``journal``: the event as JSON ``{"type": "source.subject.action",
    "timestamp", "data": {source, subject, action, priority, payload, dedup_key, event_id},
    "message"?}`` (Standard Webhooks' recommended payload shape); ``message`` is the rendered
    template when the action has one;
  - ``stack``: the Stack write's own body.
"""
from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

import msgspec

from sidecar.core.clock import to_iso

from .budget import EventWork
from .model import RoutingEvent

if TYPE_CHECKING:
    import jinja2

    from .sandbox import BoundedSandbox, RenderBudget

MAX_TEXT = 4096
_encode = msgspec.json.Encoder(order="sorted").encode


class TemplateFailure(Exception):
    """A template could not be compiled or rendered (terminal for the delivery)."""


@functools.cache
def _env() -> BoundedSandbox:
    """The one sandbox, made on the first template: Jinja (and the sandbox on it) is imported
    only by a sidecar that has a template to compile — most never do, and a start without it is
    ~50 ms of CPU shorter (issue 11: the suite launches hundreds).  The frozen build finds both
    through packaging/sidecar.spec's hidden imports."""
    import jinja2

    from .sandbox import BoundedSandbox
    return BoundedSandbox(undefined=jinja2.ChainableUndefined, autoescape=False,
                          keep_trailing_newline=False)


def compile_template(source: str) -> jinja2.Template:
    """The sandboxed template of ``source`` (cached); raises :class:`TemplateFailure` if it does
    not compile (``rules.create/patch`` check it up front)."""
    return _compile(source)


@functools.lru_cache(maxsize=256)
def _compile(source: str) -> jinja2.Template:
    env = _env()
    import jinja2  # loaded by _env()
    try:
        return env.from_string(source)
    except jinja2.TemplateError as exc:
        raise TemplateFailure(f"template does not compile: {exc}") from None


def context(event: RoutingEvent) -> dict[str, Any]:
    return {"payload": event.payload, "source": event.source, "subject": event.subject,
            "action": event.action, "priority": event.priority}


def render(template: str, event: RoutingEvent, steps: RenderBudget | None = None,
           pool: EventWork | None = None) -> str:
    """Render ``template`` for ``event``; missing fields are empty; at most :data:`MAX_TEXT`
    characters (cut with ``…``).  Raises :class:`TemplateFailure`.  ``steps``: the sandbox's
    step counter (tests read the work a render did).  ``pool``: the work left to the event's
    renders together (:class:`~.budget.EventWork`), charged with this render's work."""
    from .sandbox import RenderBudget, TemplateTooCostly, bounded_render  # loaded by _compile's _env()

    tpl = _compile(template)
    if steps is None:
        steps = RenderBudget.drawing_on(pool) if pool is not None else RenderBudget()
    try:
        text, cut = bounded_render(tpl, context(event), MAX_TEXT, steps)
    except TemplateTooCostly as exc:
        raise TemplateFailure(str(exc)) from None
    except Exception as exc:  # noqa: BLE001 - any failure of a user's template is the template's
        raise TemplateFailure(f"template failed: {type(exc).__name__}: {exc}") from None
    finally:
        if pool is not None:
            pool.left -= steps.work
    return text[:MAX_TEXT - 1] + "…" if cut else text


def default_text(event: RoutingEvent) -> str:
    text = f"[{event.priority}] {event.source}/{event.subject} {event.action}"
    if event.payload:
        text += " " + _encode(event.payload).decode()
    return text[:MAX_TEXT]


def event_json(event: RoutingEvent, event_id: str, at: float, message: str | None) -> bytes:
    """The webhook / journal body (see module rules)."""
    body: dict[str, Any] = {
        "type": f"{event.source}.{event.subject}.{event.action}",
        "timestamp": to_iso(at),
        "data": {"event_id": event_id, "source": event.source, "subject": event.subject,
                 "action": event.action, "priority": event.priority, "payload": event.payload,
                 "dedup_key": event.dedup_key},
    }
    if message is not None:
        body["message"] = message
    return _encode(body)


def message_for(channel: str, event: RoutingEvent, event_id: str, at: float, template: str | None,
                pool: EventWork | None = None) -> bytes:
    """The bytes a delivery of ``event`` on ``channel`` sends (``pool``: see :func:`render`).
    Raises :class:`TemplateFailure`."""
    if channel == "stack":
        if event.write is None:
            raise ValueError("a stack delivery needs the event's Stack write")
        return event.write.body
    text = None if template is None else render(template, event, pool=pool)
    if channel == "telegram":
        return (text if text is not None else default_text(event)).encode()
    return event_json(event, event_id, at, text)
