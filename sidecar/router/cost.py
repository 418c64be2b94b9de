"""One work budget per template render (issue 9 follow-up, a breaker's finds F1–F3: a recursive
macro ``f(n)`` calling itself twice cost 2^n calls with no loop; ``|sort``, ``|wordwrap``,
``|urlize`` … on 250 K-item values cost seconds inside each allowed loop step; ``|urlencode``,
``|e`` and ``sum(start=[])`` made values far over the size cap).

Rules / theory of operation
---------------------------
* A render owns one :class:`RenderBudget`: ``taken`` loop steps (at most :data:`MAX_STEPS`) and
  ``work`` units (at most :data:`MAX_WORK`).  A unit is roughly 50 ns of CPU on the slowest
  operation it stands for (measured: the whole budget is ~50–100 ms of CPU), so every
  template finishes in bounded work whatever it does.  Counts, never timers.
* What charges (before it runs, so a refused operation never runs):
  - every call (functions, methods, **macro invocations**, ``caller()``, ``loop()``):
    :data:`CALL_COST` + the size of its arguments;
  - every filter and test: :data:`FILTER_COST` + its input's size × the filter's weight
    (:data:`WEIGHTS`, measured per item; sort-like filters n·log2 n) + its other arguments'
    sizes; afterwards its result is size-checked (≤ :data:`MAX_SIZE`) and its size charged;
  - every loop step and every macro / call-block body run: the body's node count;
  - every ``*``, ``**``, ``%``, ``+``, ``~``: its result's size.
* Sizes (:func:`size`) are *deep* — a list of lists counts every item and every character —
  and capped just above :data:`MAX_SIZE`, so measuring costs no more than the units it charges
  (``[l]*50`` of a 200 K list is 10 M items, not 50).  Integers count one unit per 64 bits.
* Over a bound → :class:`TemplateTooCostly` naming it ("template too costly: …"); the router
  records that delivery as failed (terminal).
"""
from __future__ import annotations

import contextvars
import itertools
import math
from collections.abc import Callable, Iterator
from typing import Any

from jinja2.nodes import Node
from jinja2.sandbox import SecurityError
from markupsafe import Markup

from .budget import EVENT_WORK, MAX_STEPS, MAX_WORK, EventWork  # noqa: F401 - re-exported

MAX_SIZE = 256 * 1024  # characters / items of any value a template produces
CALL_COST = 200  # a call: a macro invocation ~4 µs, a method ~9 µs, a recursive loop() ~10 µs
FILTER_COST = 20  # a filter or test call, apart from its input

# units per item of the input, measured on 60 K-item inputs (ns per item / 50, rounded up);
# "log" filters charge n·log2(n) × weight.  Any filter not named charges 1 per item.
WEIGHTS: dict[str, int] = {
    "wordwrap": 25, "urlize": 40, "title": 6, "striptags": 3, "wordcount": 4, "pprint": 50,
    "unique": 10, "list": 3, "join": 3, "map": 25, "select": 6, "reject": 6, "selectattr": 6,
    "rejectattr": 6, "batch": 12, "min": 10, "max": 10, "tojson": 4, "string": 2, "sum": 2,
    "urlencode": 1, "capitalize": 1, "items": 3, "xmlattr": 20, "filesizeformat": 1,
}
LOG_WEIGHTS: dict[str, int] = {"sort": 2, "dictsort": 2, "groupby": 2}


class TemplateTooCostly(SecurityError):
    """A render went past one of the bounds (see module rules)."""


class RenderBudget:
    """The loop steps and work units a render has taken (tests read ``taken`` / ``work``)."""

    def __init__(self, limit: int = MAX_STEPS, work_limit: int = MAX_WORK,
                 budget: str = "the work budget") -> None:
        self.limit = limit
        self.work_limit = work_limit
        self.budget = budget
        self.taken = 0
        self.work = 0

    @classmethod
    def drawing_on(cls, pool: EventWork) -> RenderBudget:
        """A render's counter whose work is capped by what is left of its event's ``pool``
        (:class:`~.budget.EventWork`); the caller charges the pool the render's work after it."""
        if pool.left >= MAX_WORK:
            return cls()
        return cls(work_limit=pool.left, budget=f"the event's remaining budget ({EVENT_WORK} units "
                                                "for all its templates)")

    def take(self, n: int = 1) -> None:
        if self.taken + n > self.limit:
            raise TemplateTooCostly(f"template too costly: more than {self.limit} loop steps")
        self.taken += n

    def charge(self, units: int, what: str) -> None:
        if self.work + units > self.work_limit:
            raise TemplateTooCostly(
                f"template too costly: {what} would pass {self.budget} "
                f"({self.work + units} of {self.work_limit} units)")
        self.work += units


