"""What every platform client provides (DESIGN §5 ``platform_clients/``).

A client is pure: it turns a raw socket event ``(name, data)`` or a poll result into domain events
(:mod:`sidecar.domain.events`) and declares the poll passes the RU Online / check-chat services run
through ``platform.request``.  It does no I/O: Electron owns the platforms' sessions.

Raw shapes are msgspec Structs in each project's module; the harness (``electron-stub``) encodes
exactly those, so the contract lives in one place per platform.  All raw times are unix seconds.
"""
from __future__ import annotations

import functools
import logging
import operator
import re
from typing import Annotated, Any, Callable, ClassVar, Optional

import msgspec

from sidecar.domain.errors import InputError, IOFailure
from sidecar.domain.events import DialogSnapshot, DomainEvent
from sidecar.domain.favorites import Favorite
from sidecar.protocol.fields import field_of
from sidecar.protocol.patterns import NO_CONTROL_OR_EMPTY

log = logging.getLogger("platform_clients")


class BadAnswer(IOFailure, ValueError):
    """A platform answer (poll result) whose overall shape is unusable: the pass counts as failed.
    Single bad rows inside a usable answer are skipped and logged instead."""


class UnknownRawEvent(InputError, ValueError):
    """The raw event name is not one this platform sends (reported, never fatal)."""


class BadRawEvent(InputError, ValueError):
    """The raw event's data does not match its declared shape."""


class Pass(msgspec.Struct, frozen=True):
    """A poll the sidecar asks Electron to make (seed 003 "Зведення проходів").

    Every pass runs at login.  ``period_s`` None: no period (login, and the socket reconnect when
    ``on_reconnect``).  ``on_reconnect`` False: a platform socket reconnect does not run it —
    Prime "check mail" (seed 003: "сокет є → перевірка тільки при логіні") and the stateful
    criteria-``active`` scroll, which keeps its own cadence."""

    name: str  # our name for the pass, used in timers, logs and platform.poll frames
    method: str  # platform.request method Electron calls
    params: dict
    period_s: float | None
    purpose: str  # online | check_chat | check_mail | open_limits | likes
    on_reconnect: bool = True


# Raw platform values are checked where they enter (found by the breaker): an e-mail
# with a huge ``receivedAt`` made a task that never ended, and ids with NUL or newlines reached
# the logs raw.  A timestamp is unix seconds between 2000-01-01 and 2100-01-01 (milliseconds
# fail loudly instead of meaning the year 57000); an id has no control characters.
MIN_TS = 946684800.0  # 2000-01-01T00:00:00Z
MAX_TS = 4102444800.0  # 2100-01-01T00:00:00Z
Timestamp = Annotated[float, msgspec.Meta(ge=MIN_TS, le=MAX_TS,
                                          description="unix seconds, 2000-01-01 … 2100-01-01")]
RawId = Annotated[str, msgspec.Meta(max_length=256, pattern=NO_CONTROL_OR_EMPTY,
                                    description="an id: no control characters")]


class RawDialog(msgspec.Struct, kw_only=True):
    """A dialog row of a Chathouse/Prime list (tab/criteria scroll).  ``dialogId`` null: the dialog
    is not created yet.  ``lastMessage.from`` is ``ru`` | ``tu`` | ``system``."""

    userId: RawId
    dialogId: RawId | None = None
    isOnline: bool = False
    lastMessage: dict | None = None  # {"from", "at", "type", "body"}; "at" checked as Timestamp
    lastTuMessageAt: Timestamp | None = None
    chatLimit: int | None = None
    mailLimit: int | None = None
    blockedByMe: bool = False
    blockedByUser: bool = False
    mutualLike: bool = False
    unansweredMailAt: Timestamp | None = None  # the RU's last unanswered letter, if any
    spend30dUsd: float | None = None  # the RU's global spend over 30 days, when the list shows it


class RawDialogPage(msgspec.Struct):
    dialogs: list[RawDialog] = []
    next_cursor: int | None = None


def snapshot_of(row: RawDialog, last_kind: str | None = None) -> DialogSnapshot:
    """Normalise a list row (Chathouse and Prime share the row shape).  ``last_kind``: the last
    message's kind as the platform's client reads it (:meth:`PlatformClient.message_kind`);
    default the row's own ``type``."""
    lm = row.lastMessage or {}
    last_at = msgspec.convert(lm.get("at"), Optional[Timestamp])  # ValidationError: row skipped
    return DialogSnapshot(
        ru=row.userId, online=row.isOnline, last_from=lm.get("from"), last_at=last_at,
        last_kind=last_kind or lm.get("type"), last_tu_at=row.lastTuMessageAt,
        spend_30d_usd=row.spend30dUsd, chat_limit=row.chatLimit,
        mail_limit=row.mailLimit, blocked_by_tu=row.blockedByMe, blocked_by_ru=row.blockedByUser,
        dialog_id=row.dialogId, mutual_like=row.mutualLike, unanswered_mail_at=row.unansweredMailAt)


