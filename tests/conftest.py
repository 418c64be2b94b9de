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


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """A slow test (shift replay, frozen build — often in its fixtures) says it started and,
    every 30 s, that it is still running — otherwise ``./run test`` looks stuck on one dot."""
    tr = item.config.pluginmanager.get_plugin("terminalreporter")
    if item.get_closest_marker("slow") is None or tr is None:
        yield
        return
    tr.write("\n")  # -q prints dots without ending the line
    tr.write_line(f"slow test started: {item.nodeid}")
    stop = threading.Event()
    t0 = time.monotonic()

    capman = item.config.pluginmanager.getplugin("capturemanager")

    def beat() -> None:
        while not stop.wait(HEARTBEAT_S):
            line = f"  … still running {item.nodeid} ({time.monotonic() - t0:.0f} s)"
            if capman is None:
                tr.write("\n")
                tr.write_line(line)
                continue
            with capman.global_and_fixture_disabled():  # the test's output is being captured
                tr.write("\n")
                tr.write_line(line)

    threading.Thread(target=beat, name="slow-test-heartbeat", daemon=True).start()
    try:
        yield
    finally:
        stop.set()
