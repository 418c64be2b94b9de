"""The router's core (values, matching, templates, routing, policy, the gate, its store ops) is
sans-I/O like the services: it imports no asyncio, aiosqlite, httpx or websockets, so a step can
route events without pulling the runtime in (GUIDE "flow one way")."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CORE = ["sidecar.router.model", "sidecar.router.render", "sidecar.router.route",
        "sidecar.router.attempt", "sidecar.router.ops", "sidecar.router.core"]
IO_LIBRARIES = ("asyncio", "aiosqlite", "sqlite3", "httpx", "websockets", "socket")


def test_router_core_imports_no_io_library():
    code = (f"import importlib, sys\nfor m in {CORE!r}: importlib.import_module(m)\n"
            f"print(' '.join(sorted({{n for n in sys.modules if n.split('.')[0] in {IO_LIBRARIES!r}}})))")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [], f"the router core pulled in: {r.stdout.strip()}"
