"""Size guards of the template sandbox (:mod:`.sandbox`): operations whose result can be far
larger than their inputs are refused *before* they run, every other result is checked after
(DESIGN §10 "templates are sandboxed": ``{{ 'x' * 10**9 }}``, ``urlencode``
×6 → 3.25 M characters, ``sum(start=[])`` → 10 M items).

Rules / theory of operation
---------------------------
* No string, list or number a template produces may exceed :data:`~.cost.MAX_SIZE` characters /
  items (deep size, :func:`.cost.size`) or :data:`MAX_BITS` bits; a format width or precision
  may not exceed :data:`MAX_WIDTH`.  Past a bound :class:`~.cost.TemplateTooCostly` names it.
* Checked before they run: ``*``, ``**``, ``%`` (printf widths), ``+`` (:func:`binop`);
  ``str.center`` / ``ljust`` / ``rjust`` / ``zfill`` widths, ``expandtabs``, ``replace``,
  ``join`` (:func:`check_method`); ``str.format`` specs (:func:`check_format_spec`: a field
  nested in a spec is refused — its width is data); the filters ``center``, ``indent``,
  ``wordwrap``, ``format``, ``replace``, ``join``, ``slice``, ``batch``, each with its check
  and its result checked too (:func:`guarded_filters`).
* Pure checks: no clock, no I/O; the work budget (what each operation costs) is :mod:`.cost`.
"""
from __future__ import annotations

import re
import string
from collections.abc import Callable
from typing import Any

from jinja2.filters import FILTERS

from . import cost
from .cost import MAX_SIZE, TemplateTooCostly

MAX_BITS = 64 * 1024  # bits of any integer a template produces
MAX_WIDTH = 4096  # a field width / precision in a format (the message cap: wider is pointless)

_size = cost.size


def check_value(value: Any, what: str) -> Any:
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > MAX_BITS:
        raise TemplateTooCostly(f"template too costly: {what} makes an integer over {MAX_BITS} bits")
    cost.check_size(value, what)
    return value


def need(size: int, what: str) -> None:
    if size > MAX_SIZE:
        raise TemplateTooCostly(f"template too costly: {what} would make {size} items (max {MAX_SIZE})")


def _width(n: Any, what: str) -> None:
    if isinstance(n, int) and not isinstance(n, bool) and abs(n) > MAX_SIZE:
        raise TemplateTooCostly(f"template too costly: {what} {n} (max {MAX_SIZE})")


_PRINTF = re.compile(r"%(?:\([^)]*\))?[#0\- +]*(\*|\d+)?(?:\.(\*|\d+))?")


def _check_printf(fmt: str) -> None:
    for m in _PRINTF.finditer(fmt):
        for part in m.groups():
            if part == "*":
                raise TemplateTooCostly("template refused: a '*' width in a % format (the width is data)")
            if part and int(part) > MAX_WIDTH:
                raise TemplateTooCostly(f"template too costly: format width {part} (max {MAX_WIDTH})")


def check_format_spec(fmt: str) -> None:
    try:
        fields = list(string.Formatter().parse(fmt))
    except ValueError:
        return  # str.format raises its own error
    for _, _, spec, _ in fields:
        if not spec:
            continue
        if "{" in spec:
            raise TemplateTooCostly("template refused: a format field nested in a format spec")
        for digits in re.findall(r"\d+", spec):
            if int(digits) > MAX_WIDTH:
                raise TemplateTooCostly(f"template too costly: format width {digits} (max {MAX_WIDTH})")


def binop(op: str, left: Any, right: Any) -> None:
    """Refuse ``left op right`` before it runs when its result would be too big."""
    if op == "*":
        for seq, n in ((left, right), (right, left)):
            if isinstance(seq, (str, bytes, list, tuple)) and isinstance(n, int):
                need(_size(seq) * max(n, 0), "'*' repetition")
        if isinstance(left, int) and isinstance(right, int) and \
                left.bit_length() + right.bit_length() > MAX_BITS:
            raise TemplateTooCostly(f"template too costly: '*' makes an integer over {MAX_BITS} bits")
    elif op == "**":
        if isinstance(left, int) and isinstance(right, int) and right > 0 and abs(left) > 1 \
                and right * left.bit_length() > MAX_BITS:
            raise TemplateTooCostly(f"template too costly: '**' makes an integer over {MAX_BITS} bits")
    elif op == "%" and isinstance(left, str):
        _check_printf(left)
    elif op == "+":
        need(_size(left) + _size(right), "'+'")