class PlatformClient:
    """Interface of one project's client.  Subclasses fill the class attributes."""

    project: ClassVar[str]
    has_limits: ClassVar[bool]  # Golden has no limits at all (seed 003 Open Limits)
    like_kinds: ClassVar[frozenset[str]]
    passes: ClassVar[tuple[Pass, ...]]
    has_read_stats: ClassVar[bool]  # Prime has no read statistics (DESIGN §12.1)
    decoders: ClassVar[dict[str, Callable[[str, Any], list[DomainEvent]]]]

    @classmethod
    def decode_event(cls, tu: str, name: str, data: Any) -> list[DomainEvent]:
        """Raw socket event → domain events.  Raises UnknownRawEvent / BadRawEvent."""
        fn = cls.decoders.get(name)
        if fn is None:
            raise UnknownRawEvent(f"{cls.project}: unknown socket event {name!r}", field="name")
        try:
            return fn(tu, data)
        except (BadRawEvent, msgspec.DecodeError, TypeError, KeyError) as exc:  # ValidationError too
            raise BadRawEvent(f"{cls.project} {name}: {exc}", field=raw_pointer(str(exc))) from exc

    @classmethod
    def message_kind(cls, type_: str | None, body: str | None) -> str | None:
        """``"like"`` when a chat item of this ``type_`` and ``body`` is a Like on this platform
        (seed 003 "Like": Golden text 🌹, Chathouse by body, Prime like types), else ``type_``.
        The one rule for socket events and column rows alike."""
        if type_ == "like" or type_ in cls.like_kinds:
            return "like"
        return type_

    @classmethod
    def pass_named(cls, name: str) -> Pass:
        for p in cls.passes:
            if p.name == name:
                return p
        raise KeyError(name)

    @staticmethod
    def is_freeloader(fav: Favorite) -> bool:  # pragma: no cover - interface
        raise NotImplementedError

    @classmethod
    def decode_unanswered_mail(cls, result: Any) -> list[Any]:
        """A ``check_mail`` pass answer → the RU's unanswered letters (Prime, seed 003); a project
        without that pass raises BadAnswer."""
        raise BadAnswer(f"{cls.project}: no check-mail pass")

    @classmethod
    def decode_restriction(cls, result: Any) -> Any:
        """A live-limits answer (``chat_restriction``) → the limits; a project without limits
        (Golden) raises BadAnswer."""
        raise BadAnswer(f"{cls.project}: no limits")

    @classmethod
    def decode_online(cls, result: Any) -> tuple[set[str], list[DialogSnapshot]]:
        """Online pass result → (online RU ids, dialog snapshots if the pass carries them).
        Raises BadAnswer when the answer is unusable as a whole."""
        snaps, _ = cls.decode_dialogs(result)
        return {s.ru for s in snaps if s.online}, snaps

    @classmethod
    def decode_dialogs(cls, result: Any) -> tuple[list[DialogSnapshot], int | None]:
        """A ``RawDialogPage`` → (snapshots, next cursor).  Rows that do not match
        :class:`RawDialog` are skipped and logged (one broken row must not cost the others their
        tasks); an answer that is not a page at all raises BadAnswer."""
        rows = list_field(result, "dialogs", cls.project)
        snaps = []
        for i, row in enumerate(rows):
            try:
                raw = msgspec.convert(row, RawDialog)
                lm = raw.lastMessage or {}
                kind = cls.message_kind(lm.get("type"), lm.get("body"))
                snaps.append(snapshot_of(raw, kind))
            except msgspec.ValidationError as exc:
                log.warning("%s: skipping dialog row %d: %s", cls.project, i, exc)
        cursor = result.get("next_cursor")
        return snaps, cursor if isinstance(cursor, int) and not isinstance(cursor, bool) else None


_INDEX = re.compile(r"\[(\d+)\]")


