"""Bad input never reaches -32603 (issue 18 item 4): a property test over EVERY registered bridge
method's params, through the app's in-process dispatch (:meth:`SidecarApp.handle`, what the
bridge's worker calls with the frame's Raw params), plus the bridge's own ``stream.ack`` and
``auth``.

The strategies are derived from each method's params Struct (``msgspec.inspect.type_info``):
valid-ish values of the declared types (names the app knows — a logged-in TU, a rule, a
target — mixed in so that handlers run, not only decoders) and hostile ones in every place —
integers past int64 (a 5,000-digit literal included), numbers past a float, the wrong JSON type,
lists and objects where scalars go, strings with control characters and lone surrogates, deep
nesting, unknown members.  A method may refuse (-32602, -32601 …) but never answer -32603 (an
internal error: a bad input reached code that did not expect it) nor stop the app.

Examples are derandomized (the same every run, so CI is reproducible); ``FUZZ_EXAMPLES=N``
runs N per method instead of :data:`EXAMPLES` (a deeper local hunt).
"""
from __future__ import annotations

import asyncio
import json
import os
from typing import Any

import msgspec
import msgspec.inspect as mi
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bridge import jsonrpc
from bridge.auth import authenticate
from bridge.errors import INTERNAL_ERROR, INVALID_PARAMS, RpcError, Unauthorized
from bridge.session import Session
from bridge.stream import OutboundStream
from sidecar.protocol import inbound as p
from sidecar.protocol.methods import BRIDGE_METHODS

T0 = 1796025600.0
EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", 60))
KNOWN = ["t", "r", "r0", "audit", "ui", "golden", "stack", "g", "high", "pending"]  # names the app knows
METHODS = sorted(set(p.INBOUND) - BRIDGE_METHODS)

# ---- JSON texts ------------------------------------------------------------------------------
# Strategies yield JSON *text*: a 5,000-digit integer or 1e400 cannot be a Python value that an
# encoder would write, and the frame's params reach the method as text (msgspec.Raw).

HUGE_INTS = ["9" * 5000, "-" + "9" * 5000, str(2 ** 63), str(-(2 ** 63) - 1), str(2 ** 64),
             str(2 ** 53 + 1), "1e400", "-1e400", "1e308", "0.5", "-0", "1E2"]
HOSTILE_STRS = ["", " ", "\x00", "a\nb", "\x7f", "\u2028", "\ud800", "x" * 5000, "[]", "{}", "null"]


def _s(v: Any) -> str:
    return json.dumps(v)


json_scalar = st.one_of(
    st.none().map(_s), st.booleans().map(_s),
    st.integers(-(2 ** 70), 2 ** 70).map(str), st.sampled_from(HUGE_INTS),
    st.floats(allow_nan=False, allow_infinity=False).map(repr).map(lambda r: r.replace("inf", "1e400")),
    st.text(max_size=20).map(_s), st.sampled_from(HOSTILE_STRS).map(_s), st.sampled_from(KNOWN).map(_s),
)


def _obj(items: list[tuple[str, str]]) -> str:
    return "{" + ",".join(f"{_s(k)}:{v}" for k, v in items) + "}"


json_any = st.recursive(
    json_scalar,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4).map(lambda xs: "[" + ",".join(xs) + "]"),
        st.lists(st.tuples(st.one_of(st.text(max_size=8), st.sampled_from(KNOWN)), inner), max_size=4).map(_obj)),
    max_leaves=12)
deep = st.integers(100, 3000).map(lambda n: "[" * n + "]" * n) | st.integers(100, 3000).map(
    lambda n: '{"a":' * n + "1" + "}" * n)
hostile = st.one_of(json_any, deep)
#: the wrong JSON type in one place: the fuzzer's finds were all of this kind
wrong = st.sampled_from(["[]", "{}", '["high"]', '{"level":"high"}', "null", "true", "0", '""',
                         "9" * 5000, "1e400", str(2 ** 64), '"\u0000"', '"\ud800"'])


