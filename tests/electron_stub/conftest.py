"""Harness tests: make ``electron_stub`` importable without an install (see stubhelp)."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import stubhelp  # noqa: E402,F401 - puts the repo and electron-stub on sys.path
