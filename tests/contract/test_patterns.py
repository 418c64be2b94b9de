"""The schema's id patterns are ECMA-262 and Python alike, and Python's validation of ids is what
it was with the Python-only ``\\A…\\Z`` anchors (issue 20 item 1)."""
from __future__ import annotations

import json
import re

import msgspec
import pytest
from hypothesis import given, settings, strategies as st

from sidecar.protocol.patterns import NO_CONTROL, NO_CONTROL_OR_EMPTY
from platform_clients.golden import ChatRequest
from sidecar.protocol.inbound import SenderRef, SessionLogout

OLD = {NO_CONTROL: r"\A[^\x00-\x1f\x7f]+\Z", NO_CONTROL_OR_EMPTY: r"\A[^\x00-\x1f\x7f]*\Z"}
# the texts a slip would let through: a final newline (Python's ``$``), controls anywhere
EDGES = ["", "a", "tu-1", "tu-1\n", "\n", "a\nb", "\x00", "a\x7f", "tu\r", "\ttu", "é😀", "a\n\n"]


@pytest.mark.parametrize("new", [NO_CONTROL, NO_CONTROL_OR_EMPTY])
@pytest.mark.parametrize("text", EDGES)
def test_the_edges_match_as_before(new, text):
    assert bool(re.search(new, text)) == bool(re.search(OLD[new], text))


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=st.characters(max_codepoint=0x9f), max_size=8))
def test_python_validation_of_ids_is_unchanged(text):
    for new, old in OLD.items():
        assert bool(re.search(new, text)) == bool(re.search(old, text)), (new, text)


@pytest.mark.parametrize("typ, good", [
    (SessionLogout, {"tu": "tu-1"}),
    (SenderRef, {"sender": "s1", "by": "tu-1"}),
    (ChatRequest, {"senderId": "tu-1", "at": 1.7e9}),
])
def test_msgspec_refuses_a_final_newline(typ, good):
    """msgspec searches the pattern as ``re`` does: ``"tu-1\\n"`` must stay refused."""
    msgspec.convert(good, typ)
    for key, value in good.items():
        if value == "tu-1":
            with pytest.raises(msgspec.ValidationError, match=key):
                msgspec.convert({**good, key: "tu-1\n"}, typ)


def test_no_schema_pattern_is_python_only():
    """Every ``pattern`` in ``sidecar schema`` avoids the syntax ECMA-262 lacks or reads otherwise."""
    from sidecar.cli.schema import json_schema
    text = json.dumps(json_schema())
    patterns = re.findall(r'"pattern": "((?:[^"\\]|\\.)*)"', text)
    assert patterns
    for p in (json.loads(f'"{p}"') for p in patterns):
        for python_only in (r"\A", r"\Z", r"\z", "(?P<", "(?i", "(?s", "(?x", "(?m"):
            assert python_only not in p, p
