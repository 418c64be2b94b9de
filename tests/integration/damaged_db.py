"""Damaging a real ``sidecar.db`` and running the ``sidecar`` command on it (tests only; issue 18
item 3).  A page is found with SQLite's ``dbstat`` table and overwritten with a fixed pattern
that is no valid b-tree page (its first byte, the page type, is 0xA5)."""
from __future__ import annotations

import hashlib
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GARBAGE = bytes([0xA5, 0x5A]) * 32768  # enough for any page size


def leaf_pages(db: Path, table: str) -> list[int]:
    """The table's b-tree leaf pages, in key order (dbstat's ``path``)."""
    c = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True)
    try:
        return [p for (p,) in c.execute(
            "SELECT pageno FROM dbstat WHERE name = ? AND pagetype = 'leaf' ORDER BY path", (table,))]
    finally:
        c.close()


def damage(db: Path, pages: list[int]) -> None:
    """Overwrite each of ``pages`` (1-based) of the checkpointed file ``db`` with garbage."""
    c = sqlite3.connect(db)
    try:
        size = c.execute("PRAGMA page_size").fetchone()[0]
        c.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # every committed page is in the main file
    finally:
        c.close()
    with open(db, "r+b") as f:
        for p in pages:
            f.seek((p - 1) * size)
            f.write(GARBAGE[:size])


def digest(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else None


def sidecar(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """``python -m sidecar ARGS`` with stdin closed (so ``serve`` is not stopped by its EOF:
    /dev/null is not watched) — a start that does not refuse runs into ``timeout``."""
    return subprocess.run([sys.executable, "-m", "sidecar", *args], cwd=ROOT, capture_output=True,
                          text=True, stdin=subprocess.DEVNULL, timeout=timeout,
                          env=dict(os.environ, SIDECAR_TOKEN="t" * 32))


def counts(db: Path) -> dict[str, int]:
    c = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True)
    try:
        names = [n for (n,) in c.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")]
        return {n: c.execute(f'SELECT count(*) FROM "{n}"').fetchone()[0] for n in names}
    finally:
        c.close()
