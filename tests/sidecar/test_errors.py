"""The one exception root (``sidecar.domain.errors``, issue 19 item 5): every exception class of
``sidecar/`` and ``platform_clients/`` derives from :class:`SidecarError` through one branch; each
branch maps to its JSON-RPC code in one place; no module hand-converts a sidecar input error to
a bridge error any more."""
from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from pathlib import Path

import pytest

import platform_clients
import sidecar
from bridge.errors import (INTERNAL_ERROR, INVALID_PARAMS, InternalError, InvalidParams, RemoteError, ShuttingDown,
                           RpcError, as_rpc_error)
from sidecar.domain.errors import InputError, IOFailure, Refusal, SidecarError, StepFailed

ROOT = Path(__file__).resolve().parents[2]
BRANCHES = (InputError, Refusal, StepFailed, IOFailure)

#: exception classes outside the root, each with the reason (docs/decisions.md "One exception root")
JUSTIFIED = {
    # a bug of the sender-health machine, never a client's error: an AssertionError so that no
    # `except SidecarError` (or a refusal tuple) can ever answer it as bad input
    "sidecar.senders.table.MachineInvariantError",
    "sidecar.senders.table.MissingTransition",
}


def _modules() -> list[str]:
    names = []
    for pkg in (sidecar, platform_clients):
        names.append(pkg.__name__)
        for info in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + "."):
            if not info.name.endswith("__main__"):
                names.append(info.name)
    return names


def exception_classes() -> dict[str, type[BaseException]]:
    """Every exception class *defined* in ``sidecar/`` and ``platform_clients/``, by dotted name."""
    out = {}
    for name in _modules():
        mod = importlib.import_module(name)
        for cls in vars(mod).values():
            if inspect.isclass(cls) and issubclass(cls, BaseException) and cls.__module__ == name:
                out[f"{name}.{cls.__qualname__}"] = cls
    return out


def test_every_exception_derives_from_the_root_through_one_branch():
    classes = exception_classes()
    assert len(classes) >= 25, sorted(classes)  # the walk sees the modules
    outside = {n for n, c in classes.items() if not issubclass(c, SidecarError)}
    assert outside == JUSTIFIED
    for name, cls in classes.items():
        if cls is SidecarError or cls in BRANCHES or name in JUSTIFIED:
            continue
        assert sum(issubclass(cls, b) for b in BRANCHES) == 1, name


def test_the_justified_ones_are_bugs_not_answers():
    classes = exception_classes()
    for name in JUSTIFIED:
        assert issubclass(classes[name], AssertionError), name


def test_each_branch_maps_to_its_json_rpc_code_once():
    hints = {b: b.error_status_hint for b in BRANCHES}
    assert hints == {InputError: INVALID_PARAMS, Refusal: INVALID_PARAMS,
                     StepFailed: INTERNAL_ERROR, IOFailure: INTERNAL_ERROR}
    err = as_rpc_error(InputError("items[3].sender: unknown", field="items[3].sender"))
    assert isinstance(err, InvalidParams)
    assert (err.code, err.message, err.data) == (INVALID_PARAMS, "items[3].sender: unknown",
                                                 {"field": "items[3].sender"})
    own = as_rpc_error(InputError("no such thing", code=-32004))
    assert type(own) is RpcError and (own.code, own.data) == (-32004, None)
    refused = as_rpc_error(Refusal("exists"))
    assert isinstance(refused, InvalidParams) and refused.message == "exists"
    failed = as_rpc_error(StepFailed("a step could not be saved"))
    assert isinstance(failed, InternalError) and failed.message == "a step could not be saved"
    io = as_rpc_error(IOFailure("disk full"))
    # as the bridge answers any unexpected exception: -32603 naming the class
    assert isinstance(io, InternalError) and io.message == "IOFailure: disk full"


def test_the_re_parented_ones_answer_as_before():
    from platform_clients import BadRawEvent
    from sidecar.router.model import RouterInputError
    from sidecar.runtime.ports import Stopping
    from sidecar.senders.manage import ManageError
    from sidecar.stack.errors import StackUnavailable

    rie = as_rpc_error(RouterInputError("name", "exists"))
    assert isinstance(rie, InvalidParams) and (rie.message, rie.data) == ("name: exists", {"field": "name"})
    me = ManageError("items[0].sender", "unknown sender")
    me.context = "groups.assignments.set"
    err = as_rpc_error(me)
    assert isinstance(err, InvalidParams)
    assert err.message == "groups.assignments.set: items[0].sender: unknown sender"
    assert err.data == {"field": "items[0].sender"}
    bad = as_rpc_error(BadRawEvent("bad shape"))
    assert isinstance(bad, InvalidParams) and (bad.message, bad.data) == ("bad shape", None)
    assert isinstance(BadRawEvent("x"), ValueError) and isinstance(me, ValueError)  # second bases kept
    stopping = as_rpc_error(Stopping("shutting down"))  # a stop's refusal is not a failed step (-32603)
    assert isinstance(stopping, ShuttingDown) and stopping.code == -32002
    assert as_rpc_error(StackUnavailable("down", status=503)).message == "StackUnavailable: down"


def test_a_peer_error_is_not_an_error_object():
    """RemoteError stays outside the protocol: a handler letting a peer's error escape answers
    -32603, never the peer's code as its own (bridge/errors.py rules)."""
    assert as_rpc_error(RemoteError(-32602, "peer")) is None
    assert as_rpc_error(ValueError("x")) is None


def _sidecar_names() -> set[str]:
    return {n.rsplit(".", 1)[1] for n in exception_classes()}


def _caught(handler: ast.ExceptHandler) -> set[str]:
    nodes = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return {n.attr if isinstance(n, ast.Attribute) else getattr(n, "id", "") for n in nodes if n is not None}


def test_no_module_hand_converts_an_input_error():
    """An ``except`` of a sidecar input error re-raises it, raises another sidecar error or
    handles it — it never builds the JSON-RPC error itself: that is ``SidecarApp.handle``'s one
    mapping (and ``as_rpc_error`` where a frame's error is a value)."""
    names = _sidecar_names()
    inputs = {n.rsplit(".", 1)[1] for n, c in exception_classes().items() if issubclass(c, InputError)}
    bad = []
    for path in sorted((ROOT / "sidecar").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ExceptHandler) and _caught(node) & inputs:
                for r in (n for stmt in node.body for n in ast.walk(stmt) if isinstance(n, ast.Raise)):
                    if isinstance(r.exc, ast.Call):
                        fn = r.exc.func
                        called = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", "")
                        if called not in names:
                            bad.append(f"{path.relative_to(ROOT)}:{r.lineno} raises {called}")
    assert not bad, bad


@pytest.mark.parametrize("branch", BRANCHES)
def test_a_branch_is_caught_by_the_root(branch):
    with pytest.raises(SidecarError):
        raise branch("x")
