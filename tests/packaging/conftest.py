"""The frozen binary, built once per test session (shared by every packaging test)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.replay_util import ROOT


@pytest.fixture(scope="session")
def frozen(tmp_path_factory) -> Path:
    pytest.importorskip("PyInstaller", reason="the package extra (pyinstaller) is not installed")
    out = tmp_path_factory.mktemp("frozen")
    r = subprocess.run([sys.executable, str(ROOT / "packaging" / "build.py"), "--dist", str(out / "dist"),
                        "--work", str(out / "work")], cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    exe = Path(r.stdout.strip().splitlines()[-1])
    assert exe.is_file() and os.access(exe, os.X_OK)
    return exe
