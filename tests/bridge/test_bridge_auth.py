"""bridge.auth: Host/Origin rules and the auth first frame (no sockets)."""
import pytest

from bridge import jsonrpc
from bridge.auth import authenticate, check_handshake, host_name, is_loopback_bind
from bridge.errors import ParseError, Unauthorized


@pytest.mark.parametrize(
    "header, name",
    [("127.0.0.1:5000", "127.0.0.1"), ("LocalHost", "localhost"), ("[::1]:80", "::1"), ("[::1]", "::1"),
     ("evil.example:80", "evil.example"), ("127.0.0.1.evil:1", "127.0.0.1.evil")],
)
def test_host_name(header, name):
    assert host_name(header) == name


def test_check_handshake():
    allowed = {"app://operator"}
    assert check_handshake([], ["127.0.0.1:1"], allowed) is None
    assert check_handshake(["app://operator"], ["localhost:9"], allowed) is None
    assert check_handshake([], ["[::1]:9"], allowed) is None
    assert check_handshake(["https://evil.example"], ["127.0.0.1:1"], allowed) == (
        "Origin 'https://evil.example' is not allowed"
    )
    assert check_handshake(["null"], ["127.0.0.1:1"], allowed) == "Origin 'null' is not allowed"
    assert check_handshake(["app://operator", "x"], ["127.0.0.1"], allowed) == "several Origin headers"
    assert check_handshake([], ["rebind.example:8080"], allowed) == "Host 'rebind.example:8080' is not loopback"
    assert check_handshake([], [], allowed) == "exactly one Host header is required"


def test_bind_must_be_loopback():
    assert is_loopback_bind("127.0.0.1") and is_loopback_bind("::1") and is_loopback_bind("localhost")
    assert not is_loopback_bind("0.0.0.0") and not is_loopback_bind("192.168.1.2")


def auth_frame(params, id=1):
    return jsonrpc.decode(jsonrpc.encode_request(id, "auth", params))


def test_authenticate():
    request, hello = authenticate(auth_frame({"token": "s3", "client": "electron", "version": "1.2"}), b"s3")
    assert request.id == 1 and hello.client == "electron" and hello.version == "1.2"
    for message, expected_id in [
        (auth_frame({"token": "nope"}, id=7), 7),
        (auth_frame({"tok": "s3"}, id=8), 8),
        (auth_frame([1], id=9), 9),
        (jsonrpc.decode(b'{"jsonrpc":"2.0","id":3,"method":"status"}'), 3),
        (jsonrpc.decode(b'{"jsonrpc":"2.0","method":"auth","params":{"token":"s3"}}'), None),
        (ParseError("bad"), None),
    ]:
        with pytest.raises(Unauthorized) as info:
            authenticate(message, b"s3")
        assert info.value.code == -32001
        assert info.value.id == expected_id


def test_hello_protocol_and_capabilities():
    """A client older than versioning sends neither: it is taken as "1.0" and its capabilities
    as unknown (None), not as none."""
    _, old = authenticate(auth_frame({"token": "s3"}), b"s3")
    assert (old.protocol, old.capabilities) == ("1.0", None)
    _, new = authenticate(auth_frame({"token": "s3", "protocol": "1.4", "capabilities": ["x"]}), b"s3")
    assert (new.protocol, new.capabilities) == ("1.4", ["x"])


@pytest.mark.parametrize("protocol, ok", [("1.0", True), ("1.99", True), ("2.0", False), ("0.1", False),
                                          ("1", False), ("1.x", False), (1, False), (None, False)])
def test_check_protocol(protocol, ok):
    from bridge.auth import check_protocol
    from bridge.errors import UnsupportedProtocol
    _, hello = authenticate(auth_frame({"token": "s3", "protocol": protocol}), b"s3")
    if ok:
        check_protocol(hello, "1.2")
        return
    with pytest.raises(UnsupportedProtocol) as info:
        check_protocol(hello, "1.2")
    assert info.value.code == -32602 and info.value.data == {"field": "protocol", "supported": ["1.2"]}
