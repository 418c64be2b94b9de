"""Mail-history reads for Follow-up mail, per project (seed 001 "Запити"; seed 003 "Follow-up
mail" table; DESIGN §8).

Requests (``platform.request.method`` → raw answer; times unix seconds):

* Golden: ``get_mail {"ru"}`` → :class:`RawMails` — one read, no limit check (Golden has none).
* Chathouse: ``inmails_chain {"ru"}`` (``getInmailsChain``) → :class:`RawMails` — one read; the
  mail limit comes from the dialog snapshot the online scroll already carried.
* Prime: ``chat_restriction {"ru"}`` (``POST /platform/chat/restriction``) →
  ``{"chatLimit","mailLimit"}`` for the live limit, and ``correspondence_get {"ru"}`` +
  ``emails_history {"ru"}`` → :class:`RawMails` each (the pair's letters may sit in either; the
  union by id is the history).

All the requests of one read are made together for one pair and their answers decoded together
(:func:`decode`): one bad answer fails the whole read (``BadAnswer``; the service treats it as an
API error and moves no marker); a single letter row that does not match :class:`RawLetter` is
skipped and logged, like a bad dialog row.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Literal

import msgspec

from platform_clients.base import BadAnswer, RawId, Timestamp, list_field
from platform_clients.prime import PrimeClient

log = logging.getLogger("platform_clients.mail")


@dataclass(frozen=True, slots=True)
class Letter:
    """One platform letter of the pair; ``side`` ``tu`` | ``ru``; ``at`` unix s."""

    id: str
    side: str
    at: float


@dataclass(frozen=True, slots=True)
class MailHistory:
    """The pair's letters as one read returned them (decoded by :func:`decode`), and
    the live mail limit when the read carried one (Prime ``chat_restriction``)."""

    letters: tuple[Letter, ...] = ()
    mail_limit: int | None = None

    @property
    def last_tu_at(self) -> float | None:
        ats = [x.at for x in self.letters if x.side == "tu"]
        return max(ats) if ats else None

    def tu_mailed_after(self, t: float) -> bool:
        return any(x.side == "tu" and x.at > t for x in self.letters)



class RawLetter(msgspec.Struct, rename={"from_": "from"}):
    """One letter of the pair: ``from`` ``tu`` | ``ru``."""

    id: RawId
    from_: Literal["tu", "ru"]
    at: Timestamp


class RawMails(msgspec.Struct):
    mails: list[RawLetter] = []


HISTORY_METHODS: dict[str, tuple[str, ...]] = {
    "golden": ("get_mail",),
    "chathouse": ("inmails_chain",),
    "prime": ("chat_restriction", "correspondence_get", "emails_history"),
}


def requests(project: str, ru: str) -> list[tuple[str, dict]]:
    """The ``(method, params)`` of one mail-history read of pair ``ru``; KeyError on an unknown
    project."""
    return [(m, {"ru": ru}) for m in HISTORY_METHODS[project]]


def _letters(project: str, method: str, result: Any) -> list[Letter]:
    out = []
    for i, row in enumerate(list_field(result, "mails", f"{project} {method}")):
        try:
            r = msgspec.convert(row, RawLetter)
        except msgspec.ValidationError as exc:
            log.warning("%s %s: skipping letter %d: %s", project, method, i, exc)
            continue
        out.append(Letter(r.id, r.from_, float(r.at)))
    return out


def decode(project: str, answers: dict[str, Any]) -> MailHistory:
    """``{method: raw answer}`` of one read → :class:`MailHistory`.  Raises BadAnswer when an
    answer is missing or unusable as a whole."""
    letters: dict[str, Letter] = {}
    limit: int | None = None
    for method in HISTORY_METHODS[project]:
        if method not in answers:
            raise BadAnswer(f"{project}: mail history lacks the {method!r} answer")
        result = answers[method]
        if method == "chat_restriction":
            limit = PrimeClient.decode_restriction(result).mailLimit
            continue
        for x in _letters(project, method, result):
            letters.setdefault(x.id, x)
    return MailHistory(tuple(sorted(letters.values(), key=lambda x: (x.at, x.id))), limit)
