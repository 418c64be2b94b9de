"""``favorite.followUpMail`` — value, JSON codec, idempotency keys (seed 001 "Маркери",
"Збереження"; DESIGN §8, §9).

Rules / theory of operation
---------------------------
* Value: ``{postChatSourceTaskId?, postChatDueAt?, lastBurstSourceTaskId?, lastReadEventKey?}``;
  absent fields are omitted, an empty marker is ``None`` (the Stack body ``{"value": null}``).
  ``postChatDueAt`` is ISO-8601 UTC with milliseconds, like ``followUpChat.nextCheckAt``, and
  instants are kept to the millisecond so a marker restored on another machine fires at exactly
  the instant the live one would have.
* Every change is one :class:`MarkerChange` — the **whole** new value plus the idempotency key of
  DESIGN §9: ``followUpMail:TU:RU:<field>:<ref>:<op>`` with ``field`` ``postChat`` (ref = the
  source Unanswered task id), ``burst`` (ref = the Unanswered close's task id) or ``read``
  (ref = the statistics event key and a digest of the body, :func:`set_read`).  Each (field, ref, op) happens at most once per pair (a source
  task closes once, a close is rolled once, a read event is processed once), so one key never
  carries two bodies; a clear never reuses the key of its set.
* Decoding is tolerant field by field: an unreadable field is dropped (and named in
  :attr:`Decoded.dropped`) rather than losing the readable ones; a value that is not an object
  decodes as the empty marker with ``"<value>"`` dropped.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace

from sidecar.core.clock import from_iso, to_iso
from sidecar.stack.writes import followup_mail_key

NAME = "followUpMail"
FIELDS = ("postChatSourceTaskId", "postChatDueAt", "lastBurstSourceTaskId", "lastReadEventKey")


def ms(t: float) -> float:
    """Instants kept to the millisecond (the ISO value carries milliseconds)."""
    return round(t, 3)


@dataclass(frozen=True, slots=True)
class MailMarker:
    """One pair's ``followUpMail`` marker; instants in unix seconds (UTC)."""

    post_chat_source: str | None = None  # postChatSourceTaskId
    post_chat_due_at: float | None = None  # postChatDueAt
    last_burst_source: str | None = None  # lastBurstSourceTaskId
    last_read_event_key: str | None = None  # lastReadEventKey

    @property
    def post_chat_pending(self) -> bool:
        return self.post_chat_source is not None and self.post_chat_due_at is not None

    def to_value(self) -> dict | None:
        """The JSON value sent to Stack; ``None`` when every field is absent."""
        out: dict = {}
        if self.post_chat_source is not None:
            out["postChatSourceTaskId"] = self.post_chat_source
        if self.post_chat_due_at is not None:
            out["postChatDueAt"] = to_iso(ms(self.post_chat_due_at))
        if self.last_burst_source is not None:
            out["lastBurstSourceTaskId"] = self.last_burst_source
        if self.last_read_event_key is not None:
            out["lastReadEventKey"] = self.last_read_event_key
        return out or None


@dataclass(frozen=True, slots=True)
class Decoded:
    marker: MailMarker
    dropped: tuple[str, ...] = ()  # fields that were present but unreadable


def decode(value: object) -> Decoded:
    """A stored value (Stack startup data, local row, outbox body) → :class:`Decoded`."""
    if value is None:
        return Decoded(MailMarker())
    if not isinstance(value, dict):
        return Decoded(MailMarker(), ("<value>",))
    dropped: list[str] = []

    def text(name: str) -> str | None:
        v = value.get(name)
        if v is None:
            return None
        if isinstance(v, str) and v:
            return v
        dropped.append(name)
        return None

    due: float | None = None
    raw_due = value.get("postChatDueAt")
    if raw_due is not None:
        try:
            if isinstance(raw_due, str):
                due = ms(from_iso(raw_due))
            elif isinstance(raw_due, (int, float)) and not isinstance(raw_due, bool):
                due = ms(float(raw_due))
            else:
                raise ValueError(raw_due)
        except ValueError:
            dropped.append("postChatDueAt")
    source = text("postChatSourceTaskId")
    if (source is None) != (due is None):  # half a timer is no timer
        if source is not None:
            dropped.append("postChatSourceTaskId")
        elif "postChatDueAt" not in dropped:
            dropped.append("postChatDueAt")
        source = due = None
    return Decoded(MailMarker(source, due, text("lastBurstSourceTaskId"), text("lastReadEventKey")),
                   tuple(dropped))


@dataclass(frozen=True, slots=True)
class MarkerChange:
    """A marker write the runtime applies locally and queues for Stack in one transaction."""

    ru: str
    value: dict | None  # the whole new marker (None = cleared)
    key: str  # Idempotency-Key (DESIGN §9)
    reason: str = field(default="")  # for the log: "post_chat_set", "read_processed", ...


def _change(tu: str, ru: str, new: MailMarker, fld: str, ref: str, op: str, reason: str) -> MarkerChange:
    return MarkerChange(ru, new.to_value(), followup_mail_key(tu, ru, fld, ref, op), reason)


def set_post_chat(tu: str, ru: str, m: MailMarker, source: str, due_at: float) -> tuple[MailMarker, MarkerChange]:
    """Seed 001: the close of Unanswered ``source`` creates or replaces the timer."""
    new = replace(m, post_chat_source=source, post_chat_due_at=ms(due_at))
    return new, _change(tu, ru, new, "postChat", source, "set", "post_chat_set")


def clear_post_chat(tu: str, ru: str, m: MailMarker, reason: str) -> tuple[MailMarker, MarkerChange | None]:
    """Drop the timer (new Unanswered, TU mailed, attempted); None when none is pending."""
    if m.post_chat_source is None:
        return m, None
    new = replace(m, post_chat_source=None, post_chat_due_at=None)
    return new, _change(tu, ru, new, "postChat", m.post_chat_source, "clear", reason)


def set_burst(tu: str, ru: str, m: MailMarker, close_task_id: str) -> tuple[MailMarker, MarkerChange | None]:
    """Record the Unanswered close ``close_task_id`` as rolled (never re-rolled)."""
    if m.last_burst_source == close_task_id:
        return m, None
    new = replace(m, last_burst_source=close_task_id)
    return new, _change(tu, ru, new, "burst", close_task_id, "set", "burst_processed")


def body_digest(value: dict | None) -> str:
    """12 hex digits of the canonical JSON of a marker value (sorted keys, no spaces)."""
    raw = json.dumps(value, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.blake2b(raw, digest_size=6).hexdigest()


def set_read(tu: str, ru: str, m: MailMarker, event_key: str) -> tuple[MailMarker, MarkerChange | None]:
    """Record the statistics event ``event_key`` as processed.

    Unlike a source task, a statistics event key can come back after another one (a statistics
    snapshot re-sent after a reconnect: ``rd-0``, ``rd-1``, then ``rd-0`` again is "new" by seed
    001's rule ``key ≠ lastReadEventKey``), and the marker then carries other post-chat fields:
    the key is ``read:<eventKey>~<digest of the body>:set`` so one key never names two bodies,
    while a retry of the same write keeps its key.  The service also refuses an event key it has
    already processed in this run (``PairState.processed_reads``)."""
    if m.last_read_event_key == event_key:
        return m, None
    new = replace(m, last_read_event_key=event_key)
    ref = f"{event_key}~{body_digest(new.to_value())}"
    return new, _change(tu, ru, new, "read", ref, "set", "read_processed")
