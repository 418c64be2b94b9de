"""The suite's run order under xdist (tests/conftest.py): every :data:`LONG_FIRST` entry still
names a collected test (a renamed test would silently lose its early start) — with ../shared and
without it (a user's clone has none: issue 18 item 1) — and the order puts the groups first, the
long tests next in the table's order, the rest after them."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import LONG_FIRST, ROOT, run_order
from tests.shared_dir import AVAILABLE, ENV


def _collect(shared: str | None, *args: str) -> list[str]:
    """The node ids pytest collects from LONG_FIRST's files; ``shared``: the value of
    SIDECAR_SHARED_DIR (None: this process's environment)."""
    env = dict(os.environ)
    if shared is not None:
        env[ENV] = shared
    files = sorted({e.split("::", 1)[0] for e in LONG_FIRST})
    r = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:xdist",
                        "-p", "no:cacheprovider", *args, *files],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    return [ln.strip() for ln in r.stdout.splitlines() if "::" in ln]


def unnamed(entries, ids: list[str], shared_ids: list[str] | None) -> list[str]:
    """The entries that name no collected test.  ``shared_ids`` (the ``shared`` tests, when
    ../shared is absent): an entry of a test whose parameters are ../shared's files (a seed
    scenario) names none there, and counts as named when its test function is a shared one."""
    def named(e: str) -> bool:
        if any(i.startswith(e) for i in ids):
            return True
        function = e.split("[", 1)[0]
        return shared_ids is not None and any(i.startswith(function + "[") or i == function for i in shared_ids)
    return [e for e in entries if not named(e)]


@pytest.mark.parametrize("shared", ["present", "absent"])
def test_every_long_first_entry_names_a_collected_test(shared, tmp_path):
    if shared == "present":
        if not AVAILABLE:
            pytest.skip(f"../shared is absent here (set {ENV}); CI checks this collection")
        missing = unnamed(LONG_FIRST, _collect(None), None)
    else:
        nowhere = str(tmp_path / "no-shared")  # ../shared made invisible, as on a user's clone
        missing = unnamed(LONG_FIRST, _collect(nowhere), _collect(nowhere, "-m", "shared"))
    assert missing == [], f"LONG_FIRST entries that name no test ({shared} ../shared): {missing}"


def test_an_entry_of_a_shared_parametrization_is_named_only_where_shared_is_absent():
    e = "tests/x.py::test_seed[r03]"
    assert unnamed([e], ["tests/x.py::test_seed[NOTSET]"], None) == [e]  # with ../shared: a real miss
    assert unnamed([e], ["tests/x.py::test_seed[NOTSET]"], ["tests/x.py::test_seed[NOTSET]"]) == []
    assert unnamed([e], ["tests/x.py::test_other"], ["tests/x.py::test_other"]) == [e]  # a renamed test


def test_groups_then_long_tests_in_order_then_the_rest():
    ids = ["tests/a.py::t", LONG_FIRST[2] + "[x]", "tests/integration/test_shift.py::t", LONG_FIRST[0], "tests/b.py::t"]
    slow = {"tests/integration/test_shift.py::t"}
    assert sorted(ids, key=lambda i: run_order(i, i in slow)) == [
        "tests/integration/test_shift.py::t", LONG_FIRST[0], LONG_FIRST[2] + "[x]", "tests/a.py::t", "tests/b.py::t"]
