"""Helpers of the harness tests (a uniquely named module: ``conftest`` names clash across folders).
A test that reads ../shared takes the ``shared_dir`` fixture (tests/conftest.py), which marks it
``shared`` and skips it, with the reason, where ../shared is absent."""
from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
for _p in (REPO, REPO / "electron-stub"):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

HEADER = ('{"kind":"header","format":1,"name":"t","start":"2026-11-30T08:00:00Z","seed":3,"duration_s":100,'
          '"operator":{"chat_answer_p":1.0,"chat_delay_s":[10,10],"mail_answer_p":0.0,"mail_delay_s":[60,60]}}')
