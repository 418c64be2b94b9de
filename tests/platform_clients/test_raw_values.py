"""Raw platform values are checked where they enter (issue 7 item 6, found by the breaker): an
e-mail with a huge ``receivedAt`` made a task that never ends; ids with NUL or newlines were
written raw to logs.  Out-of-range timestamps and control characters in ids are refused
(BadRawEvent → -32602 for socket events; a poll row is skipped), and whatever still reaches the
log is escaped to one line."""
from __future__ import annotations

import logging

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from platform_clients import BadRawEvent, client_for
from platform_clients.base import MAX_TS, MIN_TS, convert, convert_ids
from platform_clients.chathouse import _SEND_IDS, Send, _SendUnchecked
from sidecar.protocol import inbound as p
from sidecar.logs import OneLine
from tests.sidecar.world import T0

TU, RU = "tu-1", "ru-1"


@pytest.mark.parametrize("at", [1e15, T0 * 1000, -1.0, 0.0, MAX_TS + 1, MIN_TS - 1])
def test_email_with_out_of_range_received_at_is_refused(at):
    with pytest.raises(BadRawEvent, match="receivedAt"):
        client_for("golden").decode_event(TU, "incomingEmail",
                                          {"emailId": "e", "fromId": RU, "receivedAt": at, "at": T0})


@pytest.mark.parametrize("project, name, data, field", [
    ("golden", "receivePrivateMessage", {"messageId": "m", "senderId": RU, "recipientId": TU, "sentAt": 1e13}, "sentAt"),
    ("chathouse", "Send", {"id": "m", "type": "message", "from": RU, "to": TU, "at": 1e13}, "at"),
    ("prime", "MessageSent", {"id": "m", "type": "message", "senderId": RU, "recipientId": TU, "at": 1e13}, "at"),
])
def test_every_platform_timestamp_is_range_checked(project, name, data, field):
    with pytest.raises(BadRawEvent, match=field):
        client_for(project).decode_event(TU, name, data)


@pytest.mark.parametrize("bad", ["ru\n2026-12-01 INFO forged line", "ru\x00", "ru\r", "\x1b[31mred"])
def test_raw_ids_with_control_characters_are_refused(bad):
    with pytest.raises(BadRawEvent):
        client_for("chathouse").decode_event(TU, "Send", {"id": "m", "type": "message", "from": bad,
                                                          "to": TU, "at": T0})
    with pytest.raises(BadRawEvent):
        client_for("golden").decode_event(TU, "receivePrivateMessage",
                                          {"messageId": bad, "senderId": RU, "recipientId": TU, "sentAt": T0})


def test_a_poll_row_with_a_bad_timestamp_or_id_is_skipped_not_the_page():
    rows = [{"userId": "ok", "lastMessage": {"from": "ru", "at": T0, "type": "message"}},
            {"userId": "late", "lastMessage": {"from": "ru", "at": 1e15, "type": "message"}},
            {"userId": "nl\nid"}]
    snaps, _ = client_for("chathouse").decode_dialogs({"dialogs": rows})
    assert [s.ru for s in snaps] == ["ok"]


@pytest.mark.parametrize("bad", ["a\nb", "a\x00", "\t"])
def test_bridge_ids_with_control_characters_are_invalid_params(bad):
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({"tu": bad, "project": "golden"}, p.SessionLogin)
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({"task_id": bad, "reason": "answered"}, p.TaskClose)
    msgspec.convert({"tu": "tu-ü 1", "project": "golden"}, p.SessionLogin)  # non-ASCII is fine


def test_log_lines_escape_control_characters():
    fmt = OneLine("%(levelname)s %(message)s")
    rec = logging.LogRecord("x", logging.WARNING, __file__, 1, "bad id %r then %s", ("a", "b\nINFO forged\x00"), None)
    out = fmt.format(rec)
    assert "\n" not in out and "\x00" not in out
    assert out == "WARNING bad id 'a' then b\\nINFO forged\\x00"