def _valid(t: Any) -> st.SearchStrategy[str]:
    """JSON texts of values of type ``t`` (msgspec.inspect type info), near its bounds too."""
    if isinstance(t, mi.Metadata):
        return _valid(t.type)
    if isinstance(t, mi.IntType):
        lo = t.ge if t.ge is not None else (t.gt + 1 if t.gt is not None else -(2 ** 63))
        hi = t.le if t.le is not None else (t.lt - 1 if t.lt is not None else 2 ** 63 - 1)
        return st.one_of(st.integers(lo, hi), st.sampled_from([lo - 1, lo, 0, hi, hi + 1])).map(str)
    if isinstance(t, mi.FloatType):
        return st.one_of(st.floats(allow_nan=False, allow_infinity=False).map(repr),
                         st.floats(T0 - 10, T0 + 86400).map(repr), st.integers(-10, 10 ** 6).map(str))
    if isinstance(t, mi.StrType):
        return st.one_of(st.sampled_from(KNOWN), st.text(max_size=(t.max_length or 64) + 2)).map(_s)
    if isinstance(t, mi.BoolType):
        return st.booleans().map(_s)
    if isinstance(t, mi.NoneType):
        return st.just("null")
    if isinstance(t, mi.LiteralType):
        return st.sampled_from(t.values).map(_s)
    if isinstance(t, mi.EnumType):
        return st.sampled_from([m.value for m in t.cls]).map(_s)
    if isinstance(t, mi.UnionType):
        return st.one_of([_valid(x) for x in t.types])
    if isinstance(t, (mi.ListType, mi.VarTupleType, mi.SetType, mi.FrozenSetType)):
        return st.lists(_field(t.item_type), max_size=4).map(lambda xs: "[" + ",".join(xs) + "]")
    if isinstance(t, mi.TupleType):
        return st.tuples(*[_field(x) for x in t.item_types]).map(lambda xs: "[" + ",".join(xs) + "]")
    if isinstance(t, mi.DictType):
        return st.lists(st.tuples(st.one_of(st.text(max_size=8), st.sampled_from(KNOWN)), _field(t.value_type)),
                        max_size=3).map(_obj)
    if isinstance(t, mi.StructType):
        return _struct(t)
    return json_any  # Any, Raw, custom: any JSON


def _field(t: Any) -> st.SearchStrategy[str]:
    """A field's value: mostly of its type, sometimes anything at all."""
    return st.one_of(_valid(t), _valid(t), _valid(t), hostile)


def _struct(t: mi.StructType) -> st.SearchStrategy[str]:
    """An object of the Struct's fields: each present or not, plus at times an unknown one."""
    fields = [st.tuples(st.just(f.encode_name), _field(f.type)) for f in t.fields]
    return st.tuples(
        st.tuples(*[st.one_of(st.none(), f) for f in fields]) if fields else st.just(()),
        st.lists(st.tuples(st.sampled_from(["bogus", "seq", "write", "__proto__"]), hostile), max_size=1),
    ).map(lambda pair: _obj([kv for kv in pair[0] if kv is not None] + pair[1]))


