"""A Jinja2 sandbox whose templates cost bounded work (DESIGN §10 "templates are sandboxed";
issue 9: a rule's template like ``{% for i in range(10**5) %}{% for j in range(10**5) %}`` or
``{{ 'x' * 10**9 }}`` blocked the event loop for seconds — templates are rendered inside a step).

Rules / theory of operation
---------------------------
* :class:`BoundedSandbox` is Jinja2's :class:`~jinja2.sandbox.ImmutableSandboxedEnvironment`
  (no attribute tricks, no mutation) plus three bounds, each a deterministic count — never a
  timer (speed is measured in benchmarks, not asserted):
  - **steps**: every item of a ``range()`` (when it is made) and every other ``{% for %}``
    iteration counts one step;
    a render may take :data:`MAX_STEPS`.  Loops are bounded by rewriting each ``For`` node's
    iterable through the ``_steps`` filter when the template is parsed, so nested loops, macros
    and ``{% call %}`` blocks all count, whatever they iterate;
  - **sizes**: no string, list or number a template *produces* may exceed :data:`MAX_SIZE`
    characters / items or :data:`MAX_BITS` bits.  Operations whose result can be far larger
    than their inputs are checked *before* they run (``*``, ``**``, ``%`` and ``format``
    widths, ``~`` concatenation, ``center`` / ``ljust`` / ``rjust`` / ``zfill`` /
    ``expandtabs`` / ``indent`` / ``wordwrap`` widths, ``replace``, ``join``, ``slice``,
    ``batch``); every other method call is checked on its result.  Printf-style ``*`` widths and
    format fields nested in a format spec are refused (their width is data);
  - **output**: the render is streamed and stops at ``max_chars`` characters — the rest of the
    template never runs (``render`` truncates there, as the message cap says).
  Exceeding a bound raises :class:`TemplateTooCostly` (a :class:`~jinja2.sandbox.SecurityError`)
  inside the render, which the router records as a terminal template failure naming the bound.
* Nothing random: the ``random`` filter and the ``lipsum`` global are removed (a replay renders
  the same bytes).
* The step counter is per render (:func:`bounded_render`), kept in a ``ContextVar``.
"""
from __future__ import annotations

import contextvars
import re
import string
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import jinja2
from jinja2 import nodes
from jinja2.filters import FILTERS
from jinja2.sandbox import ImmutableSandboxedEnvironment, SecurityError
from jinja2.visitor import NodeTransformer

MAX_STEPS = 10_000  # loop iterations + range() items per render
MAX_SIZE = 256 * 1024  # characters / items of any value a template produces
MAX_BITS = 64 * 1024  # bits of any integer a template produces
MAX_WIDTH = 4096  # a field width / precision in a format (the message cap: wider is pointless)


class TemplateTooCostly(SecurityError):
    """A render went past one of the bounds (see module rules)."""


class Steps:
    """The steps a render has taken."""

    def __init__(self, limit: int = MAX_STEPS) -> None:
        self.limit = limit
        self.taken = 0

    def take(self, n: int = 1) -> None:
        if self.taken + n > self.limit:
            raise TemplateTooCostly(f"template too costly: more than {self.limit} loop steps")
        self.taken += n


_STEPS: contextvars.ContextVar[Steps | None] = contextvars.ContextVar("template_steps", default=None)


def _steps() -> Steps:
    s = _STEPS.get()
    if s is None:  # rendered outside bounded_render (constant folding at compile time)
        raise TemplateTooCostly("loops run only while rendering")
    return s


def _size(value: Any) -> int:
    if isinstance(value, (str, bytes, list, tuple, dict, set, frozenset)):
        return len(value)
    return 0


def _check_value(value: Any, what: str) -> Any:
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > MAX_BITS:
        raise TemplateTooCostly(f"template too costly: {what} makes an integer over {MAX_BITS} bits")
    if _size(value) > MAX_SIZE:
        raise TemplateTooCostly(f"template too costly: {what} makes a value over {MAX_SIZE} items")
    return value


def _need(size: int, what: str) -> None:
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


def _check_format_spec(fmt: str) -> None:
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


def _binop(op: str, left: Any, right: Any) -> None:
    """Refuse ``left op right`` before it runs when its result would be too big."""
    if op == "*":
        for seq, n in ((left, right), (right, left)):
            if _size(seq) and isinstance(n, int):
                _need(_size(seq) * max(n, 0), "'*' repetition")
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
        _need(_size(left) + _size(right), "'+'")


_WIDTH_METHODS = frozenset({"center", "ljust", "rjust", "zfill"})


def _check_method(obj: Any, args: tuple, kwargs: dict) -> None:
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
            _need(len(owner) + owner.count("\t") * max(size, 0), "str.expandtabs")
    elif name == "replace" and len(args) >= 2 and isinstance(args[0], str) and isinstance(args[1], str):
        _need(_replace_size(owner, args[0], args[1]), "str.replace")
    elif name == "join" and args:
        _need(_join_size(owner, args[0]), "str.join")


def _replace_size(s: str, old: str, new: str) -> int:
    hits = len(s) + 1 if old == "" else s.count(old)
    return len(s) + hits * max(len(new) - len(old), 0)


