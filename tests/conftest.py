import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for p in (ROOT, ROOT / "electron-stub"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

SHARED = ROOT.parent / "shared"


# ---- progress while slow tests run (issue 7 item 5) ---------------------------------------------
import os  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402

import pytest  # noqa: E402

HEARTBEAT_S = float(os.environ.get("TEST_HEARTBEAT_S", 30))


WORKER = os.environ.get("PYTEST_XDIST_WORKER")  # "gw0"… inside a pytest-xdist worker, else None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """A slow test (shift replay, frozen build — often in its fixtures) says it started and,
    every 30 s, that it is still running — otherwise ``./run test`` looks stuck on one dot.
    In a pytest-xdist worker (``./run test`` runs the suite in several) the terminal reporter
    writes nowhere visible, so the lines go to the worker's stderr, which is the terminal's."""
    tr = item.config.pluginmanager.get_plugin("terminalreporter")
    if item.get_closest_marker("slow") is None or tr is None:
        yield
        return
    capman = item.config.pluginmanager.getplugin("capturemanager")

    def say(line: str) -> None:
        if WORKER is not None:
            sys.__stderr__.write(f"\n[{WORKER}] {line}\n")
            sys.__stderr__.flush()
        else:
            tr.write("\n")  # -q prints dots without ending the line
            tr.write_line(line)

    say(f"slow test started: {item.nodeid}")
    stop = threading.Event()
    t0 = time.monotonic()

    def beat() -> None:
        while not stop.wait(HEARTBEAT_S):
            line = f"  … still running {item.nodeid} ({time.monotonic() - t0:.0f} s)"
            if capman is None:
                say(line)
                continue
            with capman.global_and_fixture_disabled():  # the test's output is being captured
                say(line)

    threading.Thread(target=beat, name="slow-test-heartbeat", daemon=True).start()
    try:
        yield
    finally:
        stop.set()


# ---- running in parallel (pytest-xdist; ./run test passes -n and --dist loadgroup) ----------------
#: tests that share one expensive module/session fixture run in one worker, so it is made once:
#: the shift's two replays (``runs``) and the frozen binary (``frozen``).  Each is also marked
#: ``xdist_group`` in its module; pytest-xdist 3.8 cannot honour that mark on pytest ≥ 9.2 (it
#: renames ``item._nodeid``, which pytest no longer reads: the shift was replayed in 4 workers at
#: once), so the scheduler below groups by this table and collection checks the two agree.
XDIST_GROUPS = {"tests/integration/test_shift.py::": "shift", "tests/packaging/": "frozen"}


def xdist_group_of(nodeid: str) -> str | None:
    return next((g for prefix, g in XDIST_GROUPS.items() if nodeid.startswith(prefix)), None)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadgroup`` that groups by :data:`XDIST_GROUPS` (every other test is its own unit;
    xdist starts the biggest units — the groups — first)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class TableGroupScheduling(LoadGroupScheduling):
        def _split_scope(self, nodeid: str) -> str:
            group = xdist_group_of(nodeid)
            return group if group is not None else super()._split_scope(nodeid)

    return TableGroupScheduling(config, log)


def pytest_collection_modifyitems(session, config, items):
    """The ``xdist_group`` marks and :data:`XDIST_GROUPS` must agree (a new shared fixture needs
    both).  Under xdist the long poles start first: the slow tests go to the front, so the rest
    of the suite runs beside them instead of after them.  The order is deterministic (every
    worker must collect the same list)."""
    for it in items:
        mark = it.get_closest_marker("xdist_group")
        marked = (mark.args[0] if mark.args else mark.kwargs.get("name", "default")) if mark else None
        if marked != xdist_group_of(it.nodeid.split("@", 1)[0]):
            raise pytest.UsageError(f"{it.nodeid}: xdist_group mark {marked!r} but tests/conftest.py "
                                    f"XDIST_GROUPS says {xdist_group_of(it.nodeid)!r}; make them agree")
    if getattr(config.option, "numprocesses", None) or WORKER is not None:
        items.sort(key=lambda it: it.get_closest_marker("slow") is None)  # stable: keeps the rest's order