# A valid call of each method: the mutations below change ONE place of it (every path of the
# value, every field of the Struct), so a hostile value meets code past the other checks — how
# the fuzzer found ``events.emit`` with a list ``priority`` behind a valid source/subject/action.
SEEDS: dict[str, dict] = {
    "session.login": {"tu": "t", "project": "golden", "operator": "op"},
    "session.logout": {"tu": "t"},
    "platform.event": {"project": "golden", "tu": "t", "name": "receivePrivateMessage", "received_at": T0,
                       "data": {"messageId": "m", "senderId": "r", "recipientId": "t", "sentAt": T0, "text": "hi"}},
    "platform.reconnected": {"project": "golden", "tu": "t"},
    "platform.poll": {"project": "golden", "tu": "t", "pass": "online", "data": {"online": []}},
    "favorite.update": {"tu": "t", "ru": "r", "active": True, "chat_limit": 3, "spend_30d_usd": 1.5},
    "task.close": {"task_id": "x", "reason": "dismissed"},
    "clock.advance_to": {"t": T0 + 1},
    "tasks.list": {"tu": "t"},
    "why": {"tu": "t", "ru": "r", "since": T0, "after_id": 1, "limit": 5},
    "groups.get": {"group": "g"},
    "groups.delete": {"group": "nope"},
    "groups.create": {"name": "g2", "priority": 5, "failed_in_row": 1, "from_time": "08:00", "to_time": "20:00"},
    "groups.patch": {"group": "g", "priority": 6, "cooldown_delay_from": 1.0, "cooldown_delay_to": 2.0},
    "senders.get": {"sender": "stack"},
    "senders.history": {"sender": "stack", "since": T0, "after_id": 0, "limit": 10},
    "senders.recover": {"sender": "audit", "by": "me"},
    "rules.list": {"after": [0, "a"], "limit": 10},
    "rules.create": {"name": "r1", "conditions": {"source": "ui", "subjects": ["s"], "actions": ["a"],
                                                  "priority_min": "high", "payload": {"k": [1, 2]}},
                     "actions": [{"target": "audit", "template": "{{ event.subject }}"}],
                     "throttle_seconds": 5, "weight": 1, "enabled": True},
    "rules.patch": {"name": "r0", "changes": {"conditions": {"priority_min": "low"}, "weight": 2,
                                              "throttle_seconds": None}},
    "rules.delete": {"name": "nope"},
    "deliveries.list": {"status": "pending", "target": "audit", "since": T0, "after_seq": 0, "limit": 10},
    "events.emit": {"source": "ui", "subject": "s", "action": "a", "priority": "high", "payload": {"k": 1},
                    "dedup_key": "d", "ttl_s": 60},
    "platform.events": {"events": [{"project": "golden", "tu": "t", "name": "receivePrivateMessage",
                                    "data": {"messageId": "m2", "senderId": "r", "recipientId": "t",
                                             "sentAt": T0, "text": "hi"}, "if_open": "x"}]},
    **{f"groups.assignments.{m}": {"items": [{"sender": "audit", "groups": ["g"]}]} for m in ("set", "add", "remove")},
    **{f"groups.senders.{m}": {"group": "g", "senders": ["audit"]} for m in ("set", "add", "remove")},
    "stream.ack": {"seq": 1},
    "auth": {"token": "t", "client": "fuzz", "version": "1"},
}


def _paths(v: Any, at: tuple = ()) -> list[tuple]:
    """Every place in a JSON value: object members and list items, the value itself first."""
    out = [at]
    if isinstance(v, dict):
        for k, x in v.items():
            out += _paths(x, (*at, k))
    elif isinstance(v, list):
        for i, x in enumerate(v):
            out += _paths(x, (*at, i))
    return out


def _text(v: Any, at: tuple, put: str) -> str:
    """``v`` as JSON text with the value at path ``at`` replaced by the text ``put``."""
    if not at:
        return put
    head, rest = at[0], at[1:]
    if isinstance(v, dict):
        items = [(k, _text(x, rest, put) if k == head else _s(x)) for k, x in v.items()]
        if head not in v:
            items.append((head, _text(None, rest, put)))
        return _obj(items)
    if isinstance(v, list):
        return "[" + ",".join(_text(x, rest, put) if i == head else _s(x) for i, x in enumerate(v)) + "]"
    return _obj([(str(head), _text(None, rest, put))])


def _mutants(name: str, struct: type) -> st.SearchStrategy[str]:
    """The seed call of ``name`` with one place — a path of the seed, or a field of the Struct
    it lacks — holding a hostile value or a valid one of the field's type."""
    seed = SEEDS.get(name, {})
    fields = {f.encode_name: f.type for f in mi.type_info(struct).fields}
    paths = sorted(set(_paths(seed)) | {(f,) for f in fields}, key=repr)
    return st.sampled_from(paths).flatmap(lambda at: st.one_of(
        wrong, hostile, _valid(fields[at[0]]) if len(at) == 1 and at[0] in fields else wrong,
    ).map(lambda put: _text(seed, at, put)))


def params_of(struct: type, name: str = "") -> st.SearchStrategy[str]:
    """Params texts for method ``name``: the seed call with one place changed, an object of
    the Struct's fields, or anything at all."""
    return st.one_of(_mutants(name, struct), _mutants(name, struct), _struct(mi.type_info(struct)), hostile)


# ---- the app, once per method ------------------------------------------------------------------

