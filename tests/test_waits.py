"""The suite's waits for what is not a test's subject are ones no loaded machine reaches
(``tests/waits.py``): every raw websocket connection a test opens names its handshake wait, and
the suite's bridge clients and spawned sidecars wait :data:`HANDSHAKE_S`.  And no test asserts a
stopwatch's upper bound (``assert clock() - t0 < N``): which bound ended a wait is shown by what
ended it (the error's message, the exit code, an order of events), never by how long it took —
that measures the machine too (the guide: no test may depend on how fast the machine is)."""
import ast
import re
from pathlib import Path

import bridge.client
from tests.waits import HANDSHAKE_S

TESTS = Path(__file__).resolve().parent
RAW = re.compile(r"(?<![.\w])(?:ws_)?connect\(f\"ws://")


def test_every_raw_websocket_connect_names_its_handshake_wait():
    missing = []
    for path in sorted(TESTS.rglob("*.py")):
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if RAW.search(line) and "open_timeout=" not in line:
                missing.append(f"{path.relative_to(TESTS)}:{n}: {line.strip()}")
    assert not missing, "websockets' 10 s default is reachable on a loaded machine:\n" + "\n".join(missing)


def test_the_suite_bridge_client_waits_the_suite_handshake():
    assert bridge.client.OPEN_TIMEOUT_S == HANDSHAKE_S  # tests/conftest.py


CLOCKS = frozenset({"monotonic", "perf_counter", "time", "thread_time", "process_time",
                    "monotonic_ns", "perf_counter_ns", "time_ns", "thread_time_ns", "process_time_ns"})
_BELOW = {ast.Lt: 0, ast.LtE: 0, ast.Gt: 1, ast.GtE: 1}  # which side of the operator is bounded above


def _is_clock(node: ast.AST) -> bool:
    """A clock's reading: ``time.monotonic()``, ``loop.time()``, an imported ``monotonic()``."""
    if not isinstance(node, ast.Call):
        return False
    f = node.func
    return (f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)) in CLOCKS


def _timed_names(scope: ast.AST) -> set[str]:
    """Names ``scope`` binds to something read from a clock (a reading, an elapsed time, a max of
    laps), directly or through another such name."""
    timed: set[str] = set()
    while True:
        before = len(timed)
        for n in ast.walk(scope):
            value = getattr(n, "value", None)
            if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and value is not None and _timed(value, timed):
                targets = n.targets if isinstance(n, ast.Assign) else [n.target]
                timed.update(t.id for t in targets if isinstance(t, ast.Name))
        if len(timed) == before:
            return timed


def _timed(node: ast.AST, timed: set[str]) -> bool:
    return any(_is_clock(c) or (isinstance(c, ast.Name) and c.id in timed) for c in ast.walk(node))


def _elapsed(node: ast.AST, timed: set[str]) -> bool:
    """A difference of clock readings, or a name bound to something clock-read."""
    return ((isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub) and _timed(node, timed))
            or (isinstance(node, ast.Name) and node.id in timed))


def stopwatch_bounds(source: str) -> list[str]:
    """The asserts of ``source`` that bound a stopwatch from above (line: test): an elapsed time
    (a difference of readings, or a name the file binds to one anywhere) on the small side of
    ``<``/``<=`` or the big side of ``>``/``>=``, in any link of a chained comparison."""
    tree = ast.parse(source)
    timed = _timed_names(tree)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Assert):
            continue
        for cmp in (c for c in ast.walk(node.test) if isinstance(c, ast.Compare)):
            sides = [cmp.left, *cmp.comparators]
            if any(type(op) in _BELOW and _elapsed(sides[i + _BELOW[type(op)]], timed)
                   for i, op in enumerate(cmp.ops)):
                found.append(f"{node.lineno}: {ast.unparse(node.test)}")
                break
    return found


def test_no_test_asserts_an_upper_bound_on_a_stopwatch():
    found = [f"{path.relative_to(TESTS)}:{line}" for path in sorted(TESTS.rglob("*.py"))
             for line in stopwatch_bounds(path.read_text(encoding="utf-8"))]
    assert not found, "a stopwatch's upper bound measures the machine:\n" + "\n".join(found)


# the forms a stopwatch's upper bound takes in this suite's history and in ordinary Python
STOPWATCHES = {
    "attribute": "t0 = time.monotonic()\nassert time.monotonic() - t0 < 2",
    "loop time": "t0 = loop.time()\nassert loop.time() - t0 <= 2",
    "imported clock": "from time import monotonic\nt0 = monotonic()\nassert monotonic() - t0 < 2",
    "nanoseconds": "t0 = time.monotonic_ns()\nassert time.monotonic_ns() - t0 < 2_000_000_000",
    "reversed": "t0 = time.monotonic()\nassert 2 > time.monotonic() - t0",
    "chained": "t0 = time.monotonic()\nassert 0 <= time.monotonic() - t0 < 2",
    "named elapsed": "t0 = time.monotonic()\nwork()\ntook = time.monotonic() - t0\nassert took < 2, took",
    "two readings": "t0 = time.perf_counter()\nwork()\nt1 = time.perf_counter()\nassert t1 - t0 < 2",
    "max of laps": "worst = 0.0\nt0 = time.monotonic()\nworst = max(worst, time.monotonic() - t0)\nassert worst < 1.0",
}
NOT_STOPWATCHES = {
    "lower bound": "t0 = time.monotonic()\nassert time.monotonic() - t0 >= 1",
    "a wait's loop": "t0 = time.monotonic()\nwhile time.monotonic() - t0 < 5:\n    pass",
    "no clock": "assert len(rows) - 1 < 2",
    "attribute lower bound": "assert sc.exit_s is not None and sc.exit_s >= slow",
}


def test_the_guard_finds_every_form_of_a_stopwatch_bound():
    missed = [name for name, src in STOPWATCHES.items() if not stopwatch_bounds(src)]
    wrong = [name for name, src in NOT_STOPWATCHES.items() if stopwatch_bounds(src)]
    assert (missed, wrong) == ([], [])
