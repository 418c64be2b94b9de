"""A field the contract says is *absent* in some case is left out of the frame then, never sent as
``null`` (issue 20 item 1): a generated type reads ``x?: number``, and a client that tests
``"x" in params`` must not see a null it was told would not be there.  Scans every ``$def`` the
sidecar sends: a property whose ``description`` entry (``` ``name``: … absent …```) says "absent"
must be optional and not nullable — the encoder leaves it out (``msgspec.UNSET``)."""
from __future__ import annotations

import json
import re

import msgspec

from sidecar.app.requests import params_of
from sidecar.runtime.step import Request
from tests.contract.frames import document
from tests.contract.test_schema import _reachable


def _documented_absent(definition: dict) -> set[str]:
    """The properties whose entry in the def's description (``name``: …, up to the next such
    entry) says "absent"."""
    names = set()
    for entry in re.split(r"(?=``\w+``:)", definition.get("description", "")):
        m = re.match(r"``(\w+)``:", entry)
        if m and "absent" in entry and m[1] in definition.get("properties", {}):
            names.add(m[1])
    return names


def test_no_outbound_field_documented_absent_is_nullable_or_required():
    defs = document()["$defs"]
    checked, wrong = set(), []
    for name in sorted(_reachable(defs, defs["SidecarToElectron"])):
        d = defs[name]
        for prop in _documented_absent(d):
            checked.add(prop)
            schema = json.dumps(d["properties"][prop])
            if '"null"' in schema or prop in d.get("required", ()):
                wrong.append(f"{name}.{prop}")
    assert {"batch_seen", "batch_skipped"} <= checked  # the scan sees the known ones
    assert wrong == []


def test_a_platform_request_outside_a_batch_has_no_batch_fields():
    req = Request("passes", "online_ru", {}, "t", tu="g-tu-01", project="golden", at=1.0)
    outside = json.loads(msgspec.json.encode(params_of(req, None, [])))
    assert "batch_seen" not in outside and "batch_skipped" not in outside
    inside = json.loads(msgspec.json.encode(params_of(req, 0, [])))
    assert inside["batch_seen"] == 0 and "batch_skipped" not in inside
    assert json.loads(msgspec.json.encode(params_of(req, 3, [1])))["batch_skipped"] == [1]
