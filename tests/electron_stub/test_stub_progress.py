"""Replay progress (issue 7 item 4): a live bar on a terminal, a plain line every 10 s otherwise,
nothing with --quiet."""
from __future__ import annotations

import io

from electron_stub import progress


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_plain_lines_are_rate_limited(monkeypatch):
    out = io.StringIO()
    p = progress.ReplayProgress(100.0, stream=out)
    p.update(10, 1, 5)
    assert out.getvalue() == ""  # not 10 s yet
    monkeypatch.setattr(progress, "LINE_EVERY_S", 0.0)
    p.update(50, 3, 20)
    p.close()
    assert out.getvalue().count("\n") == 1 and "t=50/100 s virtual, 3 tasks, 20 frames" in out.getvalue()


def test_quiet_prints_nothing(monkeypatch):
    monkeypatch.setattr(progress, "LINE_EVERY_S", 0.0)
    out = Tty()
    p = progress.ReplayProgress(100.0, quiet=True, stream=out)
    p.update(50, 3, 20)
    p.close()
    assert out.getvalue() == ""


def test_a_terminal_gets_a_live_bar():
    out = Tty()
    p = progress.ReplayProgress(100.0, stream=out)
    assert p._bar is not None
    p.update(50, 3, 20)
    p.close()
    assert p._bar is None
