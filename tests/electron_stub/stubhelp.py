"""Helpers of the harness tests (a uniquely named module: ``conftest`` names clash across folders)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
for _p in (REPO, REPO / "electron-stub"):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

SHARED = Path(__file__).parents[2].parent / "shared"
SEEDS = SHARED / "scenarios" / "seed"

HEADER = ('{"kind":"header","format":1,"name":"t","start":"2026-11-30T08:00:00Z","seed":3,"duration_s":100,'
          '"operator":{"chat_answer_p":1.0,"chat_delay_s":[10,10],"mail_answer_p":0.0,"mail_delay_s":[60,60]}}')


def need_shared() -> Path:
    """Skip (with the reason) when ../shared is not beside the checkout."""
    if not SEEDS.is_dir():
        pytest.skip(f"shared scenarios not found at {SEEDS} (../shared is absent beside the checkout)")
    return SHARED
