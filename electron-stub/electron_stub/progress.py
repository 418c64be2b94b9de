"""Progress of a long replay on stderr: a live ``rich`` bar on a terminal, else one plain line
every :data:`LINE_EVERY_S` seconds of wall time (CI logs, files).  Silent with ``quiet``."""
from __future__ import annotations

import sys
import time
from typing import Any, TextIO

from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from electron_stub.report_view import PipeConsole

__all__ = ["ReplayProgress", "LINE_EVERY_S"]

LINE_EVERY_S = 10.0


class ReplayProgress:
    """``update(t_rel, tasks, frames)`` as the virtual clock moves; ``close()`` at the end."""

    def __init__(self, total_s: float, *, quiet: bool = False, stream: TextIO | None = None) -> None:
        self.total_s = max(total_s, 1e-9)
        self.quiet = quiet
        self.stream = stream or sys.stderr
        self._t0 = time.monotonic()
        self._last_line = self._t0
        self._bar: Progress | None = None
        self._task: Any = None
        if not quiet and self.stream.isatty():
            self._bar = Progress(TextColumn("replay"), BarColumn(), TextColumn("{task.percentage:>3.0f}%"),
                                 TextColumn("{task.fields[info]}"), TimeElapsedColumn(),
                                 console=PipeConsole(file=self.stream), transient=True)
            self._task = self._bar.add_task("replay", total=self.total_s, info="")
            self._bar.start()

    def update(self, t_rel: float, tasks: int, frames: int) -> None:
        if self.quiet:
            return
        info = f"t={t_rel:.0f}/{self.total_s:.0f} s virtual, {tasks} tasks, {frames} frames"
        if self._bar is not None:
            self._bar.update(self._task, completed=min(t_rel, self.total_s), info=info)
            return
        now = time.monotonic()
        if now - self._last_line >= LINE_EVERY_S:
            self._last_line = now
            print(f"  … {info}, wall {now - self._t0:.0f} s", file=self.stream, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
