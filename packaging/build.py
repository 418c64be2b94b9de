#!/usr/bin/env python3
"""Build the onedir binary: ``python packaging/build.py [--dist DIR] [--work DIR]``.

Prints the binary's path on the last line.  Needs PyInstaller (the ``package`` extra).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def binary_path(dist: Path) -> Path:
    return dist / "sidecar" / ("sidecar.exe" if os.name == "nt" else "sidecar")


def build(dist: Path, work: Path) -> Path:
    cmd = [sys.executable, "-m", "PyInstaller", "--noconfirm", "--clean", "--log-level", "WARN",
           "--distpath", str(dist), "--workpath", str(work), str(ROOT / "packaging" / "sidecar.spec")]
    subprocess.run(cmd, cwd=ROOT, check=True)
    exe = binary_path(dist)
    if not exe.exists():
        raise SystemExit(f"build finished but {exe} is missing")
    return exe


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--dist", type=Path, default=ROOT / "dist")
    ap.add_argument("--work", type=Path, default=ROOT / "build")
    a = ap.parse_args()
    print(build(a.dist, a.work))
    return 0


if __name__ == "__main__":
    sys.exit(main())