_WIDTH_METHODS = frozenset({"center", "ljust", "rjust", "zfill"})


def check_method(obj: Any, args: tuple, kwargs: dict) -> None:
    """Checks before a call of a ``str`` method (see module rules)."""
    name = getattr(obj, "__name__", "")
    owner = getattr(obj, "__self__", None)
    if not isinstance(owner, str):
        return
    if name in _WIDTH_METHODS:
        for a in (*args, *kwargs.values()):
            _width(a, f"str.{name} width")
    elif name == "expandtabs":
        size = next(iter((*args, *kwargs.values())), 8)
        if isinstance(size, int):
            need(len(owner) + owner.count("\t") * max(size, 0), "str.expandtabs")
    elif name == "replace" and len(args) >= 2 and isinstance(args[0], str) and isinstance(args[1], str):
        need(_replace_size(owner, args[0], args[1]), "str.replace")
    elif name == "join" and args:
        need(_join_size(owner, args[0]), "str.join")


def _replace_size(s: str, old: str, new: str) -> int:
    hits = len(s) + 1 if old == "" else s.count(old)
    return len(s) + hits * max(len(new) - len(old), 0)


def _join_size(sep: str, items: Any) -> int:
    if not isinstance(items, (list, tuple, dict, set, frozenset, str)):
        return 0  # a generator: its items are checked as they are made; the result is checked
    return sum(len(str(x)) for x in items) + len(sep) * max(len(items) - 1, 0)


# ---- filters: the size-sensitive ones checked first --------------------------------------

def _wrap(name: str, check: Callable[..., None]) -> Callable[..., Any]:
    orig = FILTERS[name]

    def filt(*args: Any, **kwargs: Any) -> Any:
        check(*args, **kwargs)
        return check_value(orig(*args, **kwargs), f"filter {name}")

    for attr in ("jinja_pass_arg",):
        if hasattr(orig, attr):
            setattr(filt, attr, getattr(orig, attr))
    return filt


def _args_after(skip: int) -> Callable[..., None]:
    def check(*args: Any, **kwargs: Any) -> None:
        for a in (*args[skip:], *kwargs.values()):
            _width(a, "filter width")
    return check


def _check_format_filter(value: Any, *args: Any, **kwargs: Any) -> None:
    if isinstance(value, str):
        _check_printf(value)


def _check_replace_filter(ctx: Any, s: Any, old: Any, new: Any, count: Any = None) -> None:
    if isinstance(s, str) and isinstance(old, str) and isinstance(new, str):
        need(_replace_size(s, old, new), "filter replace")


def _check_join_filter(ctx: Any, value: Any, d: Any = "", attribute: Any = None) -> None:
    if isinstance(d, str):
        need(_join_size(d, value), "filter join")


def _indent_check(s: Any, width: Any = 4, *args: Any, **kwargs: Any) -> None:
    if isinstance(width, str):
        w = len(width)
    elif isinstance(width, int):
        w = width
    else:
        return
    lines = s.count("\n") + 1 if isinstance(s, str) else 1
    need((len(s) if isinstance(s, str) else 0) + lines * max(w, 0), "filter indent")


def guarded_filters() -> dict[str, Callable[..., Any]]:
    """Jinja's size-sensitive filters, each checked before it runs and on its result (module
    rules); the sandbox installs them over Jinja's own when it is built."""
    return {
        "center": _wrap("center", _args_after(1)),
        "indent": _wrap("indent", _indent_check),
        "wordwrap": _wrap("wordwrap", _args_after(1)),
        "format": _wrap("format", _check_format_filter),
        "replace": _wrap("replace", _check_replace_filter),
        "join": _wrap("join", _check_join_filter),
        "slice": _wrap("slice", _args_after(1)),
        "batch": _wrap("batch", _args_after(1)),
    }
