"""One trace line as JSON text, byte for byte what ``json.dumps(x, ensure_ascii=False,
separators=(",", ":")) + "\\n"`` writes, at a fraction of its CPU (issue 24, branch i24-harness).

Rules / theory of operation
---------------------------
* msgspec's encoder writes the same text as the stdlib's for the values a trace line holds —
  dicts with string keys (insertion order kept), lists and tuples, ``str`` (non-ASCII as is,
  ``"``, ``\\`` and control characters escaped alike), ``bool``, ``None``, ``int`` within 64 bits
  and ``float`` — except for floats the stdlib writes in exponent form (``1e-05``, ``1e+16``;
  msgspec: ``0.00001``, ``1e16``) and NaN / infinities (msgspec: ``null``).
* So :func:`line` (and :func:`text`, a whole trace) checks the line first (:func:`_plain`):
  every float is 0 or has a magnitude in [1e-4, 1e16) — where both write the shortest
  round-trip digits in positional form — every ``int`` fits in 64 bits, every dict key is a
  ``str``, and nothing else (no subclass, no other type) occurs.  A line that fails the check,
  or that msgspec refuses (a lone surrogate), is written by the stdlib exactly as before —
  errors included (a trace that cannot be written is now not written at all, where the stdlib
  loop left the lines before the bad one in the file).
* The check recurses in Python (about two frames a level), the stdlib's C encoder does not: a
  line nested deeper than the check can follow (a few hundred levels), or one that holds
  itself, is the stdlib's to write or refuse too — so it writes what the stdlib writes and
  raises what the stdlib raises (``ValueError: Circular reference detected``), not the check's
  ``RecursionError`` (branch brk33).
* Measured on the 8-hour shift (~120,000 lines): see ``docs/decisions.md``, "Issue 24: the
  harness's CPU".
"""
from __future__ import annotations

import json
from typing import Any, Callable

import msgspec

_ENC = msgspec.json.Encoder()
_STDLIB = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
_SCALARS = (str, bool, type(None))
_INT_MIN, _INT_MAX = -(2 ** 63), 2 ** 64 - 1  # msgspec's int range (int64 and uint64)


def _plain(v: Any) -> bool:
    """True when msgspec writes ``v`` exactly as the stdlib does (module rules)."""
    t = type(v)
    if t in _SCALARS:
        return True
    if t is float:
        return v == 0.0 or 1e-4 <= abs(v) < 1e16  # False for NaN and the infinities too
    if t is int:
        return _INT_MIN <= v <= _INT_MAX
    if t is dict:
        return all(type(k) is str and _plain(x) for k, x in v.items())
    if t is list or t is tuple:
        return all(_plain(x) for x in v)
    return False


def _checked(check: Callable[[Any], bool], x: Any) -> bool:
    """``check(x)``, False where it runs out of recursion (module rules: the stdlib decides)."""
    try:
        return check(x)
    except RecursionError:
        return False


def _all_plain(lines: list[dict[str, Any]]) -> bool:
    return all(map(_plain_line, lines))


def _plain_line(x: dict[str, Any]) -> bool:
    """:func:`_plain` of a trace line, its common values (strings, None, floats) inline."""
    if type(x) is not dict:
        return False
    for k, v in x.items():
        if type(k) is not str:
            return False
        t = type(v)
        if t is str or v is None:
            continue
        if t is float:
            if not (v == 0.0 or 1e-4 <= abs(v) < 1e16):
                return False
        elif not _plain(v):
            return False
    return True


def text(lines: list[dict[str, Any]]) -> str:
    """The lines as JSON lines (each ``"\n"`` ended), the stdlib's text (module rules): one
    msgspec call when every line passes the check, else :func:`line` by line."""
    if _checked(_all_plain, lines):
        try:
            return _ENC.encode_lines(lines).decode()
        except (msgspec.EncodeError, UnicodeEncodeError, OverflowError, RecursionError):
            pass  # a lone surrogate, say: line by line, the stdlib writing that one
    return "".join(map(line, lines))


def line(x: dict[str, Any]) -> str:
    """``x`` as one JSON line (``"\\n"`` ended), the stdlib's text (module rules).  Raises what
    ``json.dumps`` raises for a value it cannot write."""
    if _checked(_plain, x):
        try:
            return _ENC.encode(x).decode() + "\n"
        except (msgspec.EncodeError, UnicodeEncodeError, OverflowError, RecursionError):
            pass  # a lone surrogate, say: the stdlib writes it (as before)
    return _STDLIB.encode(x) + "\n"
