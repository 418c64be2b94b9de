"""Where a ``platform.event``'s time goes on its way to ``task.created`` (issue 11): the stamps of
:mod:`bench.stage_probe` (sidecar) and of the bench (send, receive) turned into per-stage
quantiles.

Stages of event k (each ``a→b`` is ``b - a`` in ms; the stamps are module
:mod:`bench.stage_probe`'s):

* ``send→queued`` — the client's send, the kernel, the sidecar's reader (``ws.recv``, decode);
* ``queued→taken`` — waiting in the inbound queue for the one worker (a group in flight);
* ``taken→commit`` — from the worker taking it to its group's commit starting: the steps of
  the group (its own and those around it) and the ops' compile;
* ``commit→thread`` — the hop onto aiosqlite's connection thread;
* ``thread`` — BEGIN … COMMIT on that thread (the SQLite work itself);
* ``thread→loop`` — the hop back (the loop wakes on aiosqlite's future);
* ``loop→notified`` — from the commit's end to its ``task.created`` in the stream;
* ``notified→written`` — the writer task sending the frame;
* ``written→client`` — the kernel and the client's read loop.

``total`` is send → client; ``in the sidecar`` is queued → written, the part the sidecar's own
work and waits make (the rest is the client, the kernel and the scheduler).  Events lost on the
way (none in a good run) are left out.
"""
from __future__ import annotations

import statistics
from typing import Any

STAGES = ("send→queued", "queued→taken", "taken→commit", "commit→thread", "thread",
          "thread→loop", "loop→notified", "notified→written", "written→client", "total",
          "in the sidecar")


def _q(xs: list[float]) -> dict[str, float]:
    if len(xs) < 2:
        return {"p50": float("nan"), "p95": float("nan"), "p99": float("nan"), "max": float("nan")}
    q = statistics.quantiles(xs, n=100)
    return {"p50": q[49], "p95": q[94], "p99": q[98], "max": max(xs)}


def breakdown(sent: list[float], received: list[float | None], probe: dict[str, Any]) -> dict:
    """Per-stage quantiles (ms), group sizes, commits and thread hops per event, GC pauses and
    CPU by thread.  ``sent[k]`` / ``received[k]``: the bench's stamps of event k (None: its
    ``task.created`` never came)."""
    n = len(sent)
    queued, taken = probe["queued"], probe["taken"]
    notified, written, commit_of = probe["notified"], probe["written"], probe["commit_of"]
    commits = probe["commits"]
    counts = {"sent": n, "queued": len(queued), "taken": len(taken), "notified": len(notified),
              "written": len(written), "received": sum(r is not None for r in received)}
    per: dict[str, list[float]] = {s: [] for s in STAGES}
    m = min(n, len(queued), len(taken), len(notified), len(written))
    for k in range(m):
        if received[k] is None:
            continue
        c = commits[commit_of[k]] if commit_of[k] >= 0 else None
        if c is None or "thread_start" not in c or c["start"] < taken[k]:
            continue  # not this event's commit (the counts do not line up): leave it out
        ms = 1000.0
        per["send→queued"].append((queued[k] - sent[k]) * ms)
        per["queued→taken"].append((taken[k] - queued[k]) * ms)
        per["taken→commit"].append((c["start"] - taken[k]) * ms)
        per["commit→thread"].append((c["thread_start"] - c["start"]) * ms)
        per["thread"].append((c["thread_end"] - c["thread_start"]) * ms)
        per["thread→loop"].append((c["end"] - c["thread_end"]) * ms)
        per["loop→notified"].append((notified[k] - c["end"]) * ms)
        per["notified→written"].append((written[k] - notified[k]) * ms)
        per["written→client"].append((received[k] - written[k]) * ms)
        per["total"].append((received[k] - sent[k]) * ms)
        per["in the sidecar"].append((written[k] - queued[k]) * ms)
    groups = probe["groups"]
    gc_pauses = [c[1] * 1000 for c in probe["gc"]]
    by_gen: dict[str, list[float]] = {}
    collected: dict[str, int] = {}
    cpu_by_gen: dict[str, float] = {}
    for c in probe["gc"]:
        by_gen.setdefault(str(c[2]), []).append(c[1] * 1000)
        cpu_by_gen[str(c[2])] = max(cpu_by_gen.get(str(c[2]), 0.0), c[4] * 1000)
        collected[str(c[2])] = collected.get(str(c[2]), 0) + (c[3] or 0)
    threads = probe["threads"]
    db = str(probe["db_thread"]) if probe["db_thread"] is not None else None
    main = str(probe["main_thread"])
    return {
        "counts": counts, "matched": len(per["total"]),
        "stages_ms": {s: _q(v) for s, v in per.items()},
        "commit_ms": _q([(c["end"] - c["start"]) * 1000 for c in commits if "end" in c]),
        "commit_thread_cpu_ms": _q([c["thread_cpu"] * 1000 for c in commits if "thread_cpu" in c]),
        "commits": len(commits), "ops_per_commit": statistics.fmean(c["ops"] for c in commits) if commits else 0,
        "grouped_frames": sum(groups), "groups": len(groups),
        "frames_per_group": statistics.fmean(groups) if groups else 0.0,
        "gc": {"collections": len(gc_pauses), "total_ms": sum(gc_pauses),
               "max_ms": max(gc_pauses, default=0.0),
               "by_generation": {g: {"n": len(v), "total_ms": sum(v), "max_ms": max(v),
                                     "collected": collected[g], "max_cpu_ms": cpu_by_gen[g]}
                                 for g, v in sorted(by_gen.items())},
               "objects_at_exit": probe.get("gc_objects"), "frozen": probe.get("gc_frozen")},
        "cpu_s": {"main": threads.get(main), "db": threads.get(db) if db else None,
                  "other": sum(v for k, v in threads.items() if k not in (main, db))},
        "store": probe["store"], "checkpoints": probe.get("checkpoints"), "restarts": probe.get("restarts"),
        "wal_mb": (probe.get("wal_bytes") or 0) / 1e6,
    }