def raw_pointer(message: str) -> str:
    """The JSON pointer (into ``platform.event``'s params) of the raw value a msgspec error
    ``message`` names — ``/data/sentAt``, ``/data/lastMessage/at`` — or ``/data`` (the data as a
    whole).  A pointer, not the dotted path other refusals give: the platform's keys may hold
    dots (DESIGN §4)."""
    path = field_of(message)
    if not path:
        return "/data"
    return "/data/" + _INDEX.sub(r".\1", path).replace(".", "/").lstrip("/")


def list_field(result: Any, name: str, project: str) -> list:
    """``result[name]`` when ``result`` is an object holding a list there (absent = empty)."""
    if not isinstance(result, dict):
        raise BadAnswer(f"{project}: answer is {type(result).__name__}, not an object")
    rows = result.get(name, [])
    if not isinstance(rows, list):
        raise BadAnswer(f"{project}: {name!r} is {type(rows).__name__}, not a list")
    return rows


def convert(data: Any, typ: type):
    """``data`` as ``typ``, BadRawEvent when it does not match or is not JSON text.  Undecoded JSON
    (:class:`msgspec.Raw`, what the bridge hands the sidecar) is decoded once, straight into
    ``typ`` with its one decoder; a Python value (tests, a poll row) is converted."""
    try:
        if isinstance(data, msgspec.Raw):
            return _decoder(typ).decode(data)
        return msgspec.convert(data, typ)
    except msgspec.ValidationError as exc:
        raise BadRawEvent(str(exc)) from exc
    except (msgspec.DecodeError, RecursionError) as exc:
        # Undecoded JSON the envelope's decoder passed through unread: invalid UTF-8 inside a
        # string (a binary frame may carry it), or nesting past the decoder's depth.  A refusal
        # of the data as a whole, never a failed step (that would stop the sidecar).
        raise BadRawEvent(f"data is not valid JSON text ({exc})") from exc


# RawId's pattern as one search for "any control character": msgspec runs a pattern through
# Python's ``re`` for every constrained string (~1 µs each, most of a dict convert's cost).
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
UncheckedId = Annotated[str, msgspec.Meta(max_length=256)]  # RawId without its pattern


def unchecked_twin(typ: type) -> tuple[type, Callable[[Any], tuple[str, ...]]]:
    """``typ``'s twin for :func:`convert_ids` — the same fields, order, defaults and wire names
    with :data:`UncheckedId` for each :data:`RawId` — and a getter of those ids.  Derived, not
    written out, so the twin cannot drift from ``typ``."""
    fields: list[Any] = []
    renames: dict[str, str] = {}
    ids: list[str] = []
    for f in msgspec.structs.fields(typ):
        checked = f.type == RawId
        ftype = UncheckedId if checked else f.type
        if f.default is not msgspec.NODEFAULT:
            fields.append((f.name, ftype, f.default))
        elif f.default_factory is not msgspec.NODEFAULT:
            fields.append((f.name, ftype, msgspec.field(default_factory=f.default_factory)))
        else:
            fields.append((f.name, ftype))
        if f.encode_name != f.name:
            renames[f.name] = f.encode_name
        if checked:
            ids.append(f.name)
    twin = msgspec.defstruct(f"{typ.__name__}Unchecked", fields, rename=renames or None,
                             module=typ.__module__)
    return twin, operator.attrgetter(*ids)


def convert_ids(data: Any, typ: type, unchecked: type, ids: Callable[[Any], tuple[str, ...]]):
    """``convert(data, typ)`` for a dict or :class:`msgspec.Raw` (the bridge's path) with the
    ids' control-character check done once: ``data`` is converted / decoded to ``unchecked``
    (:func:`unchecked_twin` of ``typ``) and the ids
    (``ids``: the twin's getter of the RawId fields) are searched joined.  On any
    failure the full ``convert(data, typ)`` runs, so a bad event is refused with exactly the
    error ``typ`` gives.  Returns a ``typ`` or an equal-valued ``unchecked``."""
    try:
        if type(data) is dict:
            v: Any = msgspec.convert(data, unchecked)
        elif isinstance(data, msgspec.Raw):
            v = _decoder(unchecked).decode(data)
        else:
            return convert(data, typ)
    except (msgspec.DecodeError, RecursionError):  # bad value or JSON: the full path says which
        return convert(data, typ)
    if _CONTROL.search("".join(ids(v))) is None:
        return v
    return convert(data, typ)  # an id with a control character: RawId's own error


@functools.cache
def _decoder(typ: type) -> msgspec.json.Decoder:
    """One JSON decoder per raw event type, built on first use and kept (msgspec's pattern)."""
    return msgspec.json.Decoder(typ)
