"""``sidecar schema`` is a valid JSON Schema 2020-12 document that Python's ``jsonschema`` compiles,
and the frames a real replay exchanged — both ways, every one — match it (issue 20 items 1–2).
The same document and frames are checked by ajv in strict mode in ``tests/clients``."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from platform_clients import CLIENTS
from platform_clients.catalogue import RAW_EVENTS, REQUESTS
from platform_clients.mail import HISTORY_METHODS
from sidecar.protocol import contract
from sidecar.cli import schema_tables as T
from sidecar.protocol.inbound import INBOUND
from sidecar.protocol.outbound import OUTBOUND
from tests.contract.frames import check, document, problems, validator

ROOT = Path(__file__).resolve().parents[2]


def test_sidecar_schema_prints_the_document():
    r = subprocess.run([sys.executable, "-m", "sidecar", "schema"], cwd=ROOT, capture_output=True, text=True,
                       check=True)
    assert json.loads(r.stdout) == document()


def test_the_document_is_draft_2020_12_and_every_def_compiles():
    doc = document()
    assert doc["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    Draft202012Validator.check_schema(doc)  # the meta-schema
    for name in doc["$defs"]:
        validator(name).is_valid(None)  # resolves every $ref the def reaches
    assert Draft202012Validator(doc).is_valid({"jsonrpc": "2.0", "method": "task.created"}) is False


def test_every_method_is_marked_request_or_notification():
    defs = document()["$defs"]
    for m in INBOUND:
        assert "id" in defs[f"in.{m}"]["required"], m  # Electron → sidecar: requests
        assert {f"in.{m}.result", f"in.{m}.error"} <= set(defs), m
    for m in OUTBOUND:
        frame = defs[f"out.{m}"]
        if m in ("platform.request", "platform.requests"):
            assert "id" in frame["required"] and f"out.{m}.result" in defs
        else:
            assert frame["properties"]["id"] is False, m  # a notification has no id
    assert defs["in.stream.ack.notification"]["properties"]["id"] is False


@pytest.mark.xdist_group("capture")  # the capture is made once, in one worker (tests/conftest.py)
def test_real_frames_of_a_replay_match_the_schema(frames):
    count, found = check(frames)
    assert count == len(frames) > 1000
    assert found == [], "\n".join(found[:20])
    seen = Counter()
    for line in frames:
        frame = json.loads(line["frame"])
        params = frame.get("params") or {}
        for e in params.get("events", [params] if frame.get("method") == "platform.event" else []):
            seen[e["project"]] += 1
    assert set(seen) == set(RAW_EVENTS), seen  # a raw event of every project was checked


@pytest.mark.parametrize("name, frame", [
    ("out.task.created", {"jsonrpc": "2.0", "method": "task.created", "params": {"task": {}}}),
    ("out.task.closed", {"jsonrpc": "2.0", "method": "task.closed", "params": {
        "task_id": "t", "type": "like", "tu": "a", "ru": "b", "reason": "answered", "closed_at": 1.0}}),  # no seq
    ("out.task.closed", {"jsonrpc": "2.0", "method": "task.closed", "params": {
        "seq": 1, "task_id": "t", "type": "like", "tu": "a", "ru": "b", "reason": "gone", "closed_at": 1.0}}),
    ("out.task.closed", {"jsonrpc": "2.0", "method": "task.closed", "params": {
        "seq": 1, "task_id": "t", "type": "like", "tu": "a", "ru": "b", "reason": "answered", "closed_at": 1.0,
        "extra": 1}}),  # outbound objects are closed
    ("in.session.login", {"jsonrpc": "2.0", "id": 1, "method": "session.login",
                          "params": {"tu": "tu-1\n", "project": "golden"}}),
    ("in.platform.event", {"jsonrpc": "2.0", "id": 1, "method": "platform.event", "params": {
        "project": "golden", "tu": "g", "name": "Send", "data": {}}}),  # a Chathouse event name
    ("in.platform.event", {"jsonrpc": "2.0", "id": 1, "method": "platform.event", "params": {
        "project": "golden", "tu": "g", "name": "chatRequest", "data": {"senderId": "r", "at": 1.0e12}}}),  # ms
    ("in.stream.ack.notification", {"jsonrpc": "2.0", "id": 3, "method": "stream.ack", "params": {"seq": 1}}),
])
def test_wrong_frames_are_refused(name, frame):
    assert problems(name, frame)


def test_inbound_objects_stay_open():
    """DESIGN §4: unknown fields are ignored — Electron may send more than the sidecar reads."""
    assert not problems("in.session.login", {"jsonrpc": "2.0", "id": 1, "method": "session.login",
                                             "params": {"tu": "g", "project": "golden", "new": 1}, "x": 2})
    assert not problems("in.platform.event", {"jsonrpc": "2.0", "id": 1, "method": "platform.event", "params": {
        "project": "golden", "tu": "g", "name": "chatRequest", "data": {"senderId": "r", "at": 1.7e9, "more": 1}}})


def test_every_outbound_object_is_closed():
    doc = document()
    defs = doc["$defs"]
    open_objects = []
    roots = [defs[f"out.{m}"]["properties"]["params"] for m in OUTBOUND]
    roots += [defs[f"in.{m}.result"] for m in INBOUND] + [defs["ReadyLine"]]
    for root in roots:
        for name in _reachable(defs, root):
            d = defs[name]
            if "properties" in d and d.get("additionalProperties") is not False:
                open_objects.append(name)
    assert open_objects == []


def _reachable(defs: dict, node) -> set[str]:
    out: set[str] = set()
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, dict):
            ref = n.get("$ref", "")
            name = ref.rpartition("/")[2] if ref.startswith("#/$defs/") else None
            if name and name not in out:
                out.add(name)
                stack.append(defs[name])
            stack.extend(n.values())
        elif isinstance(n, list):
            stack.extend(n)
    return out


def test_the_catalogue_is_what_the_clients_accept_and_ask():
    assert {p: set(e) for p, e in RAW_EVENTS.items()} == {p: set(c.decoders) for p, c in CLIENTS.items()}
    asked = {(p, ps.method) for p, c in CLIENTS.items() for ps in c.passes}
    asked |= {(p, m) for p, ms in HISTORY_METHODS.items() for m in ms}
    asked |= {("golden", "chat_history"), ("prime", "dialogs"), ("prime", "chat_restriction")}  # services'
    assert asked == {(p, m) for p, reqs in REQUESTS.items() for m in reqs}
    for p, c in CLIENTS.items():
        for ps in c.passes:  # the params each pass sends match the method's params
            assert not problems(f"call.{p}.{ps.method}", {"project": p, "tu": "t", "method": ps.method,
                                                          "params": ps.params})


def test_every_task_source_the_services_set_is_in_the_enum():
    """The sources are literals spread over the services: a new one must join TASK_SOURCES."""
    text = "\n".join(p.read_text() for p in (ROOT / "sidecar").rglob("*.py"))
    literals = set(re.findall(r'source="([a-z_0-9]+)"', text)) - {"sidecar"}  # "sidecar": a router event
    literals |= set(re.findall(r'"(last_mail_6h|mail_read|post_chat|burst|over_60m|chain)"', text))
    assert literals <= set(T.TASK_SOURCES), literals - set(T.TASK_SOURCES)


def test_exit_codes_are_the_help_text():
    rows = dict(re.findall(r"^  (\d+)\s+(.*)$", contract.EXIT_CODES, re.M))
    codes = {c["const"]: c["description"] for c in document()["$defs"]["ExitCode"]["oneOf"]}
    assert {0, 1, 2, 3, 4, 5, 6, 130, 143} <= set(codes)
    assert {int(c): t.strip() for c, t in rows.items()} == {c: d for c, d in codes.items() if c < 128}


def test_close_codes_and_the_ready_line():
    defs = document()["$defs"]
    assert {c["const"] for c in defs["CloseCode"]["oneOf"]} >= {1001, 1009, 4401, 4408, 4409}
    assert not problems("ReadyLine", {"event": "ready", "port": 1, "pid": 2, "version": "0.1.0", "protocol": 1})
    assert problems("ReadyLine", {"event": "ready", "port": 1, "pid": 2, "version": "0.1.0"})
