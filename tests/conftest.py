import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for p in (ROOT, ROOT / "electron-stub"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

SHARED = ROOT.parent / "shared"


# ---- progress while slow tests run (issue 7 item 5) ---------------------------------------------
import threading  # noqa: E402
import time  # noqa: E402

import pytest  # noqa: E402

HEARTBEAT_S = 30.0


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    """A slow test (shift replay, frozen build) says it started and, every 30 s, that it is
    still running — otherwise ``./run test`` looks stuck for minutes on one dot."""
    tr = item.config.pluginmanager.get_plugin("terminalreporter")
    if item.get_closest_marker("slow") is None or tr is None:
        yield
        return
    tr.write_line(f"slow test started: {item.nodeid}")
    stop = threading.Event()
    t0 = time.monotonic()

    def beat() -> None:
        while not stop.wait(HEARTBEAT_S):
            tr.write_line(f"  … still running {item.nodeid} ({time.monotonic() - t0:.0f} s)")

    threading.Thread(target=beat, name="slow-test-heartbeat", daemon=True).start()
    try:
        yield
    finally:
        stop.set()
