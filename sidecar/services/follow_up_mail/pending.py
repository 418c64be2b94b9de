"""Durable pending burst / read triggers: a check a crash interrupted is made once after the
restart (seed 001 "Ініціалізація": task history and the marker restore the burst/read events;
"Збереження": a restart restores from Stack, task history **and the unsent local changes**).

Rules / theory of operation
---------------------------
* A burst close or a read statistics event exists only at its instant: nothing re-derives it
  after a crash (a post-chat timer is the marker; the 6 h source has no state and the next RU
  Online pass re-derives it; a notification is a moment's offer).  So when the service offers
  a burst or read trigger, :meth:`PendingTriggers.write` puts a service-state row (scope
  :data:`SCOPE`, key ``[source, ru, ref]`` as JSON, value ``{ru, source, ref, at}``) into **the
  same step**; :meth:`PendingTriggers.settle` deletes it in the step that settles the check —
  any outcome, an API error included (seed 001 says only that the marker must not move then).
* At login :meth:`PendingTriggers.restore` turns the rows into triggers again with their
  original instant (so "the TU has not mailed since the event" is judged from the event); a
  row whose event the marker already shows processed (``lastBurstSourceTaskId`` /
  ``lastReadEventKey``), that does not decode, or whose RU is no longer a favorite is deleted.
  The burst roll is keyed by the close: the restored check makes the roll the dead process
  would have made, never a second one.
* A logout ends the service's runtime state (seed 001: "Runtime-стан причин живе в пам'яті"):
  :meth:`PendingTriggers.end` deletes the rows.  A fresh machine has none.
"""
from __future__ import annotations

import logging
from typing import Any

import msgspec

from sidecar.services.base import Step
from sidecar.services.follow_up_mail import marker as mk
from sidecar.services.follow_up_mail import sources as src

log = logging.getLogger("sidecar.follow_up_mail")

SCOPE = "follow_up_mail"  # service-state scope
DURABLE = (src.BURST, src.MAIL_READ)  # the event triggers nothing else re-derives after a crash


def key_of(ru: str, source: str, ref: str) -> str:
    """The state key of a pending trigger (JSON: unambiguous whatever the ids hold)."""
    return msgspec.json.encode([source, ru, ref]).decode()


class PendingTriggers:
    """The rows of one TU; ``rt`` is its :class:`~sidecar.runtime.tu.TuRuntime`."""

    def __init__(self, rt: Any) -> None:
        self.rt = rt
        self.keys: set[str] = set()  # rows written (or restored) and not yet settled

    def write(self, step: Step, ru: str, trigger: src.Trigger) -> None:
        """``trigger`` was just offered: make it durable in ``step`` (burst / read only)."""
        if trigger.source not in DURABLE:
            return
        key = key_of(ru, trigger.source, trigger.ref)
        if key not in self.keys:
            self.keys.add(key)
            self.rt.put_state(step, SCOPE, key, {"ru": ru, "source": trigger.source,
                                                 "ref": trigger.ref, "at": trigger.at})

    def settle(self, step: Step, ru: str, source: str, ref: str) -> None:
        """The check of (``source``, ``ref``) for ``ru`` is decided in ``step``: delete its row."""
        key = key_of(ru, source, ref)
        if key in self.keys:
            self.keys.discard(key)
            self.rt.delete_state(step, SCOPE, key)

    def restore(self, step: Step, markers: dict[str, mk.MailMarker]) -> dict[str, list[src.Trigger]]:
        """The unsettled triggers a crash left, per favorite RU (``markers``: its marker now)."""
        out: dict[str, list[src.Trigger]] = {}
        for key, row in sorted(self.rt.local_state.get(SCOPE, {}).items()):
            decoded = _decode(row)
            if decoded is None:
                log.warning("%s: unreadable pending follow-up mail trigger %r dropped", self.rt.tu, key)
                self.rt.delete_state(step, SCOPE, key)
                continue
            ru, trigger = decoded
            m = markers.get(ru)
            if m is None or _processed(m, trigger):  # no longer a favorite / already checked
                self.rt.delete_state(step, SCOPE, key)
                continue
            self.keys.add(key)
            out.setdefault(ru, []).append(trigger)
        return out

    def end(self, step: Step) -> None:
        """Logout: the rows end with the session's runtime state."""
        for key in sorted(self.keys):
            self.rt.delete_state(step, SCOPE, key)
        self.keys.clear()


def _decode(row: Any) -> tuple[str, src.Trigger] | None:
    if not isinstance(row, dict):
        return None
    ru, source, ref, at = row.get("ru"), row.get("source"), row.get("ref"), row.get("at")
    if (not isinstance(ru, str) or source not in DURABLE or not isinstance(ref, str)
            or not isinstance(at, (int, float)) or isinstance(at, bool)):
        return None
    return ru, src.Trigger(str(source), ref, float(at))


def _processed(m: mk.MailMarker, t: src.Trigger) -> bool:
    """The marker shows the event checked (the check committed in the step that deleted the row,
    so this holds only for a row written by an older build or by hand — cheap to honour)."""
    return ((t.source == src.BURST and m.last_burst_source == t.ref)
            or (t.source == src.MAIL_READ and m.last_read_event_key == t.ref))
