"""The registry of bridge methods (issue 12 "decode once"): every inbound method of the protocol
is registered exactly once, params convert straight into the method's Struct, and a new method
plugs in by registering."""
from __future__ import annotations

import pytest

from bridge.errors import InvalidParams, MethodNotFound
from sidecar import protocol as p
from sidecar.methods import BRIDGE_METHODS, Methods


def test_every_protocol_method_is_registered_by_the_app(tmp_path):
    from sidecar.app import SidecarApp
    from sidecar.config import Settings

    class NoStore:  # the registry is built without touching the store
        pass

    app = SidecarApp(Settings(clock="virtual", data_dir=str(tmp_path), token="t"), NoStore())  # type: ignore[arg-type]
    assert set(app.methods) == set(p.INBOUND) - BRIDGE_METHODS
    for name in app.methods:
        assert app.methods.get(name).params is p.INBOUND[name]


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
