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


CLOCKS = frozenset({"monotonic", "perf_counter", "time", "thread_time", "process_time"})


def _reads_a_clock(node: ast.AST) -> bool:
    return any(isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) and c.func.attr in CLOCKS
               for c in ast.walk(node))


def test_no_test_asserts_an_upper_bound_on_a_stopwatch():
    found = []
    for path in sorted(TESTS.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Assert):
                continue
            for cmp in (c for c in ast.walk(node.test) if isinstance(c, ast.Compare)):
                if (isinstance(cmp.left, ast.BinOp) and isinstance(cmp.left.op, ast.Sub)
                        and _reads_a_clock(cmp.left) and any(isinstance(op, (ast.Lt, ast.LtE)) for op in cmp.ops)):
                    found.append(f"{path.relative_to(TESTS)}:{node.lineno}: {ast.unparse(node.test)}")
    assert not found, "a stopwatch's upper bound measures the machine:\n" + "\n".join(found)
