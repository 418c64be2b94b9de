"""A Jinja2 sandbox whose templates cost bounded work (DESIGN §10 "templates are sandboxed";
issue 9: a rule's template like ``{% for i in range(10**5) %}{% for j in range(10**5) %}`` or
``{{ 'x' * 10**9 }}`` blocked the event loop for seconds — templates are rendered inside a step).

Rules / theory of operation
---------------------------
* :class:`BoundedSandbox` is Jinja2's :class:`~jinja2.sandbox.ImmutableSandboxedEnvironment`
  (no attribute tricks, no mutation) plus four bounds, each a deterministic count — never a
  timer (speed is measured in benchmarks, not asserted):
  - **work**: one budget of work units per render (:mod:`.cost`): every call and macro
    invocation, every filter and test (wrapped here once), every loop step and macro body, every
    operator charges by the size of what it handles, before it runs — a recursive macro or a
    ``|sort`` of a huge list inside a loop stops at :data:`MAX_WORK` (~50 ms of CPU);
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
    format fields nested in a format spec are refused (their width is data) — the guards are
    :mod:`.sizes`;
  - **output**: the render is streamed and stops at ``max_chars`` characters — the rest of the
    template never runs (``render`` truncates there, as the message cap says).
  Exceeding a bound raises :class:`TemplateTooCostly` (a :class:`~jinja2.sandbox.SecurityError`)
  inside the render, which the router records as a terminal template failure naming the bound.
* Nothing random: the ``random`` filter and the ``lipsum`` global are removed (a replay renders
  the same bytes).
* The step counter is per render (:func:`bounded_render`), kept in a ``ContextVar``.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any, cast

import jinja2
from jinja2 import nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.utils import pass_environment
from jinja2.visitor import NodeTransformer

from . import cost, sizes
from .cost import CALL_COST, MAX_SIZE, MAX_STEPS, MAX_WORK, RenderBudget, TemplateTooCostly
from .sizes import MAX_BITS

__all__ = ["MAX_BITS", "MAX_SIZE", "MAX_STEPS", "MAX_WORK", "BoundedSandbox", "RenderBudget",
           "TemplateTooCostly", "bounded_render"]



def _steps() -> RenderBudget:
    return cost.current()


@jinja2.pass_context  # never constant-folded at compile time: it counts while rendering
def _count_steps(ctx: Any, value: Any, weight: int = 1) -> Iterator[Any]:
    """The ``_steps`` filter every ``For`` iterates through: each step takes one loop step (a
    ``range``'s items were taken when it was made) and charges ``weight`` units, the node count
    of the loop's body."""
    steps = _steps()
    counted = isinstance(value, range)
    for item in value:
        if not counted:
            steps.take()
        steps.charge(weight, "a loop step")
        yield item


@jinja2.pass_context
def _charge_body(ctx: Any, weight: int) -> str:
    """The first statement of every macro and call block: charges its body's node count."""
    _steps().charge(weight, "a macro body")
    return ""


def _range(*args: int) -> range:
    r = range(*args)
    _steps().take(len(r))
    return r


def _concat(items: tuple) -> str:
    parts = [str(x) for x in items]
    n = sum(len(p) for p in parts)
    sizes.need(n, "'~'")
    _steps().charge(1 + n, "'~'")
    return "".join(parts)


@pass_environment
def _sum(environment: Any, iterable: Any, attribute: Any = None, start: Any = 0) -> Any:
    """Jinja's ``sum`` with every addition size-checked and charged (``sum(start=[])`` over
    copies of a big list made 10 M items)."""
    if attribute is not None:
        iterable = map(jinja2.filters.make_attrgetter(environment, attribute), iterable)
    total = start
    steps = _steps()
    for item in iterable:
        sizes.binop("+", total, item)
        total = total + item
        steps.charge(1 + cost.size(total), "filter sum")
    return total





@jinja2.pass_context
def _charge_size(ctx: Any, value: Any, what: str) -> Any:
    _steps().charge(1 + cost.size(value), what)
    return value


def _sized(expr: nodes.Expr, what: str = "a comparison") -> nodes.Expr:
    return nodes.Filter(expr, "_sized", [nodes.Const(what)], [], None, None, lineno=expr.lineno)


class _CountLoops(NodeTransformer):
    """Route every loop's iterable through ``_steps``, every ``~`` through ``_concat``."""

    def visit_For(self, node: nodes.For) -> nodes.Node:
        weight = cost.body_weight(node.body) + cost.body_weight(node.else_)
        self.generic_visit(node)
        node.iter = nodes.Filter(node.iter, "_steps", [nodes.Const(weight)], [], None, None,
                                 lineno=node.lineno)
        return node

    def visit_Macro(self, node: nodes.Macro) -> nodes.Node:
        return self._charge_body(node)

    def visit_CallBlock(self, node: nodes.CallBlock) -> nodes.Node:
        return self._charge_body(node)

    def _charge_body(self, node: Any) -> nodes.Node:
        weight = cost.body_weight(node.body)
        self.generic_visit(node)
        charge = nodes.Filter(nodes.Const(weight), "_charge_body", [], [], None, None, lineno=node.lineno)
        node.body.insert(0, nodes.ExprStmt(charge, lineno=node.lineno))
        return node

    def visit_Compare(self, node: nodes.Compare) -> nodes.Node:
        # a comparison scans its operands (``l == m`` of two 200 K lists, ``'b' in s``): each
        # operand goes through ``_sized``, which charges its size and returns it unchanged
        self.generic_visit(node)
        node.expr = _sized(node.expr)
        for op in node.ops:
            op.expr = _sized(op.expr)
        return node

    def visit_Getitem(self, node: nodes.Getitem) -> nodes.Node:
        # Jinja compiles a slice to plain Python slicing (no ``getitem`` hook): a copy, charged
        self.generic_visit(node)
        return _sized(node, "a slice") if isinstance(node.arg, nodes.Slice) else node

    def visit_Concat(self, node: nodes.Concat) -> nodes.Node:
        self.generic_visit(node)
        return nodes.Filter(nodes.Tuple(list(node.nodes), "load", lineno=node.lineno), "_concat",
                            [], [], None, None, lineno=node.lineno)


# the keywords Jinja passes to a macro call itself (the caller's frame, not data)
_FRAME_KWARGS = frozenset({"caller", "_loop_vars", "_block_vars"})


class BoundedSandbox(ImmutableSandboxedEnvironment):
    """See the module rules."""

    intercepted_binops = frozenset({"*", "**", "%", "+", "//", "/", "-"})

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.globals.pop("lipsum", None)
        self.globals["range"] = _range
        self.filters.pop("random", None)
        self.filters.update({
            **sizes.guarded_filters(),
            "sum": _sum,
            "_concat": _concat,
        })
        # every filter and test charges its work (F2/F3): wrapped once, here
        for name, func in list(self.filters.items()):
            self.filters[name] = cost.charging(name, func, "filter")
        for name, test in list(self.tests.items()):
            self.tests[name] = cost.charging(name, cast(Callable[..., Any], test), "test")
        self.filters["_steps"] = _count_steps  # charges per step itself
        self.filters["_charge_body"] = _charge_body
        self.filters["_sized"] = _charge_size

    def _parse(self, source: str, name: str | None, filename: str | None) -> nodes.Template:
        # Jinja's one parse hook (``parse`` and ``compile`` both call it; jinja2 >= 3.1): the
        # rewrite is in every compiled template, so no loop escapes the count
        tree = super()._parse(source, name, filename)
        return _CountLoops().visit(tree)

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        sizes.binop(operator, left, right)
        _steps().charge(cost.int_units(operator, left, right), f"'{operator}'")
        result = super().call_binop(context, operator, left, right)
        _steps().charge(1 + cost.check_size(result, f"'{operator}'"), f"'{operator}'")
        return result

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805
        steps = _steps()
        # a method works on its receiver too: ``s.count('a')`` scans all of ``s``
        units = CALL_COST + cost.size(getattr(__obj, "__self__", None)) + sum(cost.size(a) for a in args)
        units += sum(cost.size(v) for k, v in kwargs.items() if k not in _FRAME_KWARGS)
        steps.charge(units, "a call")
        sizes.check_method(__obj, args, kwargs)
        result = super().call(__context, __obj, *args, **kwargs)
        steps.charge(cost.check_size(result, "a call"), "a call")
        return result

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        fmt = super().wrap_str_format(value)
        if fmt is None:
            return None
        template = value.__self__

        def checked(*args: Any, **kwargs: Any) -> str:
            sizes.check_format_spec(template)
            return sizes.check_value(fmt(*args, **kwargs), "str.format")

        return checked


def bounded_render(tpl: jinja2.Template, ctx: dict[str, Any], max_chars: int,
                   steps: RenderBudget | None = None) -> tuple[str, bool]:
    """Render ``tpl`` with ``ctx`` under the bounds; stop once ``max_chars`` characters are out.
    Returns ``(text, truncated)``.  Raises whatever the template raises (``TemplateTooCostly``
    for a bound).  ``steps``: the counter to use (tests read ``steps.taken``)."""
    token = cost.start(steps if steps is not None else RenderBudget())
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
        cost.stop(token)
    text = "".join(out)
    return (text[:max_chars], truncated) if truncated else (text, False)
