"""Where a replay's platform-request round trips come from, and where its CPU goes (issue 11 item 3).

Usage: ``python -m bench.roundtrips SCENARIO [--no-batch] [--log FILE.jsonl]``

Rules / theory of operation
---------------------------
* Plays ``SCENARIO`` in-process with :class:`electron_stub.replay.Replay` (the harness) against
  real sidecars (child processes), logging every bridge frame the harness sends and every
  ``platform.request`` / ``platform.requests`` round trip the sidecars ask, in arrival order:
  its requests' ``at`` (the asking step's instant), TU, kind, ``batch_seen``.
* CPU: ``RUSAGE_SELF`` is the harness (the replay runs in this process), ``RUSAGE_CHILDREN`` the
  sidecars (counted once they are reaped, at the end of the replay) — user + system seconds.
* The round trips are classified by what an earlier round trip or frame left (nothing here
  changes the replay; the classes are the upper bounds of what a protocol change could gather):

  - **same instant, other TU**: the round trip before it (no frame between) asked at the same
    ``at`` for another TU — several TUs' steps at one instant (poll timers coinciding);
  - **chain**: the round trip before it (no frame between) asked at the same ``at`` for the same
    TU — an answer's step asked the next request;
  - **first**: the first round trip after a frame (its step is a timer or the frame's event);
    ``same instant as its frame's event`` counts those whose ``at`` equals an event's
    ``received_at`` in the frame — a timer and the event at one instant.

  Per TU and per instant the counts follow, and how many distinct instants ask at all.
* ``--floor N``: the cost of the round trip itself, apart from any answer: a child process
  serves a :class:`bridge.BridgeServer` whose handler asks its client N sequential
  ``platform.request`` (the sidecar's direction, a shift-sized params and a ~1 KB answer,
  answered at once by a :class:`bridge.client.BridgeClient` here); CPU µs per round trip on each
  side (this process: ``RUSAGE_SELF``; the child: ``RUSAGE_CHILDREN`` once reaped).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import resource
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any


def _kind(one: dict) -> str:
    params = one.get("params") if isinstance(one.get("params"), dict) else {}
    crit = params.get("criteria")
    return f"{one.get('project')}.{one.get('method')}" + (f"[{','.join(map(str, crit))}]" if isinstance(crit, list) else "")


async def _play(path: str, batch: bool, log: list[dict]) -> Any:
    from electron_stub import scenario as sc
    from electron_stub.replay import Replay
    from electron_stub.replay_sidecars import Sidecars

    rp = Replay(sc.load(path), quiet=True, batch=batch)
    send0 = Sidecars.send

    async def send(self: Sidecars, m: Any, method: str, params: Any) -> Any:
        ats = [e.get("received_at") for e in params.get("events", [])] if method == "platform.events" else []
        if method == "platform.event" and isinstance(params, dict):
            ats = [params.get("received_at")]
        log.append({"frame": method, "m": m.name, "ats": ats})
        return await send0(self, m, method, params)

    rp.sidecars.send = send.__get__(rp.sidecars)  # type: ignore[method-assign]
    on_request0 = rp.on_request

    async def on_request(m: Any, method: str, params: Any) -> Any:
        items = params.get("requests") if method == "platform.requests" else [params]
        log.append({"rt": method, "m": m.name, "reqs": [
            {"at": x.get("at"), "tu": x.get("tu"), "kind": _kind(x), "seen": x.get("batch_seen")}
            for x in items if isinstance(x, dict)]})
        return await on_request0(m, method, params)

    rp.sidecars.on_request = on_request  # read when a machine is made
    await rp.run()
    return rp


def analyse(log: list[dict]) -> dict[str, Any]:
    """The classes of the module rules, from a log of frames and round trips in arrival order."""
    out: Counter = Counter()
    per_tu: Counter = Counter()
    per_at: Counter = Counter()  # round trips per distinct (machine, at)
    chain_len: Counter = Counter()  # round trips in a run of same-TU same-at round trips -> runs
    run = 0
    prev: dict | None = None
    frame_ats: set[float] = set()
    for rec in log:
        if "frame" in rec:
            frame_ats = {a for a in rec["ats"] if isinstance(a, (int, float))}
            if run:
                chain_len[run] += 1
            prev, run = None, 0
            continue
        reqs = rec["reqs"]
        at, tu = reqs[0]["at"], reqs[0]["tu"]
        out["round_trips"] += 1
        out["requests"] += len(reqs)
        out[rec["rt"]] += 1
        per_tu[tu] += 1
        per_at[(rec["m"], at)] += 1
        if prev is None:
            out["first_after_frame"] += 1
            if at in frame_ats:
                out["first_at_an_event_instant"] += 1
            run = 1
        elif prev["at"] == at and prev["tu"] == tu:
            out["chain_same_tu_same_at"] += 1
            run += 1
        elif prev["at"] == at:
            out["same_at_other_tu"] += 1
            chain_len[run] += 1
            run = 1
        else:
            out["later_instant_same_frame"] += 1
            chain_len[run] += 1
            run = 1
        prev = {"at": at, "tu": tu}
    if run:
        chain_len[run] += 1
    sizes = Counter(per_at.values())
    return {"classes": dict(out), "per_tu": dict(per_tu.most_common()),
            "instants_asking": len(per_at), "round_trips_per_instant": dict(sorted(sizes.items())),
            "runs_by_length": dict(sorted(chain_len.items()))}


PARAMS = {"project": "golden", "tu": "g-tu-01", "method": "online_ru", "params": {},
          "at": 1796025615.25, "batch_seen": 3}
ANSWER = {"online": [{"ru": f"g-ru-{i:03d}", "last_at": 1796025600.0 + i, "limits": {"chat": 3}}
                     for i in range(16)]}


async def _serve_floor(token: str) -> None:
    from bridge import BridgeServer

    server: Any = None

    async def handler(method: str, params: Any) -> Any:
        for _ in range(int(params["n"])):
            await server.request("platform.request", PARAMS)
        return {"ok": True}

    server = BridgeServer(token, handler)
    port = await server.start()
    print(port, flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)  # until the parent closes it


async def floor(n: int, token: str | None = None) -> dict[str, float]:
    """Module rules, ``--floor``.  ``token``: the bridge token (default: a new random one)."""
    import secrets

    from bridge.client import BridgeClient

    token = token or secrets.token_urlsafe(16)
    proc = await asyncio.create_subprocess_exec(
        # "--opt=value": a token may begin with "-", which argparse takes for an option otherwise
        sys.executable, "-m", "bench.roundtrips", f"--serve-floor={token}",
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
    assert proc.stdout is not None and proc.stdin is not None
    port = int(await proc.stdout.readline())

    async def answer(method: str, params: Any) -> Any:
        return ANSWER

    client = await BridgeClient.connect(port, token, on_request=answer)
    await client.call("warm", {"n": 200})
    s0, w0 = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
    await client.call("go", {"n": n}, timeout=600)
    wall = time.monotonic() - w0
    s1 = resource.getrusage(resource.RUSAGE_SELF)
    await client.close()
    proc.stdin.close()
    await proc.wait()
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    per = 1e6 / n
    return {"round_trips": n, "wall_us": round(wall * per, 1),
            "client_cpu_us": round((s1.ru_utime + s1.ru_stime - s0.ru_utime - s0.ru_stime) * per, 1),
            # the child's whole life (start-up included): an upper bound per round trip
            "server_cpu_us_incl_startup": round((c.ru_utime + c.ru_stime) * per, 1)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.roundtrips")
    ap.add_argument("scenario", nargs="?")
    ap.add_argument("--floor", type=int, metavar="N", help="measure N bare round trips instead (module rules)")
    ap.add_argument("--serve-floor", metavar="TOKEN", help=argparse.SUPPRESS)
    ap.add_argument("--no-batch", action="store_true")
    ap.add_argument("--log", help="write the frame / round-trip log here (JSON lines)")
    args = ap.parse_args(argv)
    if args.serve_floor:
        asyncio.run(_serve_floor(args.serve_floor))
        return 0
    if args.floor:
        json.dump(asyncio.run(floor(args.floor)), sys.stdout)
        print()
        return 0
    if not args.scenario:
        ap.error("a scenario (or --floor N)")
    log: list[dict] = []
    w0, s0 = time.monotonic(), resource.getrusage(resource.RUSAGE_SELF)
    rp = asyncio.run(_play(args.scenario, not args.no_batch, log))
    wall = time.monotonic() - w0
    s1, c1 = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    if args.log:
        Path(args.log).write_text("".join(json.dumps(r) + "\n" for r in log))
    result = analyse(log)
    result["cpu_s"] = {"harness_user": round(s1.ru_utime - s0.ru_utime, 2),
                       "harness_sys": round(s1.ru_stime - s0.ru_stime, 2),
                       "sidecars_user": round(c1.ru_utime, 2), "sidecars_sys": round(c1.ru_stime, 2),
                       "wall": round(wall, 2)}
    result["frames"] = dict(rp.frames)
    result["request_frames"] = dict(rp.request_frames)
    json.dump(result, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
