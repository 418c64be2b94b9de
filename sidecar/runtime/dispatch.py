"""Dispatch one domain event of a TU (DESIGN §5): the core reactions every service relies on,
then every service's ``on_event``.

Rule 1.  Core reactions, in this order: an RU's own activity (chat, like, mail, notification) marks
         it online (DESIGN §2); the TU's chat / mail answer closes the pair's tasks answered on that
         channel (Task Factory); a block event updates the pair's attributes (which closes its open
         tasks).
Rule 2.  Then the services hear the event, in their dispatch order.
Rule 3.  An RU that came online by its own activity is announced (``on_online``) only *after* the
         services handled the activity itself, so an RU's own message is answered (and wipes a
         chain) before any online-triggered reminder could fire for it.
Rule 4.  Its own module so that the path of an event is a straight line: engine (or a pass's decoded
         rows) → here → a service → the TU runtime / Task Factory, never back into a caller's file.
"""
from __future__ import annotations

from sidecar.domain import events as ev
from sidecar.domain.tasks import Channel
from sidecar.runtime.step import Step
from sidecar.runtime.tu import TuRuntime


def dispatch(step: Step, rt: TuRuntime, event: ev.DomainEvent) -> None:
    """Apply ``event`` to ``rt`` and hand it to every service (see the module rules)."""
    came = False
    match event:
        case ev.ChatIn() | ev.LikeIn() | ev.MailIn() | ev.Notification():
            came = rt.mark_online(event.ru)
        case ev.ChatOut():
            rt.factory.close_channel(step, rt, event.ru, Channel.CHAT)
        case ev.MailOut():
            rt.factory.close_channel(step, rt, event.ru, Channel.MAIL)
        case ev.BlockChanged():
            key = "blocked_by_tu" if event.by == "tu" else "blocked_by_ru"
            rt.update_favorite(step, event.ru, {key: event.blocked})
    rt.services.event(step, event)
    if came:
        rt.came_online(step, event.ru)
