"""bridge.jsonrpc: decoding classifies or raises the right RpcError; encoding is exact."""
import msgspec
import pytest
from hypothesis import given, settings, strategies as st

from bridge import jsonrpc
from bridge.errors import InvalidRequest, ParseError, RpcError, MethodNotFound
from bridge.jsonrpc import ErrorObject, ErrorResponse, Notification, Request, Response


def test_request_notification_response_error():
    assert jsonrpc.decode(b'{"jsonrpc":"2.0","id":1,"method":"a","params":{"x":1}}') == Request(
        id=1, method="a", params={"x": 1}
    )
    assert jsonrpc.decode('{"jsonrpc":"2.0","id":"s","method":"a","params":[1]}') == Request(
        id="s", method="a", params=[1]
    )
    assert jsonrpc.decode(b'{"jsonrpc":"2.0","method":"n"}') == Notification(method="n")
    assert jsonrpc.decode(b'{"jsonrpc":"2.0","id":3,"result":null}') == Response(id=3, result=None)
    assert jsonrpc.decode(b'{"jsonrpc":"2.0","id":3,"error":{"code":-1,"message":"m","data":[2]}}') == (
        ErrorResponse(id=3, error=ErrorObject(code=-1, message="m", data=[2]))
    )


def test_unknown_members_ignored_and_null_id_is_a_request():
    msg = jsonrpc.decode(b'{"jsonrpc":"2.0","id":null,"method":"a","extra":{"deep":[1]}}')
    assert msg == Request(id=None, method="a")
    assert msg.params is msgspec.UNSET


_DEEP = b'{"jsonrpc":"2.0","method":"m","params":' + b"[" * 5000 + b"]" * 5000 + b"}"


@pytest.mark.parametrize(
    "frame",
    [b"{", b"not json", b"\xff\xfe", b'{"a":1} trailing', b"", "\ud800", _DEEP, 42],
    ids=["truncated", "text", "not-utf8", "trailing", "empty", "lone-surrogate", "deep", "int"],
)
def test_parse_errors(frame):
    with pytest.raises(ParseError) as info:
        jsonrpc.decode(frame)
    assert info.value.code == -32700
    assert info.value.id is None


@pytest.mark.parametrize(
    "frame, expected_id",
    [
        (b"[]", None),  # batch
        (b'[{"jsonrpc":"2.0","id":1,"method":"a"}]', None),  # batch
        (b"1", None),
        (b'"text"', None),
        (b"null", None),
        (b'{"jsonrpc":"2.0","id":7,"method":5}', 7),  # method not a string
        (b'{"jsonrpc":"1.0","id":7,"method":"a"}', 7),  # wrong version
        (b'{"id":"k","method":"a"}', "k"),  # version missing
        (b'{"jsonrpc":"2.0","id":8,"method":"a","params":3}', 8),  # params scalar
        (b'{"jsonrpc":"2.0","id":1.5,"method":"a"}', None),  # fractional id
        (b'{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"a"}', None),  # huge id
        (b'{"jsonrpc":"2.0","id":9,"method":"a","params":{"x":1e999}}', 9),  # number out of range
        (b'{"jsonrpc":"2.0"}', None),  # neither call nor answer
        (b'{"jsonrpc":"2.0","id":4}', 4),  # answer without result/error
        (b'{"jsonrpc":"2.0","id":4,"result":1,"error":{"code":1,"message":"m"}}', 4),
        (b'{"jsonrpc":"2.0","id":4,"error":{"code":"x","message":"m"}}', 4),
    ],
)
def test_invalid_requests_carry_the_id_when_readable(frame, expected_id):
    with pytest.raises(InvalidRequest) as info:
        jsonrpc.decode(frame)
    assert info.value.code == -32600
    assert info.value.id == expected_id


def test_encoders_are_exact():
    assert jsonrpc.encode_request(1, "m", {"a": 1}) == b'{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":1}}'
    assert jsonrpc.encode_request(2, "m") == b'{"jsonrpc":"2.0","id":2,"method":"m"}'
    assert jsonrpc.encode_notification("n", [1]) == b'{"jsonrpc":"2.0","method":"n","params":[1]}'
    assert jsonrpc.encode_result(3, None) == b'{"jsonrpc":"2.0","id":3,"result":null}'
    assert jsonrpc.encode_error(None, MethodNotFound("no x")) == (
        b'{"jsonrpc":"2.0","id":null,"error":{"code":-32601,"message":"no x"}}'
    )
    assert jsonrpc.encode_error("i", RpcError(5, "m", {"d": 1})) == (
        b'{"jsonrpc":"2.0","id":"i","error":{"code":5,"message":"m","data":{"d":1}}}'
    )


def test_struct_params_and_results_encode():
    class P(msgspec.Struct):
        a: int
        b: str = "x"

    assert jsonrpc.encode_result(1, P(1)) == b'{"jsonrpc":"2.0","id":1,"result":{"a":1,"b":"x"}}'
    with pytest.raises(TypeError):
        jsonrpc.encode_result(1, object())


def test_round_trip():
    for msg in (Request(id=5, method="m", params={"k": [1, 2]}), Notification(method="n", params=[]),
                Response(id="z", result={"ok": True}), ErrorResponse(id=1, error=ErrorObject(code=1, message="e"))):
        assert jsonrpc.decode(jsonrpc.encode(msg)) == msg


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)
_members = st.fixed_dictionaries(
    {},
    optional={
        "jsonrpc": st.sampled_from(["2.0", "1.0", 2]) | _json,
        "id": st.integers() | st.text(max_size=4) | st.none() | _json,
        "method": st.text(max_size=6) | _json,
        "params": _json,
        "result": _json,
        "error": st.fixed_dictionaries({"code": st.integers(), "message": st.text(max_size=4)}) | _json,
    },
)


