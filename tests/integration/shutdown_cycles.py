"""The login → disconnect → stop cycle that used to leave ``sidecar serve`` running (issue 7).

Each cycle launches a wall-clock sidecar on the same data dir (as Electron relaunches it), logs a
TU in (answering its platform requests), sends a few platform events, drops the client, asks the
process to stop and measures how long it takes.  Exit code 0 is the promise kept: the process's
own watchdog would have forced a shutdown still running 1.5 s after the request with code 5
(``sidecar_proc`` rule 2), so any other code is a bad exit.  A process still running after the
suite's exit wait is killed and counted as a hang; the next launch then proves the data-dir lock
was released.  The seconds to each exit are reported, not asserted (a loaded machine reaps late).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from bridge.client import BridgeClient
from tests.integration.sidecar_proc import EXIT_DEADLINE_S, Overran, SidecarProcess


@dataclass
class CycleResults:
    exits: list[float] = field(default_factory=list)  # seconds from the stop request to the exit
    hangs: list[str] = field(default_factory=list)  # one line per cycle that outlived the exit wait
    bad_codes: list[str] = field(default_factory=list)  # one line per non-zero exit

    def summary(self) -> str:
        worst = max(self.exits, default=0.0)
        late = sum(1 for s in self.exits if s > EXIT_DEADLINE_S)
        return (f"{len(self.hangs)} hangs, {len(self.bad_codes)} bad exit codes in "
                f"{len(self.exits) + len(self.hangs)} cycles; slowest exit {worst:.2f} s "
                f"({late} seen after {EXIT_DEADLINE_S:g} s)")


async def _answer(method: str, params: dict) -> dict:
    return {"dialogs": []}


async def one_cycle(data_dir: Path, how: str, i: int, *, binary: str | None = None,
                    extra: tuple[str, ...] = ()) -> tuple[float | None, int | None, str]:
    """Run one cycle; return (exit seconds or None if it hung, exit code, stderr tail)."""
    async with SidecarProcess(data_dir, clock="wall", binary=binary, extra=extra) as sc:
        c = await BridgeClient.connect(sc.port, sc.token, on_request=_answer)
        await c.call("session.login", {"tu": "c-tu-1", "project": "chathouse"})
        for k in range(3):
            await c.notify("platform.event", {
                "project": "chathouse", "tu": "c-tu-1", "name": "Send",
                "data": {"id": f"m{i}-{k}", "type": "message", "from": f"c-ru-{k}", "to": "c-tu-1",
                         "at": time.time(), "body": "hi"}})
        await c.close()
        try:
            code = await sc.stop(how)
        except Overran as exc:
            return None, None, str(exc)[-600:]
        # A bad exit code explains itself: the stderr tail carries the app's critical log line
        # and the traceback the cli printed.
        tail = (await sc.stderr_text())[-2000:] if code != 0 else ""
        return sc.exit_s, code, tail


async def run_cycles(data_dir: Path, n: int, how: str = "SIGTERM", *, binary: str | None = None,
                     extra: tuple[str, ...] = ()) -> CycleResults:
    res = CycleResults()
    for i in range(n):
        took, code, err = await one_cycle(data_dir, how, i, binary=binary, extra=extra)
        if took is None:
            res.hangs.append(f"cycle {i}: {err}")
            continue
        res.exits.append(took)
        if code != 0:
            res.bad_codes.append(f"cycle {i}: exit {code}; stderr tail:\n{err}")
    return res
