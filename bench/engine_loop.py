"""The engine bench's loop (:func:`bench.__main__.engine_only`) as a script that runs against
whatever tree it is started in — this one or an older commit's (``git archive <commit> | tar
-x -C /tmp/old``) — so two versions of the engine are measured with the same loop and the same
interpreter.  Prints ``cpu_eps wall_eps``.

    python bench/engine_loop.py N [gc|nogc]          # from the tree to measure (cwd)

On a shared machine CPU time still moves with the load; instructions do not.  Instructions per
event (valgrind, deterministic to <0.1 %): run N and 0 events and divide the difference by N::

    PYTHONHASHSEED=0 valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null \\
        .venv/bin/python bench/engine_loop.py 2000 nogc     # "I refs", then again with 0

``N`` chat messages from new RUs to one Chathouse TU, each a step that creates an Unanswered
message task; the driver's ops/notes lists are dropped every 1000 events as the app drops what it
committed and sent (bench/README.md has the figures)."""
from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.getcwd())  # the tree being measured, not this file's


def main() -> None:
    n = int(sys.argv[1])
    mode = sys.argv[2] if len(sys.argv) > 2 else "nogc"
    try:
        from tests.sidecar.driver import Driver
    except ImportError:  # before the runtime's room (81b79b5) the driver lived in sidecar/
        from sidecar.driver import Driver  # type: ignore[no-redef]
    from bench import bridge_bench
    d = Driver(lambda tu, m, p: {"dialogs": [], "mails": []}, seed=1)
    t0 = 1796025600.0
    d.advance_to(t0)
    d.login("c-tu-1", "chathouse")
    if mode == "gc":
        try:
            from sidecar.cli import gcpolicy
            gcpolicy.apply()
        except ImportError:  # older trees have no serving GC policy
            pass
    start, cpu = time.perf_counter(), time.process_time()
    for i in range(n):
        d.advance_to(t0 + i * 0.01)
        d.event("c-tu-1", "chathouse", "Send", bridge_bench.event(i, t0 + i * 0.01)["data"])
        if i % 1000 == 999:
            d.ops.clear()
            d.notes.clear()
    el, cpu = time.perf_counter() - start, time.process_time() - cpu
    print(f"{n / cpu:.0f} {n / el:.0f}" if n else "0 0")


if __name__ == "__main__":
    main()
