"""``electron_stub.trace_json`` writes exactly the stdlib's ``json.dumps(x, ensure_ascii=False,
separators=(",", ":"))`` lines (issue 24: the trace by msgspec, byte-identical)."""
from __future__ import annotations

import json
import random

import pytest

from electron_stub import trace_json


def _stdlib(lines: list) -> str:
    return "".join(json.dumps(x, ensure_ascii=False, separators=(",", ":")) + "\n" for x in lines)


EDGES = [1e-05, 1e-07, 1e16, 1e22, -1e300, 1e-4, 9999999999999998.0, 0.0, -0.0, 1234.567,
         float("nan"), float("inf"), -float("inf"), 2 ** 63, 2 ** 64, -(2 ** 63) - 1, 2 ** 70, True, None,
         "é\u2028\x7f\x00\"\\🌹", [1, (2.5, 1e-9)], {"meta": {"k": [1e17]}}, {1: "int key"}]


@pytest.mark.parametrize("value", EDGES, ids=repr)
def test_a_line_is_the_stdlibs_text(value: object) -> None:
    lines = [{"at": 1.5, "event": "x", "v": value}, {"at": 2.0, "event": "y"}]
    assert trace_json.text(lines) == _stdlib(lines)
    assert "".join(map(trace_json.line, lines)) == _stdlib(lines)


def test_a_lone_surrogate_is_written_by_the_stdlib() -> None:
    lines = [{"at": 0.0, "event": "x", "s": "\ud800"}]
    assert trace_json.text(lines) == _stdlib(lines)  # msgspec refuses it; the stdlib writes it


def test_what_the_stdlib_cannot_write_raises_as_before() -> None:
    with pytest.raises(TypeError):
        trace_json.text([{"at": 0.0, "event": "x", "v": object()}])


def test_random_lines_match() -> None:
    rnd = random.Random(24)
    chars = [chr(i) for i in range(0x3000)]

    def value(depth: int = 0) -> object:
        r = rnd.random()
        if r < 0.3:
            return "".join(rnd.choice(chars) for _ in range(rnd.randint(0, 5)))
        if r < 0.6:
            return rnd.uniform(-1, 1) * 10 ** rnd.uniform(-8, 20)
        if r < 0.7:
            return rnd.choice([0, -1, 2 ** 63, 2 ** 65, True, False, None])
        if depth < 2:
            return {"k": value(depth + 1), "l": [value(depth + 1)]}
        return "x"

    for _ in range(500):
        lines = [{"at": round(rnd.uniform(0, 3e4), 3), "event": "e", "v": value()} for _ in range(3)]
        assert trace_json.text(lines) == _stdlib(lines)


def _nested(depth: int) -> list:
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("depth", [450, 700, 900])
def test_a_deep_line_the_stdlib_writes_is_written(depth: int) -> None:
    """brk33: the check (:func:`trace_json._plain`) recursed in Python, two frames a level, so a
    line nested 400-990 deep raised RecursionError where the stdlib (its C encoder) wrote it."""
    lines = [{"at": 0.0, "event": "x", "v": _nested(depth)}, {"at": 1.0, "event": "y", "d": {"k": _nested(depth)}}]
    assert trace_json.text(lines) == _stdlib(lines)
    assert "".join(map(trace_json.line, lines)) == _stdlib(lines)


def test_a_circular_line_raises_what_the_stdlib_raises() -> None:
    """brk33: a line that holds itself raised RecursionError from the check, not the stdlib's
    ValueError ("Circular reference detected")."""
    loop: dict = {"at": 0.0, "event": "x"}
    loop["self"] = loop
    seq: list = []
    seq.append(seq)
    for bad in (loop, {"at": 0.0, "event": "x", "v": seq}):
        with pytest.raises(ValueError, match="Circular reference"):
            trace_json.line(bad)
        with pytest.raises(ValueError, match="Circular reference"):
            trace_json.text([{"at": 0.0, "event": "ok"}, bad])
