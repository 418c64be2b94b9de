"""Lint and types as habits (issue 7 item 7): ``ruff`` (real defects + the banned APIs: wall-clock
reads, sleeps and ``random`` outside ``sidecar/core/``, and ``asyncio.wait_for`` everywhere) and
``mypy`` on ``sidecar/``, ``bridge/``, ``platform_clients/`` run inside the suite, so
``./run test`` and CI run them.  Locally: ``./run lint`` (or ``.venv/bin/ruff check .`` and
``.venv/bin/mypy``); the configuration is in pyproject.toml (and electron-stub/ruff.toml)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _tool(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True,
                          input=stdin, timeout=300)


def test_ruff_is_clean():
    r = _tool("ruff", "check", ".", "--output-format", "concise", "--no-cache")
    assert "No module named ruff" not in r.stderr, "ruff is missing: it is in the test extra (./run setup)"
    assert r.returncode == 0, r.stdout + r.stderr


def test_mypy_is_clean():
    r = _tool("mypy")
    assert "No module named mypy" not in r.stderr, "mypy is missing: it is in the test extra (./run setup)"
    assert r.returncode == 0, r.stdout + r.stderr


DOMAIN_CODE = """\
import asyncio
import random
import time
from datetime import datetime


async def f():
    a = time.time()
    b = datetime.now()
    time.sleep(1)
    await asyncio.sleep(1)
    await asyncio.wait_for(asyncio.sleep(0), 1)
    return a, b, random.random()
"""


def _banned(path: str) -> set[str]:
    r = _tool("ruff", "check", "--no-cache", "--output-format", "concise", "--stdin-filename", path, "-",
              stdin=DOMAIN_CODE)
    return {name for name in ("time.time", "datetime.datetime.now", "time.sleep", "asyncio.sleep",
                              "asyncio.wait_for", "random") if f"`{name}` is banned" in r.stdout}


@pytest.mark.parametrize("path, expected", [
    ("sidecar/services/new_service.py", {"time.time", "datetime.datetime.now", "time.sleep", "asyncio.sleep",
                                         "asyncio.wait_for", "random"}),
    ("bridge/new_module.py", {"time.time", "datetime.datetime.now", "time.sleep", "asyncio.sleep",
                              "asyncio.wait_for", "random"}),
    ("platform_clients/new_platform.py", {"time.time", "datetime.datetime.now", "time.sleep", "asyncio.sleep",
                                          "asyncio.wait_for", "random"}),
    ("sidecar/core/new_clock.py", set()),  # the one clock and the keyed randomness live here
    ("electron-stub/electron_stub/new_part.py", {"asyncio.wait_for"}),  # the harness runs on real time
])
def test_the_banned_apis_are_caught_where_they_must_be(path, expected):
    assert _banned(path) == expected
