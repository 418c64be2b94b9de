"""Templates cost bounded work (issue 9, a breaker's find: ``{% for %}`` over huge ranges or
``'x' * 10**9`` in a rule's template blocked the event loop for 7–10 s).  Asserted on the work a
render did (loop steps, memory, output size), never on wall time."""
from __future__ import annotations

import tracemalloc

import pytest

from sidecar.router.model import Event
from sidecar.router.render import MAX_TEXT, TemplateFailure, compile_template, render
from sidecar.router.route import route
from sidecar.router.sandbox import MAX_STEPS, Steps

from routerhelp import T0, TARGETS, make_state

EV = Event(source="electron", subject="alert", action="fired", priority="normal",
           payload={"s": "y" * 1000, "ts": 1_764_489_600, "items": ["a", "b", "c"], "n": 3})

HOSTILE_LOOPS = [
    "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
    "{% for i in range(10**7) %}x{% endfor %}",
    "{% for a in payload['items'] %}{% for i in range(50000) %}{% for j in range(50000) %}{% endfor %}{% endfor %}{% endfor %}",
    "{% macro m() %}{% for i in range(9000) %}{% endfor %}{% endmacro %}{% for k in range(100) %}{{ m() }}{% endfor %}",
    "{% set ns = namespace(x=0) %}{% for i in range(99999) %}{% set ns.x = ns.x + 1 %}{% endfor %}{{ ns.x }}",
]

HOSTILE_SIZES = [
    "{{ 'x' * 10**9 }}",
    "{{ 10**9 * 'x' }}",
    "{{ [0] * 10**9 }}",
    "{{ 10 ** 100000000 }}",
    "{% set ns = namespace(x=3) %}{% for i in range(40) %}{% set ns.x = ns.x * ns.x %}{% endfor %}",
    "{% set ns = namespace(s='ab') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
    "{% set ns = namespace(s='ab') %}{% for i in range(40) %}{% set ns.s = ns.s + ns.s %}{% endfor %}",
    "{% set ns = namespace(s='aaaa') %}{% for i in range(40) %}{% set ns.s = ns.s|replace('a', ns.s) %}{% endfor %}",
    "{% set ns = namespace(s='aaaa') %}{% for i in range(40) %}{% set ns.s = ns.s.replace('a', ns.s) %}{% endfor %}",
    "{{ '%0999999999d' % 1 }}",
    "{{ '%*d' % (999999999, 1) }}",
    "{{ '%0999999999d'|format(1) }}",
    "{{ '{:>999999999}'.format(1) }}",
    "{{ '{:>{w}}'.format(1, w=999999999) }}",
    "{{ 'x'.center(999999999) }}",
    "{{ 'x'.zfill(999999999) }}",
    "{{ '\t'.expandtabs(999999999) }}",
    "{{ 'x'|center(999999999) }}",
    "{{ 'x'|indent(999999999) }}",
    "{{ range(10)|slice(999999999)|list }}",
    "{% set ns = namespace(s='ab') %}{% for i in range(30) %}{% set ns.s = [ns.s, ns.s]|join(ns.s) %}{% endfor %}",
    "{% set ns = namespace(s='ab') %}{% for i in range(30) %}{% set ns.s = ns.s.join([ns.s, ns.s]) %}{% endfor %}",
]


@pytest.mark.parametrize("template", HOSTILE_LOOPS)
def test_loops_stop_at_the_step_budget(template):
    steps = Steps()
    with pytest.raises(TemplateFailure, match="too costly: more than 10000 loop steps"):
        render(template, EV, steps)
    assert steps.taken <= MAX_STEPS  # stopped at the step that would pass the budget


@pytest.mark.parametrize("template", HOSTILE_SIZES)
def test_huge_values_are_refused_before_they_are_made(template):
    tracemalloc.start()
    try:
        with pytest.raises(TemplateFailure, match="too costly|refused"):
            render(template, EV)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 * 1024 * 1024  # never allocated the value it was asked for


def test_output_stops_at_the_message_cap():
    steps = Steps()
    ev = Event(source="e", subject="s", action="a", payload={"s": "y" * 1000, "many": list(range(5000))})
    text = render("{% for i in payload.many %}{{ payload.s }}{% endfor %}", ev, steps)
    assert len(text) == MAX_TEXT and text.endswith("…")
    assert steps.taken == MAX_TEXT // 1000 + 1  # five loop steps of 5000: the render stopped there
    assert render("{{ payload.s }}", EV) == "y" * 1000  # under the cap: untouched


def test_ordinary_templates_still_work():
    assert render("{{ '%d'|format(payload.ts) }} {{ '{:d}'.format(payload.ts) }}", EV) == \
        "1764489600 1764489600"
    assert render("{{ payload['items']|join(', ') }}|{% for i in range(payload.n) %}{{ i }}{% endfor %}", EV) == \
        "a, b, c|012"
    assert render("{{ '%-5s|' % 'ab' }}{{ 'x'|center(5) }}{{ payload.ts * 2 }}{{ 2 ** 10 }}", EV) == \
        "ab   |  x  35289792001024"
    assert render("{{ payload.missing.deeper }}{{ payload.s[:3] ~ '!' }}", EV) == "yyy!"
    assert render("{% for i in range(9000) %}{% endfor %}ok", EV) == "ok"  # under the budget
    assert render("{% for x in payload['items'] %}{% for i in range(3000) %}{% endfor %}{% endfor %}ok", EV) == "ok"


def test_nothing_random():
    for template in ("{{ payload['items']|random }}", "{{ lipsum(2) }}"):
        with pytest.raises(TemplateFailure):
            compile_template(template) and render(template, EV)


def test_a_costly_template_fails_only_its_delivery_with_a_clear_reason():
    st = make_state({"name": "r", "actions": [
        {"target": "ops-telegram", "template": "{% for i in range(10**5) %}{% for j in range(10**5) %}{% endfor %}{% endfor %}"},
        {"target": "audit"}]})
    r = route(st, [EV], T0, TARGETS)
    first, second = r.deliveries
    assert (first.status, second.status) == ("failed", "pending")
    assert first.last_error.startswith("terminal: template too costly: more than 10000 loop steps")