@settings(max_examples=300, deadline=None)
@given(st.text() | st.binary())
def test_arbitrary_input_raises_only_rpc_errors(frame):
    try:
        jsonrpc.decode(frame)
    except RpcError as exc:
        # the error must itself be sendable
        jsonrpc.encode_error(exc.id, exc)


@settings(max_examples=300, deadline=None)
@given(_members)
def test_arbitrary_objects_decode_or_raise_rpc_error(obj):
    frame = msgspec.json.encode(obj)
    try:
        msg = jsonrpc.decode(frame)
    except RpcError as exc:
        jsonrpc.encode_error(exc.id, exc)
    else:
        assert type(msg) in (Request, Notification, Response, ErrorResponse)
        assert jsonrpc.decode(jsonrpc.encode(msg)) == msg


def test_error_text_keeps_the_quotes_of_a_key_error_message_balanced():
    """``str(KeyError(msg))`` is ``repr(msg)``; stripping its quotes cut the message's own closing
    quote ("unknown socket event 'message")."""
    from bridge.errors import error_text
    assert error_text(KeyError("golden: unknown socket event 'message'")) == "golden: unknown socket event 'message'"
    assert error_text(KeyError('a "quoted" name')) == 'a "quoted" name'
    assert error_text(ValueError("x 'y'")) == "x 'y'"
    assert error_text(KeyError("a", "b")) == "('a', 'b')"
    assert error_text(KeyError(3)) == "3"


def _outcome(frame, **kw):
    try:
        msg = jsonrpc.decode(frame, **kw)
    except RpcError as exc:
        return ("error", type(exc), exc.message, exc.id)
    return ("ok", msg)


@settings(max_examples=300, deadline=None)
@given(_members)
def test_raw_params_decode_like_typed_params_only_later(obj):
    """``raw_params=True`` (decode once, sidecar.protocol.methods) classifies every frame as the typed
    decoder does, with the same errors; a call's params are the same JSON, still undecoded."""
    frame = msgspec.json.encode(obj)
    typed, raw = _outcome(frame), _outcome(frame, raw_params=True)
    assert typed[0] == raw[0], (typed, raw)
    if typed[0] == "error":
        assert typed == raw
        return
    t, r = typed[1], raw[1]
    assert type(t) is type(r)
    if type(t) in (Request, Notification):
        assert t.method == r.method and getattr(t, "id", None) == getattr(r, "id", None)
        if t.params is msgspec.UNSET:
            assert r.params is msgspec.UNSET
        else:
            assert isinstance(r.params, msgspec.Raw)
            assert msgspec.json.decode(r.params) == t.params


@pytest.mark.parametrize("params", [b"3", b'"s"', b"null", b"true", b"-1.5"])
def test_raw_params_refuse_a_scalar_with_the_typed_error(params):
    frame = b'{"jsonrpc":"2.0","id":8,"method":"a","params":' + params + b"}"
    assert _outcome(frame, raw_params=True) == _outcome(frame)
    assert _outcome(frame)[1] is InvalidRequest


def test_raw_params_leave_a_number_out_of_range_to_the_method():
    """The one difference: the typed envelope parses every number, Raw does not; the method's
    decoder then refuses it (-32602, sidecar.protocol.methods) — still before anything is handled."""
    frame = b'{"jsonrpc":"2.0","id":9,"method":"a","params":{"x":1e999}}'
    msg = jsonrpc.decode(frame, raw_params=True)
    assert isinstance(msg, Request) and isinstance(msg.params, msgspec.Raw)
    with pytest.raises(msgspec.ValidationError):
        msgspec.json.Decoder(dict[str, float]).decode(msg.params)


# brk33: a ``\ud800`` escape without its pair is JSON text (RFC 8259's grammar; the stdlib reads it)
# that msgspec refuses as "Input data was truncated": the request was answered -32700 with id null,
# so its caller waited for its own id in vain, and nothing said which field was wrong.
@pytest.mark.parametrize("frame, expected_id, code, field", [
    (rb'{"jsonrpc":"2.0","id":16,"method":"tasks.list","params":{"tu":"\ud800"}}', 16, -32602, "tu"),
    (rb'{"jsonrpc":"2.0","id":"k","method":"m","params":{"a":[1,{"b":"x\uDFFF\ud800y"}]}}', "k", -32602, "a[1].b"),
    (rb'{"jsonrpc":"2.0","id":3,"method":"m","params":["ok","\udbff"]}', 3, -32602, "[1]"),
    (rb'{"jsonrpc":"2.0","id":5,"method":"m","params":{"k\ud800":1}}', 5, -32602, "params"),
    (rb'{"jsonrpc":"2.0","id":4,"method":"m\ud800"}', 4, -32600, "method"),
    (rb'{"jsonrpc":"2.0","id":"\ud800","method":"m"}', None, -32600, "id"),
])
def test_an_unpaired_surrogate_escape_is_refused_naming_its_field(frame, expected_id, code, field):
    for f in (frame, frame.decode()):
        for raw in (False, True):
            with pytest.raises(RpcError) as info:
                jsonrpc.decode(f, raw_params=raw)
            assert (info.value.code, info.value.id) == (code, expected_id)
            assert info.value.data == {"field": field}
            assert "surrogate" in info.value.message and field in info.value.message
            jsonrpc.encode_error(info.value.id, info.value).decode("utf-8")  # sendable as is


def test_a_paired_surrogate_escape_still_decodes():
    msg = jsonrpc.decode(rb'{"jsonrpc":"2.0","id":1,"method":"m","params":{"s":"\ud83c\udf39"}}')
    assert msg == Request(id=1, method="m", params={"s": "\U0001f339"})