_STEPS: contextvars.ContextVar[RenderBudget | None] = contextvars.ContextVar("template_steps", default=None)


def current() -> RenderBudget:
    """The running render's counter; outside a render (Jinja folding constants while it
    compiles) raises, so no costly expression is ever folded at compile time."""
    s = _STEPS.get()
    if s is None:
        raise TemplateTooCostly("evaluated only while rendering")
    return s


def start(steps: RenderBudget) -> contextvars.Token:
    return _STEPS.set(steps)


def stop(token: contextvars.Token) -> None:
    _STEPS.reset(token)


_SEQ = (list, tuple, set, frozenset)
_TEXT = frozenset({str, bytes, Markup})
_DEEP = _TEXT | {list, tuple, set, frozenset, dict}


def size(value: Any, cap: int = MAX_SIZE + 1) -> int:
    """Deep size of ``value`` (see module rules), at most about ``cap``."""
    if isinstance(value, (str, bytes)):
        return len(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return value.bit_length() >> 6
    if isinstance(value, range):
        return len(value)
    if not isinstance(value, (*_SEQ, dict)):
        return 0
    total = 0
    stack: list[Any] = [value]
    while stack and total <= cap:
        v = stack.pop()
        total += len(v)
        items = list(_pairs(v)) if isinstance(v, dict) else v
        types = set(map(type, items))  # one C pass: most values are flat
        if types.isdisjoint(_DEEP):
            continue  # scalars only (an integer inside a value was charged when it was made)
        if types <= _TEXT:
            total += sum(map(len, items))
            continue
        for x in items:
            if isinstance(x, (str, bytes)):
                total += len(x)
            elif isinstance(x, (*_SEQ, dict)):
                stack.append(x)
            if total > cap:
                break
    return total


def _pairs(d: dict) -> Any:
    for k, v in d.items():
        yield k
        yield v


def check_size(value: Any, what: str) -> int:
    """Refuse a ``value`` over :data:`MAX_SIZE`; returns its size."""
    n = size(value)
    if n > MAX_SIZE:
        raise TemplateTooCostly(f"template too costly: {what} makes a value over {MAX_SIZE} items")
    return n


def filter_units(name: str, value: Any) -> int:
    n = size(value)
    if name in LOG_WEIGHTS:
        return LOG_WEIGHTS[name] * n * max(1, math.ceil(math.log2(n + 1)))
    return WEIGHTS.get(name, 1) * n


def charging(name: str, func: Callable[..., Any], kind: str) -> Callable[..., Any]:
    """``func`` (a filter or test) charging its work before it runs and size-checking its
    result (see :mod:`.cost`)."""
    skip = 1 if hasattr(func, "jinja_pass_arg") else 0
    what = f"{kind} {name}"

    def charged(*args: Any, **kwargs: Any) -> Any:
        steps = current()
        value = args[skip] if len(args) > skip else None
        if isinstance(value, Iterator):  # a generator of map/select/…: sized before it is used
            value = list(itertools.islice(value, MAX_SIZE + 1))
            if len(value) > MAX_SIZE:
                raise TemplateTooCostly(f"template too costly: {what} over {MAX_SIZE} items")
            args = (*args[:skip], value, *args[skip + 1:])
        units = FILTER_COST + filter_units(name, value)
        units += sum(size(a) for a in args[skip + 1:]) + sum(size(v) for v in kwargs.values())
        steps.charge(units, what)
        result = func(*args, **kwargs)
        steps.charge(check_size(result, what), what)
        return result

    if skip:
        charged.jinja_pass_arg = func.jinja_pass_arg  # type: ignore[attr-defined]
    return charged


def int_units(op: str, left: Any, right: Any) -> int:
    """Big-integer ``*`` ``//`` ``%`` ``**`` cost about the product of the operands' sizes in
    words (schoolbook division: 64 000-bit ``//`` 32 000-bit took 1.3 ms; it was uncharged)."""
    if not (isinstance(left, int) and isinstance(right, int)) or op not in ("*", "//", "%", "**"):
        return 0
    wl, wr = left.bit_length() >> 6, right.bit_length() >> 6
    if op == "**":
        wl = wr = (left.bit_length() * max(right, 0)) >> 6  # the result's words, squared
    return (wl + 1) * (wr + 1) // 16


def body_weight(body: list[Any]) -> int:
    return sum(1 + sum(1 for _ in n.find_all(Node)) for n in body)
