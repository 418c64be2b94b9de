"""docs/protocol.md cannot rot (issue 20 item 4): every literal frame in it — a ```json block
tagged with the schema ``$def`` it shows — validates against ``sidecar schema``.  Extra tags:
``answer.<project>.<method>`` also checks the frame's ``result`` against that platform answer;
``refused`` marks a bad frame the schema must refuse;
``pending`` marks a frame DESIGN §4 asks for and the sidecar lacks (a strict xfail naming issue 20:
it fails once the schema has it, so the tag goes)."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.contract.frames import document, problems

DOC = Path(__file__).resolve().parents[2] / "docs" / "protocol.md"
BLOCK = re.compile(r"^```json ([^\n]+)\n(.*?)^```", re.M | re.S)


def blocks() -> list[tuple[list[str], str]]:
    return [(tags.split(), body) for tags, body in BLOCK.findall(DOC.read_text(encoding="utf-8"))]


def _params():
    out = []
    for i, (tags, body) in enumerate(blocks()):
        marks = [pytest.mark.xfail(strict=True, reason="issue 20 items 2–3: not in the schema yet")] \
            if "pending" in tags else []
        out.append(pytest.param(tags, body, id=f"{i:02d}-{tags[0]}", marks=marks))
    return out


@pytest.mark.parametrize("tags, body", _params())
def test_the_frame_matches_the_schema(tags, body):
    frame = json.loads(body)  # one frame per block
    name = tags[0]
    assert name in document()["$defs"], f"{name}: no such $def"
    found = problems(name, frame)
    for extra in tags[1:]:
        if extra.startswith("answer."):
            found += problems(extra, frame["result"])
        else:
            assert extra in ("pending", "refused"), extra
    if "refused" in tags:
        assert found, f"{name}: the schema accepts a frame the page says is refused"
    else:
        assert found == []


def test_the_session_shows_every_part():
    tags = {t[0] for t, _ in blocks()}
    assert {"ReadyLine", "in.auth", "in.auth.result", "in.session.login", "in.platform.event",
            "out.platform.request", "out.platform.request.result", "out.task.created",
            "in.stream.ack.notification", "in.tasks.list", "in.sidecar.shutdown", "in.logs.subscribe",
            "out.log"} <= tags
    projects = {json.loads(b)["params"]["project"] for t, b in blocks() if t[0] == "in.platform.event"}
    assert projects == {"golden", "chathouse", "prime"}
