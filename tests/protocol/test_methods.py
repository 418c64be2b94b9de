"""The registry of bridge methods (issue 12 "decode once"): every inbound method of the protocol
is registered exactly once, params convert straight into the method's Struct, and a new method
plugs in by registering."""
from __future__ import annotations

import pytest

from bridge.errors import InvalidParams, MethodNotFound
from sidecar.protocol import inbound as p
from sidecar.protocol.methods import BRIDGE_METHODS, Methods


def test_every_protocol_method_is_registered_by_the_app(tmp_path):
    from sidecar.app.root import SidecarApp
    from sidecar.config import Settings

    class NoStore:  # the registry is built without touching the store
        pass

    app = SidecarApp(Settings(clock="virtual", data_dir=str(tmp_path), token="t"), NoStore())  # type: ignore[arg-type]
    assert set(app.methods) == set(p.INBOUND) - BRIDGE_METHODS
    for name in app.methods:
        # platform.event decodes into the schema's struct plus a refused if_open (breaker 16 F5)
        expected = p.PlatformEventIn if name == "platform.event" else p.INBOUND[name]
        assert app.methods.get(name).params is expected


async def _echo(a):
    return a


def test_params_convert_into_the_struct_and_errors_name_the_method():
    m = Methods()
    m.register("why", p.Why, _echo, needs_clock=False)
    args = m.get("why").decode({"tu": "t", "ru": "r"})
    assert isinstance(args, p.Why) and (args.tu, args.ru) == ("t", "r")
    with pytest.raises(InvalidParams, match="^why: "):
        m.get("why").decode({"tu": 1})
    with pytest.raises(MethodNotFound):
        m.get("rules.list")


def test_a_method_registers_once_and_never_over_the_bridge():
    m = Methods()
    m.register("why", p.Why, _echo)
    with pytest.raises(ValueError):
        m.register("why", p.Why, _echo)
    with pytest.raises(ValueError):
        m.register("auth", p.Auth, _echo)


class _CountingDecoder:
    """Stands in for a method's decoder: counts decodes and what they were handed."""

    def __init__(self, inner):
        self.inner, self.seen = inner, []

    def decode(self, raw):
        self.seen.append(type(raw))
        return self.inner.decode(raw)


def test_the_frames_params_are_decoded_once_straight_into_the_struct(monkeypatch):
    """Decode once (issue 12): the Raw params of a frame meet the method's one decoder, built at
    registration, exactly once — no dict in between, no msgspec.convert afterwards."""
    import msgspec

    m = Methods()
    m.register("favorite.update", p.FavoriteUpdate, _echo)
    method = m.get("favorite.update")
    assert m.get("favorite.update").decoder is method.decoder  # built once, at registration
    counting = _CountingDecoder(method.decoder)
    object.__setattr__(method, "decoder", counting)
    monkeypatch.setattr(msgspec, "convert", lambda *a, **k: pytest.fail("params converted twice"))
    monkeypatch.setattr(msgspec.json, "decode", lambda *a, **k: pytest.fail("params decoded to a dict"))
    args = method.decode(msgspec.Raw(b'{"tu": "t-1", "ru": "r-1", "active": false}'))
    assert isinstance(args, p.FavoriteUpdate) and (args.tu, args.ru, args.active) == ("t-1", "r-1", False)
    assert counting.seen == [msgspec.Raw]


@pytest.mark.parametrize(("raw", "message"), [
    (b'{"tu": 1, "ru": "r"}', "why: Expected `str`, got `int` - at `$.tu`"),
    (b'{"tu": "t"}', "why: Object missing required field `ru`"),
    (b'[1, 2]', "why: Expected `object`, got `array`"),
    (b'{"tu": "t", "ru": "r", "since": "yesterday"}', "why: Expected `float | null`, got `str` - at `$.since`"),
])
def test_bad_raw_params_are_minus_32602_naming_the_method_and_the_field(raw, message):
    import msgspec

    m = Methods()
    m.register("why", p.Why, _echo, needs_clock=False)
    with pytest.raises(InvalidParams) as info:
        m.get("why").decode(msgspec.Raw(raw))
    assert info.value.code == -32602 and info.value.message == message


def test_in_process_params_meet_the_same_decoder_and_errors():
    import msgspec

    m = Methods()
    m.register("why", p.Why, _echo, needs_clock=False)
    method = m.get("why")
    assert method.decode({"tu": "t", "ru": "r"}) == method.decode(msgspec.Raw(b'{"tu":"t","ru":"r"}'))
    with pytest.raises(InvalidParams) as a:
        method.decode({"tu": 1, "ru": "r"})
    with pytest.raises(InvalidParams) as b:
        method.decode(msgspec.Raw(b'{"tu": 1, "ru": "r"}'))
    assert a.value.message == b.value.message
    with pytest.raises(InvalidParams, match="missing required field `tu`"):
        method.decode(None)  # absent params are {}, checked like any


def test_a_method_without_a_struct_gets_the_plain_json_value():
    import msgspec

    m = Methods()
    m.register("debug.echo", None, _echo, needs_clock=False)
    assert m.get("debug.echo").decode(msgspec.Raw(b'{"a": [1, {"b": null}]}')) == {"a": [1, {"b": None}]}
    assert m.get("debug.echo").decode(None) == {}


def test_a_platform_events_data_is_decoded_once_by_its_project_client(monkeypatch):
    """The hottest path: ``platform.event`` keeps ``data`` as Raw, and the project client decodes
    it straight into the raw event's Struct — never a dict converted again."""
    import msgspec

    from platform_clients.base import BadRawEvent
    from platform_clients.golden import GoldenClient
    from sidecar.domain import events as ev

    m = Methods()
    m.register("platform.event", p.PlatformEvent, _echo)
    frame = (b'{"project": "golden", "tu": "tu-1", "name": "receivePrivateMessage", "data": '
             b'{"messageId": "m-1", "senderId": "ru-1", "recipientId": "tu-1", '
             b'"sentAt": 1796025600, "text": "hi"}}')
    monkeypatch.setattr(msgspec, "convert", lambda *a, **k: pytest.fail("decoded twice"))
    args = m.get("platform.event").decode(msgspec.Raw(frame))
    assert isinstance(args.data, msgspec.Raw)
    [event] = GoldenClient.decode_event(args.tu, args.name, args.data)
    assert isinstance(event, ev.ChatIn) and (event.ru, event.msg_id) == ("ru-1", "m-1")
    bad = m.get("platform.event").decode(msgspec.Raw(frame.replace(b'"sentAt": 1796025600', b'"sentAt": "soon"')))
    with pytest.raises(BadRawEvent, match="sentAt"):
        GoldenClient.decode_event(bad.tu, bad.name, bad.data)
