"""Comments say why, not when: no issue number in the source of sidecar/, bridge/ and
platform_clients/ (the history of a decision lives in docs/decisions.md)."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ISSUE = re.compile(r"\bissues?\s+\d+", re.IGNORECASE)


def test_no_issue_numbers_in_source() -> None:
    hits = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for folder in ("sidecar", "bridge", "platform_clients")
        for path in sorted((ROOT / folder).rglob("*.py"))
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if ISSUE.search(line)
    ]
    assert not hits, "issue numbers belong in docs/decisions.md:\n" + "\n".join(hits)