@pytest.fixture
def app_runner(tmp_path, monkeypatch):
    """An asyncio runner and a virtual-clock app in it: clock set, TU ``t`` logged in, a rule
    ``r0`` to the journal target ``audit``, a sender group ``g``; one advance runs at most 50 timers (a fuzzed far
    ``t`` stays cheap — the cut-off answer is a -32602 like any other)."""
    from sidecar.app import root as app_mod
    from sidecar.config import Settings
    from sidecar.store.db import Store

    monkeypatch.setenv("SIDECAR_ROUTER_TARGETS", json.dumps({"audit": {"channel": "journal"}}))
    monkeypatch.setattr(app_mod, "MAX_FIRES_PER_ADVANCE", 50)
    runner = asyncio.Runner()

    async def start():
        store = await Store.open(tmp_path / "sidecar.db")
        app = app_mod.SidecarApp(Settings(token="t", clock="virtual", data_dir=tmp_path), store)
        app.bridge.notify = lambda m, p=None: 0  # type: ignore[method-assign]
        await app.handle("clock.advance_to", {"t": T0})
        await app.handle("session.login", {"tu": "t", "project": "golden"})
        await app.handle("rules.create", {"name": "r0", "actions": [{"target": "audit"}]})
        await app.handle("groups.create", {"name": "g", "priority": 1})
        return app, store

    app, store = runner.run(start())
    yield runner, app

    async def stop():
        await app.close()
        await store.close()
    runner.run(stop())
    runner.close()


@pytest.mark.parametrize("method", METHODS)
def test_no_params_of_any_method_reach_an_internal_error(app_runner, method):
    runner, app = app_runner
    struct = app.methods.get(method).params
    assert struct is not None, f"{method} takes untyped params: give it a Struct"

    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(params_of(struct, method))
    def check(text: str) -> None:
        try:
            runner.run(app.handle(method, msgspec.Raw(text.encode("utf-8", "surrogatepass"))))
        except RpcError as exc:
            assert exc.code != INTERNAL_ERROR, (method, text[:300], exc)
            if exc.code == INVALID_PARAMS:  # every refusal names its field (DESIGN §4)
                assert isinstance(exc.data, dict) and exc.data.get("field"), (method, text[:300], exc, exc.data)
        assert app.failed is None, (method, text[:300], app.failed)

    check()


def test_every_method_of_the_catalogue_is_fuzzed():
    """The parametrization is the catalogue: a method added to ``INBOUND`` is fuzzed at once
    (a seed call is optional: without one, only the Struct-derived values are tried)."""
    assert set(METHODS) | BRIDGE_METHODS == set(p.INBOUND) and BRIDGE_METHODS == {"auth", "stream.ack"}
    assert set(SEEDS) <= set(p.INBOUND)


# ---- the bridge's own methods -------------------------------------------------------------------

class _Sink:
    """What a Session sends, decoded."""

    def __init__(self) -> None:
        self.session = Session(None, OutboundStream(), None)  # type: ignore[arg-type]
        self.session.stream.append("task.created", {"i": 1})

    def sent(self) -> list[dict]:
        out, d = [], self.session.delivery
        while (frame := d.next()) is not None:
            out.append(msgspec.json.decode(frame))
        return out


@settings(max_examples=EXAMPLES * 4, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(params_of(p.StreamAck, "stream.ack"), st.booleans())
def test_no_stream_ack_params_raise_or_answer_an_internal_error(text, is_request):
    """``stream.ack`` is the bridge's: decoded in the reader (raw params and decoded alike)."""
    for raw_params in (True, False):
        frame = ('{"jsonrpc":"2.0",%s"method":"stream.ack","params":%s}'
                 % ('"id":1,' if is_request else "", text)).encode("utf-8", "surrogatepass")
        try:
            msg = jsonrpc.decode(frame, raw_params=raw_params)
        except RpcError as exc:
            assert exc.code != INTERNAL_ERROR
            continue
        sink = _Sink()
        sink.session.on_ack(msg)
        for answer in sink.sent():
            assert answer.get("error", {}).get("code") != INTERNAL_ERROR, (text[:300], answer)
            if "error" in answer:  # a refusal names its field
                assert answer["error"].get("data", {}).get("field"), (text[:300], answer)


@settings(max_examples=EXAMPLES * 4, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(params_of(p.Auth, "auth"))
def test_no_auth_params_raise_anything_but_unauthorized(text):
    frame = ('{"jsonrpc":"2.0","id":1,"method":"auth","params":%s}' % text).encode("utf-8", "surrogatepass")
    try:
        msg: Any = jsonrpc.decode(frame)
    except RpcError as exc:
        msg = exc
    try:
        authenticate(msg, b"t")
    except Unauthorized:
        pass
