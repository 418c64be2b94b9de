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


def golden_world(header: dict, rus: list[str], tu: str = "g1", operator: str = "op-1") -> list[dict]:
    """The head of a one-TU Golden scenario: ``header``, the TU, and an active paying favorite
    (no limits, no markers) for each RU of ``rus`` — the world of the batched-frame tests."""
    return [header, {"kind": "tu", "project": "golden", "tu": tu, "operator": operator}] + [
        {"kind": "favorite", "project": "golden", "tu": tu, "ru": ru, "active": True, "is_white": False,
         "spend_30d_usd": 50.0, "spend_total_usd": 400.0, "paid_actions": 40, "paid_with_bonuses_only": False,
         "chat_limit": None, "mail_limit": None, "markers": {}} for ru in rus]