# The Send fast path (platform_clients.base.convert_ids) against the full RawId convert: the same
# values for good events, the same BadRawEvent text for bad ones, whatever the dict holds.
_ids = st.one_of(st.text(max_size=6), st.text(max_size=6).map(lambda s: s + "\n"),
                 st.sampled_from(["", "ru-1", "\x7f", "a\x1fb", "x" * 257, "x" * 256]), st.integers())
_ats = st.one_of(st.floats(allow_nan=True), st.sampled_from([T0, MIN_TS, MAX_TS, MAX_TS + 1]),
                 st.integers(), st.none(), st.text(max_size=3))


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(st.sampled_from(["id", "type", "from", "to", "at", "body", "extra"]),
                       st.one_of(_ids, _ats, st.booleans()))
       | st.fixed_dictionaries({"id": _ids, "type": st.sampled_from(["message", "inmail_message", 3]),
                                "from": _ids, "to": _ids, "at": _ats},
                               optional={"body": st.one_of(st.text(max_size=4), st.integers())}))
def test_send_fast_path_equals_the_full_convert(data):
    def full():
        try:
            s = convert(data, Send)
        except BadRawEvent as exc:
            return ("error", str(exc))
        return ("ok", [getattr(s, f) for f in Send.__struct_fields__])

    def fast():
        try:
            s = convert_ids(data, Send, _SendUnchecked, _SEND_IDS)
        except BadRawEvent as exc:
            return ("error", str(exc))
        return ("ok", [getattr(s, f) for f in Send.__struct_fields__])

    assert _SendUnchecked.__struct_fields__ == Send.__struct_fields__
    assert _SendUnchecked.__struct_encode_fields__ == Send.__struct_encode_fields__
    assert fast() == full()


@settings(max_examples=300, deadline=None)
@given(st.fixed_dictionaries({"id": _ids, "type": st.sampled_from(["message", "inmail_message", 3]),
                              "from": _ids, "to": _ids, "at": _ats},
                             optional={"body": st.one_of(st.text(max_size=4), st.integers())}),
       st.sampled_from(["", "}", "x"]))
def test_send_fast_path_equals_the_full_decode_of_raw_json(data, tail):
    """The bridge hands ``msgspec.Raw``: the same values or the same error (bad JSON included)."""
    raw = msgspec.Raw(msgspec.json.encode(data) + tail.encode())

    def outcome(fn):
        try:
            s = fn()
        except (BadRawEvent, msgspec.DecodeError) as exc:
            return (type(exc), str(exc))
        return ("ok", [getattr(s, f) for f in Send.__struct_fields__])

    assert outcome(lambda: convert_ids(raw, Send, _SendUnchecked, _SEND_IDS)) \
        == outcome(lambda: convert(raw, Send))


_NOT_JSON_TEXT = [
    b'{"\xed\xa0\x80":1}',  # a lone surrogate as UTF-8 (a binary frame may carry it)
    b'{"a":"\xed\xa0\x80"}',
    b'{"text":"\xff"}',
    b'{"a":' + b'[' * 2000 + b']' * 2000 + b'}',  # past the decoder's depth
]


@pytest.mark.parametrize("project", ["golden", "chathouse", "prime"])
@pytest.mark.parametrize("raw", _NOT_JSON_TEXT)
def test_undecoded_data_that_is_not_json_text_is_a_refusal_of_data_never_a_crash(project, raw):
    """The envelope leaves ``data`` undecoded (msgspec.Raw); what it did not read — invalid UTF-8
    in a string, nesting too deep — surfaces in the project's decoder, for every event it knows.
    It must be BadRawEvent naming ``/data`` (-32602), not DecodeError / RecursionError (a failed
    step stops the sidecar: the params fuzz found ``"text":"\\ud800"`` in CI)."""
    client = client_for(project)
    for name in client.decoders:
        with pytest.raises(BadRawEvent) as info:
            client.decode_event(TU, name, msgspec.Raw(raw))
        assert info.value.field.startswith("/data"), (name, info.value.field)
