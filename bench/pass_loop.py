"""An RU Online pass that changes nothing (issue 24 lever 3), as a script that runs against
whatever tree it is started in — this one or an older commit's (``git archive <commit> | tar -x
-C /tmp/old``) — so two versions are measured with the same loop and interpreter.  Prints
``passes cpu_us_per_pass``.

    python bench/pass_loop.py MINUTES          # from the tree to measure (cwd)

Instructions per pass (valgrind, deterministic): run ``MINUTES`` and 0 and divide the difference
by the passes the first run printed::

    PYTHONHASHSEED=0 valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null \\
        .venv/bin/python bench/pass_loop.py 60      # "I refs", then again with 0

The world (the unit tests' driver and :class:`tests.sidecar.world.World`, every service on): one
Golden TU, 150 favorites (every tenth white, every tenth inactive, every tenth a freeloader),
30 online RUs — 20 favorites, 10 not — whose chat history the first passes read; the TU mailed
each favorite 2 h before, so the 6 h source finds nothing to do for 4 h.  After a warm-up of 5
minutes the online set stays as it is: every Golden grid pass (every 15 s) changes nothing."""
from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.getcwd())  # the tree being measured, not this file's


def world():  # type: ignore[no-untyped-def]
    from tests.sidecar.world import T0, World, fav

    w = World("golden", "g-tu-1", 3, follow_up_mail=True)
    favs = []
    for i in range(150):
        kw = {}
        if i % 10 == 1:
            kw["is_white"] = True
        elif i % 10 == 2:
            kw["active"] = False
        elif i % 10 == 3:
            kw["spend_total_usd"] = 0.0
        favs.append(fav(f"ru-{i:03d}", "golden", **kw))
        w.mails[f"ru-{i:03d}"] = [{"id": f"ml-{i}", "from": "tu", "at": T0 - 7200.0}]
        w.chat[f"ru-{i:03d}"] = [{"id": f"c-{i}", "from": "tu", "at": T0 - 7200.0, "kind": "message"}]
    for i in range(20):
        w.online.add(f"ru-{i * 7 % 150:03d}")
    for i in range(10):
        w.online.add(f"x-ru-{i:02d}")
    w.login(favs)
    return w, T0


def main() -> None:
    minutes = int(sys.argv[1])
    w, t0 = world()
    w.at(300.0)  # warm-up: the chat history reads, the first refusals logged
    d = w.d
    passes0 = sum(1 for r in d.requests if r[1] == "online_ru")
    start = time.process_time()
    for m in range(minutes):
        w.at(300.0, 60.0 * (m + 1))
        d.ops.clear()
        d.notes.clear()
    cpu = time.process_time() - start
    passes = sum(1 for r in d.requests if r[1] == "online_ru") - passes0
    print(f"{passes} {cpu / passes * 1e6:.0f}" if passes else "0 0")


if __name__ == "__main__":
    main()
