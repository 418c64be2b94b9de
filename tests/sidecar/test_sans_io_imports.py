"""The sans-I/O modules (services, domain, the Task Factory, the engine, the TU runtime, the write
builders) import no asyncio, aiosqlite, httpx or websockets (issue 7 item 7; GUIDE "flow one
way": the runtime does the I/O).  Checked in a fresh interpreter: pytest itself loads asyncio."""
from __future__ import annotations

import pkgutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
IO_LIBRARIES = ("asyncio", "aiosqlite", "httpx", "websockets", "socket")


def sans_io_modules() -> list[str]:
    import sidecar.domain
    import sidecar.services

    mods = ["sidecar.engine", "sidecar.factory", "sidecar.tu", "sidecar.store.ops", "sidecar.stack.writes",
            "sidecar.core.clock", "sidecar.core.scheduler", "sidecar.core.rng"]
    for pkg in (sidecar.services, sidecar.domain):
        mods += [m.name for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + ".")]
    return sorted(set(mods))


def test_sans_io_modules_import_no_io_library():
    mods = sans_io_modules()
    code = (f"import importlib, sys\nfor m in {mods!r}: importlib.import_module(m)\n"
            f"print(' '.join(sorted({{n for n in sys.modules if n.split('.')[0] in {IO_LIBRARIES!r}}})))")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [], f"sans-I/O modules pulled in: {r.stdout.strip()}"


def test_the_check_would_see_an_io_import():
    """The subprocess check is not vacuous: the runtime side does load them."""
    code = "import sys, sidecar.app; print('asyncio' in sys.modules and 'aiosqlite' in sys.modules)"
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.stdout.strip() == "True", r.stderr
