"""Scenario files: parse and validate (``shared/scenarios/README.md``, format 1).

Rules / theory of operation
---------------------------
* A scenario is JSON lines.  Line 1 is the ``header``; then the initial world (lines without
  ``t``: ``tu``, ``favorite``, ``history``, ``chat_log``, ``mail_log``); then the timeline, every
  line with ``t`` (seconds from the header's ``start``, float), sorted by ``t`` (equal ``t`` keep
  file order).  Blank lines are skipped.
* Each line is decoded into the msgspec Struct of its ``kind`` (a tagged union on ``kind``).
  Unknown keys are ignored.  Enumerated values (``from``, ``by``, ``like``, ``what``, ``mode`` …)
  are checked here, so the replay never meets a value it cannot play.
* Every problem raises :class:`ScenarioError` naming the file, the 1-based LINE NUMBER and what
  is wrong: malformed JSON, an unknown ``kind``, a bad or missing value, a timeline line without
  ``t``, a ``t`` earlier than the line before it, an initial-world line after the timeline began,
  a header that is not line 1.
* ``favorite`` is both: without ``t`` it is initial world (a full favorite as Stack knows it at
  start), with ``t`` a timeline change (partial: only the keys given change).
* Times in the initial world (``chat_log.at``, ``history.task.created_at`` …) and ``email``'s
  ``received_at`` are ``t`` values too (negative = before start); :meth:`Scenario.abs` turns any of
  them into unix seconds.

Shapes: :class:`Scenario` holds ``header``, ``world`` (initial lines, file order) and ``timeline``
(``Line`` objects with ``lineno`` set).  Nothing here does I/O except :func:`load`.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Union

import msgspec

from electron_stub.lines import *  # noqa: F401,F403 - the line kinds are part of this module's API
from electron_stub.lines import ChatLog, Favorite, Group, Header, History, MailLog, Rule, Target, Tu
from electron_stub.lines_timeline import *  # noqa: F401,F403 - the same
from electron_stub.lines_timeline import (
    Block, ChatRequestLine, Crash, DialogCreatedLine, EmailLine, Emit, EmptyDialog, Expect,
    Icebreaker, Like, Limits, Login, Logout, Mail, MailReadLine, Manage, Message, MutualLike,
    NotificationLine, Online, Reconnect, SocketDown, StackFault, SystemLine, TargetFault, Unblock,
)

# the tagged union every line decodes with (``kind``; electron_stub.lines' rules)
Line = Union[Header, Tu, Favorite, History, ChatLog, MailLog, Login, Logout, Online, Message, Like,
             Mail, MailReadLine, EmailLine, NotificationLine, Limits, SystemLine, DialogCreatedLine,
             Icebreaker, ChatRequestLine, Block, Unblock, SocketDown, Reconnect, EmptyDialog, MutualLike,
             Crash, StackFault, Target, Rule, Group, Emit, TargetFault, Manage, Expect]
INITIAL = (Tu, History, ChatLog, MailLog, Target, Rule, Group)  # never timeline; Favorite is either
KINDS = sorted(c.__struct_config__.tag for c in Line.__args__)  # type: ignore[attr-defined]


class ScenarioError(ValueError):
    """A scenario problem: ``path``, 1-based ``lineno`` (0 = the file as a whole), ``what``."""

    def __init__(self, path: str | Path, lineno: int, what: str) -> None:
        self.path, self.lineno, self.what = str(path), lineno, what
        super().__init__(f"{path}:{lineno}: {what}" if lineno else f"{path}: {what}")


class Scenario(msgspec.Struct, kw_only=True):
    path: str
    header: Header
    world: list[Any]  # initial lines, file order
    timeline: list[Any]  # lines with t, sorted (file order on ties)

    @property
    def start(self) -> float:
        """The header's start, unix seconds."""
        return self.header.start_unix

    def abs(self, t: float) -> float:
        """A ``t`` value (seconds from start) → unix seconds."""
        return self.start + t

    @property
    def end(self) -> float:
        return self.start + self.header.duration_s


_decoder = msgspec.json.Decoder(Line)


def _friendly(exc: msgspec.ValidationError) -> str:
    msg = str(exc)
    if "Invalid value" in msg and "`$.kind`" in msg:
        return f"unknown kind ({msg}); known kinds: {', '.join(KINDS)}"
    if "Expected `object`, got" in msg and "$" not in msg.split("got")[-1]:
        return f"a line must be a JSON object ({msg})"
    return msg


def parse_lines(lines: list[str], path: str = "<scenario>") -> Scenario:
    """Parse JSON-lines text (one string per file line).  Raises :class:`ScenarioError`."""
    header: Header | None = None
    world: list[Any] = []
    timeline: list[Any] = []
    last_t: float | None = None
    for lineno, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        try:
            obj = msgspec.json.decode(raw)
        except msgspec.DecodeError as exc:
            raise ScenarioError(path, lineno, f"malformed JSON: {exc}") from None
        if not isinstance(obj, dict):
            raise ScenarioError(path, lineno, "a line must be a JSON object")
        if "kind" not in obj:
            raise ScenarioError(path, lineno, "missing kind")
        try:
            line = _decoder.decode(raw)
        except msgspec.ValidationError as exc:
            raise ScenarioError(path, lineno, _friendly(exc)) from None
        line.lineno = lineno
        problem = line.check()
        if problem:
            raise ScenarioError(path, lineno, problem)
        kind = obj["kind"]
        if isinstance(line, Header):
            if header is not None or world or timeline:
                raise ScenarioError(path, lineno, "the header must be line 1, once")
            header = line
            continue
        if header is None:
            raise ScenarioError(path, lineno, "line 1 must be the header (kind header)")
        timed = not isinstance(line, INITIAL) and not (isinstance(line, Favorite) and line.t is None)
        if not timed:
            if timeline:
                raise ScenarioError(path, lineno, f"initial-world line ({kind}) after the timeline began")
            if isinstance(line, Favorite) and (line.active is None or line.is_white is None):
                raise ScenarioError(path, lineno, "an initial favorite needs active and is_white")
            world.append(line)
            continue
        if line.t is None:
            raise ScenarioError(path, lineno, f"timeline line ({kind}) without t")
        if line.t < 0:
            raise ScenarioError(path, lineno, f"t {line.t} is before start")
        if line.t > header.duration_s:  # would never run: the replay stops at duration_s
            raise ScenarioError(path, lineno, f"t {line.t} is past the end of the scenario "
                                              f"(duration_s {header.duration_s:g}); raise duration_s or drop the line")
        if last_t is not None and line.t < last_t:
            raise ScenarioError(path, lineno, f"timeline out of order: t {line.t} < {last_t} of the line before")
        last_t = line.t
        timeline.append(line)
    if header is None:
        raise ScenarioError(path, 0, "empty scenario (no header)")
    return Scenario(path=path, header=header, world=world, timeline=timeline)


def load(path: str | Path) -> Scenario:
    """Read and parse a scenario file.  Raises :class:`ScenarioError` (also for a missing file)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ScenarioError(p, 0, f"cannot read: {exc}") from None
    return parse_lines(text.splitlines(), str(p))