def _join_size(sep: str, items: Any) -> int:
    if not isinstance(items, (list, tuple, dict, set, frozenset, str)):
        return 0  # a generator: its items are checked as they are made; the result is checked
    return sum(len(str(x)) for x in items) + len(sep) * max(len(items) - 1, 0)


# ---- filters: the size-sensitive ones checked first; nothing random --------------------------

def _wrap(name: str, check: Callable[..., None]) -> Callable[..., Any]:
    orig = FILTERS[name]

    def filt(*args: Any, **kwargs: Any) -> Any:
        check(*args, **kwargs)
        return _check_value(orig(*args, **kwargs), f"filter {name}")

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
        _need(_replace_size(s, old, new), "filter replace")


def _check_join_filter(ctx: Any, value: Any, d: Any = "", attribute: Any = None) -> None:
    if isinstance(d, str):
        _need(_join_size(d, value), "filter join")


@jinja2.pass_context  # never constant-folded at compile time: it counts while rendering
def _count_steps(ctx: Any, value: Any) -> Iterator[Any]:
    """The ``_steps`` filter every ``For`` iterates through (a ``range``'s items were counted
    when it was made)."""
    if isinstance(value, range):
        yield from value
        return
    steps = _steps()
    for item in value:
        steps.take()
        yield item


def _range(*args: int) -> range:
    r = range(*args)
    _steps().take(len(r))
    return r


def _concat(items: tuple) -> str:
    parts = [str(x) for x in items]
    _need(sum(len(p) for p in parts), "'~'")
    return "".join(parts)


class _CountLoops(NodeTransformer):
    """Route every loop's iterable through ``_steps``, every ``~`` through ``_concat``."""

    def visit_For(self, node: nodes.For) -> nodes.Node:
        self.generic_visit(node)
        node.iter = nodes.Filter(node.iter, "_steps", [], [], None, None, lineno=node.lineno)
        return node

    def visit_Concat(self, node: nodes.Concat) -> nodes.Node:
        self.generic_visit(node)
        return nodes.Filter(nodes.Tuple(list(node.nodes), "load", lineno=node.lineno), "_concat",
                            [], [], None, None, lineno=node.lineno)


class BoundedSandbox(ImmutableSandboxedEnvironment):
    """See the module rules."""

    intercepted_binops = frozenset({"*", "**", "%", "+"})

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.globals.pop("lipsum", None)
        self.globals["range"] = _range
        self.filters.pop("random", None)
        self.filters.update({
            "center": _wrap("center", _args_after(1)),
            "indent": _wrap("indent", _indent_check),
            "wordwrap": _wrap("wordwrap", _args_after(1)),
            "format": _wrap("format", _check_format_filter),
            "replace": _wrap("replace", _check_replace_filter),
            "join": _wrap("join", _check_join_filter),
            "slice": _wrap("slice", _args_after(1)),
            "batch": _wrap("batch", _args_after(1)),
            "_steps": _count_steps,
            "_concat": _concat,
        })

    def _parse(self, source: str, name: str | None, filename: str | None) -> nodes.Template:
        # Jinja's one parse hook (``parse`` and ``compile`` both call it; jinja2 >= 3.1): the
        # rewrite is in every compiled template, so no loop escapes the count
        tree = super()._parse(source, name, filename)
        return _CountLoops().visit(tree)

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        _binop(operator, left, right)
        return _check_value(super().call_binop(context, operator, left, right), f"'{operator}'")

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805
        _check_method(__obj, args, kwargs)
        return _check_value(super().call(__context, __obj, *args, **kwargs), "a call")

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        fmt = super().wrap_str_format(value)
        if fmt is None:
            return None
        template = value.__self__

        def checked(*args: Any, **kwargs: Any) -> str:
            _check_format_spec(template)
            return _check_value(fmt(*args, **kwargs), "str.format")

        return checked


def _indent_check(s: Any, width: Any = 4, *args: Any, **kwargs: Any) -> None:
    if isinstance(width, str):
        w = len(width)
    elif isinstance(width, int):
        w = width
    else:
        return
    lines = s.count("\n") + 1 if isinstance(s, str) else 1
    _need((len(s) if isinstance(s, str) else 0) + lines * max(w, 0), "filter indent")


def bounded_render(tpl: jinja2.Template, ctx: dict[str, Any], max_chars: int,
                   steps: Steps | None = None) -> tuple[str, bool]:
    """Render ``tpl`` with ``ctx`` under the bounds; stop once ``max_chars`` characters are out.
    Returns ``(text, truncated)``.  Raises whatever the template raises (``TemplateTooCostly``
    for a bound).  ``steps``: the counter to use (tests read ``steps.taken``)."""
    token = _STEPS.set(steps if steps is not None else Steps())
    out: list[str] = []
    n = 0
    truncated = False
    gen: Iterable[str] = tpl.generate(ctx)
    try:
        for chunk in gen:
            out.append(chunk)
            n += len(chunk)
            if n > max_chars:
                truncated = True
                break
    finally:
        close = getattr(gen, "close", None)
        if close is not None:
            close()
        _STEPS.reset(token)
    text = "".join(out)
    return (text[:max_chars], truncated) if truncated else (text, False)