def lines(b: dict) -> list[str]:
    """The breakdown as report lines (``python -m bench --only latency --stages``)."""
    out = [f"  stages (ms, p50 / p95 / p99 / max) of {b['matched']} events "
           f"(counts {', '.join(f'{k} {v}' for k, v in b['counts'].items())}):"]
    for s, q in b["stages_ms"].items():
        out.append(f"    {s:<17} {q['p50']:7.3f} {q['p95']:7.3f} {q['p99']:7.3f} {q['max']:8.3f}")
    c = b["commit_ms"]
    out.append(f"  commits {b['commits']} ({b['ops_per_commit']:.1f} ops each; loop-to-loop p50 "
               f"{c['p50']:.3f} p99 {c['p99']:.3f} ms; CPU on its thread p50 "
               f"{b['commit_thread_cpu_ms']['p50']:.3f} p99 {b['commit_thread_cpu_ms']['p99']:.3f} ms); {b['groups']} groups of "
               f"{b['frames_per_group']:.2f} frames ({b['grouped_frames']} frames grouped)")
    g, cpu = b["gc"], b["cpu_s"]
    gens = "; ".join(f"gen {k}: {v['n']} × ≤ {v['max_ms']:.2f} ms (CPU ≤ {v['max_cpu_ms']:.2f}), "
                     f"{v['collected']} freed"
                     for k, v in g["by_generation"].items())
    gens += f"; tracked at exit {g['objects_at_exit']}, frozen {g['frozen']}"
    out.append(f"  gc: {g['collections']} collections, {g['total_ms']:.1f} ms in all, longest "
               f"{g['max_ms']:.2f} ms ({gens}); CPU s by thread: main {cpu['main']}, db {cpu['db']}, "
               f"other {cpu['other']:.2f}; store {b['store']}, {b['checkpoints']} checkpoints, "
               f"{b['restarts']} commits waited for a WAL catch-up, "
               f"WAL {b['wal_mb']:.1f} MB at close")
    return out
