"""Run the harness in-process against a real sidecar process (source or frozen binary)."""
from __future__ import annotations

import asyncio
from pathlib import Path

from electron_stub import report
from electron_stub import scenario as sc
from electron_stub.replay import Replay

from tests.shared_dir import SEED_DIR, SHARED, SHIFT  # noqa: F401  (../shared: one place)

ROOT = Path(__file__).resolve().parents[2]


def replay(path: Path, data_dir: Path, binary: str | None = None) -> tuple[Replay, int]:
    """Replay ``path``; returns the finished replay and its exit code (0 = everything held)."""
    scenario = sc.load(str(path))
    rp = Replay(scenario, data_dir=str(data_dir), binary=binary, quiet=True)
    asyncio.run(rp.run())
    violations = rp.verdict()
    code = report.exit_code(rp.results, violations, rp.stats)
    if code != 0:
        print(report.render(rp.rec, rp.results, violations, rp.stats))
    return rp, code
