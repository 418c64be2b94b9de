"""The sender health modules are sans-I/O (GUIDE "flow one way"): no asyncio, aiosqlite, httpx,
websockets or sockets, checked in a fresh interpreter (pytest itself loads asyncio)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MODULES = ["sidecar.senders.health", "sidecar.senders.groups", "sidecar.senders.manage",
           "sidecar.senders.store", "sidecar.senders.simulate", "sidecar.senders.gate"]
IO = ("asyncio", "aiosqlite", "sqlite3", "httpx", "websockets", "socket", "random")


def test_sender_modules_import_no_io_library():
    code = (f"import importlib, sys\nfor m in {MODULES!r}: importlib.import_module(m)\n"
            f"print(' '.join(sorted({{n for n in sys.modules if n.split('.')[0] in {IO!r}}})))")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [], f"pulled in: {r.stdout.strip()}"
