"""Sender groups (seed 000 §6 "Керування cooldown через групи"; DESIGN §10 "Groups").

Rules / theory of operation
---------------------------
* A group is a set of parameters with a UTC time window: ``failed_in_row`` (threshold; 0 = the
  default 2, 1 = every failure), ``cooldown_delay_from/to`` (minutes; both > 0 replace the whole
  ladder, else the ladder applies), ``send_from/to_message_interval`` (MINUTES, seed 000 §6
  «хвилини»; a number, fractions allowed; pacing),
  ``from_time``/``to_time`` (``HH:MM[:SS]`` UTC, may cross midnight, start inclusive, end
  exclusive; ``None`` = always; equal ends are refused — empty or a whole day is a guess: leave
  the window out for "always") and ``priority`` (unique; larger wins).
* At a failure the group whose window covers *now* with the highest priority applies
  (:func:`active_group`); it is read at that moment only, so a group change never touches a
  running cooldown (seed 000 §6: "уже запущений cooldown свою cooldown_end_date не перераховує").
* Windows are evaluated on UTC seconds-of-day computed arithmetically from unix seconds, never
  through the local zone, so ``TZ`` cannot move a boundary.
* The built-in ``stack`` group (:data:`STACK_GROUP`): ``failed_in_row`` 3, delay 1–2 min and
  ``never_need_check`` — after the fifth cooldown the sender keeps cycling its last step and the
  machine raises a ``sidecar/sender/need_check`` fact instead of parking (DESIGN §10); it has
  no 10 min rest after a release (:meth:`Group.rest_after_release_s`); its cooldown ends with a
  ``GET /v1/health`` probe (:meth:`Group.probes_at_end`).
"""
from __future__ import annotations

import re

import msgspec

from sidecar.domain.errors import InputError

DAY = 86_400
_TIME = re.compile(r"^([01]\d|2[0-3]):([0-5]\d)(?::([0-5]\d))?$")


class GroupError(InputError, ValueError):
    """Invalid group input; ``field`` names the offending field (for a JSON-RPC error)."""

    field: str  # always known

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class Group(msgspec.Struct, frozen=True, kw_only=True):
    """One group (seed 000 §6 field list).  Minutes for delays, seconds for intervals, UTC text
    windows.  Build through :func:`validate_group` to get checked values."""

    id: str
    name: str
    priority: int
    failed_in_row: int = 0
    cooldown_delay_from: float = 0.0
    cooldown_delay_to: float = 0.0
    send_from_message_interval: float = 0.0
    send_to_message_interval: float = 0.0
    from_time: str | None = None
    to_time: str | None = None
    never_need_check: bool = False
    builtin: bool = False

    def threshold(self) -> int:
        """Failures in a row that start a cooldown: ``failed_in_row`` when > 0, else 2."""
        return self.failed_in_row if self.failed_in_row > 0 else 2

    def has_delay(self) -> bool:
        """Both delay bounds > 0: the group's delay replaces the ladder (seed 000 §6)."""
        return self.cooldown_delay_from > 0 and self.cooldown_delay_to > 0

    def rest_after_release_s(self, default: float) -> float:
        """Seconds the sender rests after a cooldown's release: ``default`` (seed 000 §2, 10 min)
        for every group but the built-in Stack group, which rests 0 — DESIGN §10 gives it a
        1–2 min delay "so a Stack outage delays markers by minutes": a 10 min rest after a
        1–2 min cooldown would be most of that delay and make the group's delay meaningless.
        The rest is a customer-message sender's (seed 000: reputation after a cooldown); Stack
        is the sidecar's own backend and its writes are paced by their retry ladder."""
        return 0.0 if self.builtin else default


    def probes_at_end(self) -> bool:
        """Does a cooldown of this group end with a health probe (``GET /v1/health``) instead of
        a warm-up slot?  Only the built-in Stack group's (DESIGN §10 "Groups": its 1–2 min
        cooldown is shorter than any slot, so for Stack the probe is the proof of delivery seed
        000 §3 asks before a release)."""
        return self.builtin


#: The built-in group of the ``stack`` sender (DESIGN §10): minutes, never Need Check.
STACK_GROUP = Group(id="builtin-stack", name="Stack", priority=1_000_000, failed_in_row=3,
                    cooldown_delay_from=1, cooldown_delay_to=2, never_need_check=True, builtin=True)


def parse_time(text: str, field: str) -> int:
    """``HH:MM[:SS]`` → seconds of the day.  Raises :class:`GroupError` naming ``field``."""
    m = _TIME.match(text) if isinstance(text, str) else None
    if m is None:
        raise GroupError(field, f"{text!r} is not HH:MM[:SS] (UTC)")
    return int(m[1]) * 3600 + int(m[2]) * 60 + int(m[3] or 0)


