import sys
from pathlib import Path

# pytest keeps the assert-rewritten test modules (``__pycache__/*-pytest-*.pyc``) only where
# Python may write bytecode.  CI images (and the shared dev machine) set PYTHONDONTWRITEBYTECODE,
# so every pytest-xdist worker and every pytest subprocess of the suite parsed and rewrote all
# ~330 test modules again: 6.6 CPU-s per collection, 2.2 s with the cache (issue 24, branch
# i24-suite).  ``./run`` writes the checkout's own bytecode for the same reason (compile_sources);
# reading the cache never depends on this flag, so only the writing is switched back on, here,
# before any test module is imported.
sys.dont_write_bytecode = False

ROOT = Path(__file__).resolve().parents[1]
for p in (ROOT, ROOT / "electron-stub"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

# hypothesis' default 200 ms deadline per example is wall-clock time: on the shared, loaded
# machine it failed tests whose code was fine (brk33, tests/test_hypothesis_profile.py).  The
# examples' count and the checks stay each test's own; only the deadline is gone, suite-wide.
from hypothesis import settings as _hypothesis_settings  # noqa: E402

_hypothesis_settings.register_profile("suite", deadline=None)
_hypothesis_settings.load_profile("suite")

from tests.shared_dir import AVAILABLE as SHARED_AVAILABLE  # noqa: E402
from tests.shared_dir import REASON as SHARED_REASON  # noqa: E402
from tests.shared_dir import SHARED  # noqa: E402
from tests.waits import HANDSHAKE_S  # noqa: E402
import bridge.client  # noqa: E402

# a test's bridge client waits for its handshake and auth answer what no loaded machine reaches
# (tests/waits.py); a test about that wait passes ``open_timeout`` itself
bridge.client.OPEN_TIMEOUT_S = HANDSHAKE_S


# ---- progress while slow tests run (issue 7 item 5) ---------------------------------------------
import os  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402

import pytest  # noqa: E402

HEARTBEAT_S = float(os.environ.get("TEST_HEARTBEAT_S", 30))


WORKER = os.environ.get("PYTEST_XDIST_WORKER")  # "gw0"… inside a pytest-xdist worker, else None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """A slow test (shift replay, frozen build — often in its fixtures) says it started; any test
    still running after 30 s says so every 30 s — otherwise ``./run test`` looks stuck on one dot,
    and a test that hangs is named in the log (stop 28: CI ran out of time at 1,735 of 1,738 tests
    with no line saying which; pytest-timeout then ends it, see pyproject.toml).  In a
    pytest-xdist worker (``./run test`` runs the suite in several) the terminal reporter writes
    nowhere visible, so the lines go to the worker's stderr, which is the terminal's."""
    tr = item.config.pluginmanager.get_plugin("terminalreporter")
    if tr is None:
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

    if item.get_closest_marker("slow") is not None:
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
#: the shift's two replays (``runs``), the frozen binary (``frozen``) and the captured frames of
#: tests/contract (``captured``, read by the ajv and the jsonschema checks).  Each is also marked
#: ``xdist_group`` in its module; pytest-xdist 3.8 cannot honour that mark on pytest ≥ 9.2 (it
#: renames ``item._nodeid``, which pytest no longer reads: the shift was replayed in 4 workers at
#: once), so the scheduler below groups by this table and collection checks the two agree.
XDIST_GROUPS = {"tests/integration/test_shift.py::": "shift", "tests/packaging/": "frozen",
                "tests/contract/test_schema.py::test_real_frames": "capture", "tests/clients/": "capture"}


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


#: tests known to run long on their own (≥ ~15 s each, and 80–250 s for the first ones, on a loaded
#: 2-core machine; ``--durations`` of a full run), longest first.  Under xdist they start right
#: after the groups: units are dealt in collection order, and one that starts late becomes the
#: run's tail (the 50-cycle stress test started at 6 min of a 12 min run, the signal tests at
#: 7–8 min).  Entries are node id prefixes; tests/test_suite_order.py checks each names a test.
LONG_FIRST = (
    "tests/integration/test_shutdown_stress.py::test_sigterm_after_login_and_disconnect_always_exits_within_2_s",
    "tests/integration/test_stop_signals.py::test_a_signal_right_after_ready_is_a_clean_exit_0",
    "tests/integration/test_shutdown_stress.py::test_other_stop_requests_after_login_and_disconnect_exit_within_2_s",
    "tests/integration/test_seed_scenarios.py::test_seed_scenario[r03_dedup_window]",
    "tests/electron_stub/test_stub_batched.py::test_batched_replay_equals_one_by_one_on_seed_scenarios[r03_dedup_window]",
    "tests/bench/test_bench_quick.py::test_quick_bench_prints_every_figure_beside_its_limit",
    "tests/integration/test_bad_input.py::test_far_future_advance_is_cut_off_and_other_frames_are_served",
    "tests/electron_stub/test_stub_batched.py::test_batched_replay_equals_one_by_one_on_the_generated_demo_shift",
    "tests/electron_stub/test_stub_batched.py::test_batched_replay_equals_one_by_one_on_a_generated_smoke_shift",
    "tests/sidecar/test_follow_up_mail_service.py::test_burst_rolls_through_the_service_hit_half_within_4_sigma",
    "tests/electron_stub/test_stub_replay_e2e.py::test_no_idempotency_key_is_reused_for_a_different_write_over_a_shift_like_replay",
    "tests/integration/test_stop_signals.py::test_a_second_signal_during_a_busy_shutdown_exits_at_once_with_128_plus_n",
    "tests/electron_stub/test_stub_scale.py::test_harness_cost_per_event_is_flat_from_12_to_60_tus",
    "tests/router/test_router_durability.py::test_sigkill_between_claim_send_and_settle_delivers_exactly_once",
    "tests/electron_stub/test_stub_trace_canonical.py::test_two_replays_of_one_scenario_write_byte_identical_traces",
    "tests/integration/test_seed_scenarios.py::test_seed_scenario[k05_unconfirmed_extends_then_fail_open]",
    "tests/integration/test_why.py::test_why_on_the_bridge_and_the_cli",
    "tests/test_lint.py::test_mypy_is_clean",
)


def run_order(nodeid: str, slow: bool) -> tuple[int, int]:
    """Where a test goes under xdist: the slow ones (the groups) first, then :data:`LONG_FIRST`
    in its order, then the rest (the sort is stable: they keep the collection's order)."""
    if slow:
        return (0, 0)
    rank = next((i for i, prefix in enumerate(LONG_FIRST) if nodeid.startswith(prefix)), None)
    return (1, rank) if rank is not None else (2, 0)


@pytest.fixture
def shared_dir() -> Path:
    """``../shared`` (:mod:`tests.shared_dir`); a test that takes it is marked ``shared``, so it
    is skipped with the reason where ../shared is absent."""
    return SHARED


def mark_shared(items) -> None:
    """Every test that reads ../shared — marked ``shared``, or taking the ``shared_dir`` fixture
    (which marks it) — is skipped, with :data:`SHARED_REASON`, where ../shared is absent (a
    user's clone, or CI's run with it made invisible: issue 18 item 1).  The skip goes first, so
    its reason is the one reported (a parametrization over ../shared's files is empty there)."""
    for it in items:
        if "shared_dir" in getattr(it, "fixturenames", ()) and it.get_closest_marker("shared") is None:
            it.add_marker(pytest.mark.shared)
        if not SHARED_AVAILABLE and it.get_closest_marker("shared") is not None:
            it.add_marker(pytest.mark.skip(reason=SHARED_REASON), append=False)


def pytest_collection_modifyitems(session, config, items):
    """Tests that read ../shared skip where it is absent (:func:`mark_shared`).  The ``xdist_group`` marks and :data:`XDIST_GROUPS` must agree (a new shared fixture needs
    both).  Under xdist the long poles start first: the slow tests go to the front, then the long
    ones (:func:`run_order`), so the rest of the suite runs beside them instead of after them.
    The order is deterministic (every worker must collect the same list)."""
    mark_shared(items)
    for it in items:
        mark = it.get_closest_marker("xdist_group")
        marked = (mark.args[0] if mark.args else mark.kwargs.get("name", "default")) if mark else None
        if marked != xdist_group_of(it.nodeid.split("@", 1)[0]):
            raise pytest.UsageError(f"{it.nodeid}: xdist_group mark {marked!r} but tests/conftest.py "
                                    f"XDIST_GROUPS says {xdist_group_of(it.nodeid)!r}; make them agree")
    if getattr(config.option, "numprocesses", None) or WORKER is not None:
        items.sort(key=lambda it: run_order(it.nodeid, it.get_closest_marker("slow") is not None))


# ---- the harness's reference Stack on loopback ---------------------------------------------------
@pytest.fixture
def stack():
    """``electron_stub.stack_server.StackServer(seed=1)`` started on loopback (``.url``), stopped
    after the test; a module that needs another one (a clock, no seed) defines its own ``stack``."""
    from electron_stub.stack_server import StackServer
    server = StackServer(seed=1)
    server.start()
    yield server
    server.stop()
