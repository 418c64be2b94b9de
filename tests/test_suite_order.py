"""The suite's run order under xdist (tests/conftest.py): every :data:`LONG_FIRST` entry still
names a collected test (a renamed test would silently lose its early start), and the order puts
the groups first, the long tests next in the table's order, the rest after them."""
from __future__ import annotations

import subprocess
import sys

from tests.conftest import LONG_FIRST, ROOT, run_order


def test_every_long_first_entry_names_a_collected_test():
    files = sorted({e.split("::", 1)[0] for e in LONG_FIRST})
    r = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:xdist",
                        "-p", "no:cacheprovider", *files], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    ids = [ln.strip() for ln in r.stdout.splitlines() if "::" in ln]
    missing = [e for e in LONG_FIRST if not any(i.startswith(e) for i in ids)]
    assert missing == [], f"LONG_FIRST entries that name no test: {missing}"


def test_groups_then_long_tests_in_order_then_the_rest():
    ids = ["tests/a.py::t", LONG_FIRST[2] + "[x]", "tests/integration/test_shift.py::t", LONG_FIRST[0], "tests/b.py::t"]
    slow = {"tests/integration/test_shift.py::t"}
    assert sorted(ids, key=lambda i: run_order(i, i in slow)) == [
        "tests/integration/test_shift.py::t", LONG_FIRST[0], LONG_FIRST[2] + "[x]", "tests/a.py::t", "tests/b.py::t"]