def covers(group: Group, now: float) -> bool:
    """Does ``group``'s UTC window cover unix second ``now``?  Start inclusive, end exclusive; a
    window with start > end crosses midnight; no window = always.  (start == end is refused by
    :func:`validate_group`; a group stored with it by an older sidecar reads as always.)"""
    if group.from_time is None or group.to_time is None:
        return True
    start = parse_time(group.from_time, "from_time")
    end = parse_time(group.to_time, "to_time")
    sod = now % DAY  # UTC second of day: unix time has no leap seconds and no zone
    if start == end:
        return True
    if start < end:
        return start <= sod < end
    return sod >= start or sod < end


def active_group(groups: list[Group], now: float) -> Group | None:
    """The covering group with the highest priority among ``groups`` (a sender's groups), or
    ``None`` (then the defaults of seed 000 §2 apply)."""
    live = [g for g in groups if covers(g, now)]
    return max(live, key=lambda g: g.priority) if live else None


_NUM_FIELDS = ("failed_in_row", "cooldown_delay_from", "cooldown_delay_to",
               "send_from_message_interval", "send_to_message_interval")
FIELDS = ("name", "priority", *_NUM_FIELDS, "from_time", "to_time")


MAX_NAME = 200
MAX_PRIORITY = 10**12  # well inside SQLite's 64-bit INTEGER
MAXIMA: dict[str, float] = {  # seed 000 §6 gives no bounds; these keep every duration sane
    "failed_in_row": 1000,
    "cooldown_delay_from": 7 * 24 * 60, "cooldown_delay_to": 7 * 24 * 60,  # minutes: a week
    "send_from_message_interval": 24 * 60, "send_to_message_interval": 24 * 60,  # minutes: a day
}


def validate_group(data: dict, *, id: str, others: list[Group]) -> Group:
    """Check a create/patch body and build the :class:`Group`.

    ``others`` are the other existing groups (priority must be unique among them).  Raises
    :class:`GroupError` naming the first bad field: unknown field, missing/empty name, priority
    not an int, out of ±:data:`MAX_PRIORITY` or already used, a name over :data:`MAX_NAME` or with
    control characters, a number outside 0…:data:`MAXIMA` (NaN and infinity included), ``from >
    to`` of a range, a window that does not parse, only one end of a window or equal ends.
    """
    for key in data:
        if key not in FIELDS:
            raise GroupError(key, "unknown field")
    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        raise GroupError("name", "required, a non-empty string")
    if len(name) > MAX_NAME or any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise GroupError("name", f"at most {MAX_NAME} characters, no control characters")
    prio = data.get("priority")
    if not isinstance(prio, int) or isinstance(prio, bool):
        raise GroupError("priority", "required, an integer")
    if abs(prio) > MAX_PRIORITY:  # SQLite's INTEGER is 64-bit: a bigger one stopped the sidecar
        raise GroupError("priority", f"an integer from -{MAX_PRIORITY} to {MAX_PRIORITY}")
    if any(g.priority == prio for g in others):
        raise GroupError("priority", f"{prio} is already used by another group (must be unique)")
    nums: dict[str, float] = {}
    for f in _NUM_FIELDS:
        v = data.get(f, 0)
        if v is None:
            v = 0
        if not isinstance(v, (int, float)) or isinstance(v, bool) or not 0 <= v <= MAXIMA[f]:
            # NaN and ±inf fail the range too; a bound keeps every derived instant a valid time
            raise GroupError(f, f"a number from 0 to {MAXIMA[f]:g}")
        nums[f] = v
    if not float(nums["failed_in_row"]).is_integer():
        raise GroupError("failed_in_row", "an integer ≥ 0")
    for lo, hi in (("cooldown_delay_from", "cooldown_delay_to"),
                   ("send_from_message_interval", "send_to_message_interval")):
        if nums[lo] > nums[hi] and nums[hi] > 0:
            raise GroupError(hi, f"must be ≥ {lo}")
    ft, tt = data.get("from_time"), data.get("to_time")
    if ft is not None:
        parse_time(ft, "from_time")
    if tt is not None:
        parse_time(tt, "to_time")
    if (ft is None) != (tt is None):
        raise GroupError("to_time" if tt is None else "from_time", "a window needs both ends (or neither)")
    if ft is not None and tt is not None and parse_time(ft, "from_time") == parse_time(tt, "to_time"):
        raise GroupError("from_time", f"the window {ft}–{tt} is empty (start = end); for a group "
                         "that applies all day leave from_time and to_time out")
    return Group(id=id, name=name.strip(), priority=prio, failed_in_row=int(nums["failed_in_row"]),
                 cooldown_delay_from=nums["cooldown_delay_from"], cooldown_delay_to=nums["cooldown_delay_to"],
                 send_from_message_interval=nums["send_from_message_interval"],
                 send_to_message_interval=nums["send_to_message_interval"], from_time=ft, to_time=tt)


def group_body(g: Group) -> dict:
    """The editable fields of ``g`` as a create/patch body (for merging a patch)."""
    return {f: getattr(g, f) for f in FIELDS}
