"""``sidecar schema``: the whole bridge contract as one JSON Schema 2020-12 document (DESIGN §4 "The
contract is portable") that any conforming validator compiles — ajv in
strict mode, Python's ``jsonschema`` (``tests/contract``, ``clients/typescript``).

Layout (everything under ``$defs``; the root validates any frame either side sends):

* ``jsonrpc.*`` — the envelope: ``Request``, ``Notification``, ``Result``, ``Error``,
  ``ErrorObject`` (with ``ErrorCode``), ``Id``.  Batches (arrays) are refused with -32600.
* ``in.<method>`` — an Electron → sidecar **request** frame (``id`` required) with its params;
  ``in.<method>.result`` / ``in.<method>.error`` — the sidecar's answer to it.  Any request may
  also be sent as a notification (no ``id``: handled, not answered); ``stream.ack`` usually is
  (``in.stream.ack.notification``).
* ``out.<method>`` — a sidecar → Electron frame: a **notification** for the stream methods (``seq``
  required) and for ``log`` (outside the stream: no ``seq``, :data:`~sidecar.cli.schema_tables.STREAM_METHODS`
  lists the stream's), or a **request** (``platform.request``, ``platform.requests``), with
  ``out.<method>.result`` — what Electron answers.
* ``ElectronToSidecar`` / ``SidecarToElectron`` — every frame of one direction (``anyOf``).
* ``RawEvent`` — ``platform.event``'s ``(project, name, data)`` as a union tagged by
  ``project`` + ``name`` (``raw.<project>.<name>``); ``PlatformCall`` — ``platform.request``'s params
  as one closed variant per ``(project, method)`` (``call.<project>.<method>``) with
  ``answer.<project>.<method>`` the platform's answer (:mod:`platform_clients.catalogue`).
* ``ReadyLine``, ``CloseCode``, ``ExitCode``, ``Capability`` (:mod:`sidecar.cli.schema_tables`).

Rules: inbound objects stay open (unknown fields are ignored, DESIGN §4); every object the
sidecar sends is closed (``additionalProperties: false``) and its enums closed
(:data:`~sidecar.cli.schema_tables.ENUMS`); ``seq`` is required on stream notifications; a
``params`` member is required when the method has a required param.
"""
from __future__ import annotations

import copy
from typing import Any

import msgspec

from sidecar import PROTOCOL_MAJOR, PROTOCOL_VERSION
from sidecar.cli import schema_tables as T
from sidecar.protocol.answers import ANSWERS, PlatformRequestsAnswer
from sidecar.protocol.inbound import INBOUND
from sidecar.protocol.outbound import OUTBOUND
from platform_clients.catalogue import RAW_EVENTS, REQUESTS

__all__ = ["json_schema"]

REF = "#/$defs/{name}"
SIDECAR_REQUESTS = ("platform.request", "platform.requests")
JSONRPC = {"const": "2.0"}
ID = {"$ref": "#/$defs/jsonrpc.Id"}


def _ref(name: str) -> dict:
    return {"$ref": REF.format(name=name)}


def _envelope() -> dict[str, dict]:
    params = {"anyOf": [{"type": "object"}, {"type": "array"}]}
    return {
        "jsonrpc.Id": {"description": "a request id: a string, a 64-bit integer or null",
                       "anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]},
        "jsonrpc.Request": {"type": "object", "required": ["jsonrpc", "id", "method"],
                            "properties": {"jsonrpc": JSONRPC, "id": ID, "method": {"type": "string"},
                                           "params": params}},
        "jsonrpc.Notification": {"type": "object", "required": ["jsonrpc", "method"],
                                 "properties": {"jsonrpc": JSONRPC, "method": {"type": "string"},
                                                "params": params, "id": False}},
        "jsonrpc.Result": {"type": "object", "required": ["jsonrpc", "id", "result"],
                           "properties": {"jsonrpc": JSONRPC, "id": ID, "result": True}},
        "jsonrpc.Error": _error_frame(_ref("ErrorData")),
        "jsonrpc.ErrorObject": {"type": "object", "required": ["code", "message"],
                                "properties": {"code": {"type": "integer"}, "message": {"type": "string"},
                                               "data": True}},
        "jsonrpc.ErrorCode": T.code_table(T.ERROR_CODES),
        "CloseCode": T.code_table(T.CLOSE_CODES),
        "ExitCode": T.code_table(T.EXIT_CODES),
        "Capability": T.code_table(T.CAPABILITIES),  # the auth answer's capabilities, each with its meaning
    }


def _error_frame(data: dict) -> dict:
    """An error response; ``data`` absent or as given (the sidecar's errors are closed)."""
    error = {"type": "object", "required": ["code", "message"], "additionalProperties": False,
             "properties": {"code": {"type": "integer"}, "message": {"type": "string"}, "data": data}}
    return {"type": "object", "required": ["jsonrpc", "id", "error"], "additionalProperties": False,
            "properties": {"jsonrpc": JSONRPC, "id": ID, "error": error}}


def _call(method: str, params: dict, *, request: bool, params_required: bool, closed: bool) -> dict:
    props: dict[str, Any] = {"jsonrpc": JSONRPC, "method": {"const": method}, "params": params}
    required = ["jsonrpc", "method"]
    if request:
        props = {"jsonrpc": JSONRPC, "id": ID, "method": {"const": method}, "params": params}
        required.insert(1, "id")
    if params_required:
        required.append("params")
    frame: dict = {"type": "object", "required": required, "properties": props}
    if closed:
        frame["additionalProperties"] = False
    if not request:
        props["id"] = False  # a notification has no id
    return frame


def _result(result: dict, *, closed: bool) -> dict:
    frame: dict = {"type": "object", "required": ["jsonrpc", "id", "result"],
                   "properties": {"jsonrpc": JSONRPC, "id": ID, "result": result}}
    if closed:
        frame["additionalProperties"] = False
    return frame


def _has_required(typ: Any) -> bool:
    return isinstance(typ, type) and issubclass(typ, msgspec.Struct) and any(
        f.required for f in msgspec.structs.fields(typ))


def _tagged(tag: str, variants: dict[tuple[str, str], dict], member: str) -> dict[str, dict]:
    """One ``$def`` per ``(project, name)`` and their union: ``{project, <tag>, <member>}``."""
    defs = {}
    for (project, name), schema in variants.items():
        defs[f"{'raw' if tag == 'name' else 'call'}.{project}.{name}"] = {
            "type": "object", "required": ["project", tag, member],
            "properties": {"project": {"const": project}, tag: {"const": name}, member: schema}}
    return defs


def json_schema() -> dict:
    """The contract (see the module header); deterministic, so a checked-in copy can be diffed."""
    raw = [(p, n, t) for p, events in RAW_EVENTS.items() for n, t in events.items()]
    calls = [(p, m, a, r) for p, reqs in REQUESTS.items() for m, (a, r) in reqs.items()]
    types: list[Any] = (list(INBOUND.values()) + list(OUTBOUND.values()) + list(ANSWERS.values())
                        + [PlatformRequestsAnswer, T.ReadyLine, T.ErrorData]
                        + [t for _, _, t in raw] + [a for *_, a, _ in calls] + [r for *_, r in calls])
    schemas, defs = msgspec.json.schema_components(types, ref_template=REF)
    it = iter(schemas)
    s_in = {m: next(it) for m in INBOUND}
    s_out = {m: next(it) for m in OUTBOUND}
    s_ans = {m: next(it) for m in ANSWERS}
    s_requests_answer, s_ready, s_error = next(it), next(it), next(it)
    s_raw = {(p, n): next(it) for p, n, _ in raw}
    s_call = {(p, m): next(it) for p, m, _, _ in calls}
    s_answer = {(p, m): next(it) for p, m, _, _ in calls}
    defs = copy.deepcopy(defs)
    assert s_ready == _ref("ReadyLine") and s_error == _ref("ErrorData")
    _close_outbound(defs, [*s_out.values(), *s_ans.values(), *s_call.values(), s_ready, s_error])
    for name, fields in T.ENUMS.items():
        for field, schema in fields.items():
            props = defs[name]["properties"]
            assert field in props, f"ENUMS names {name}.{field}, which the Struct lacks"
            props[field] = schema
    for method in T.STREAM_METHODS:
        struct = defs[OUTBOUND[method].__name__]
        struct["required"] = sorted({*struct.get("required", ()), "seq"})
        struct["properties"]["seq"] = {"type": "integer", "minimum": 1}

    defs.update(_envelope())
    defs.update(_tagged("name", {k: v for k, v in s_raw.items()}, "data"))
    # platform.request: one closed variant per (project, method) — PlatformRequest's own fields
    # with the tag consts and the method's params Struct (an allOf would leave each variant open)
    base = defs["PlatformRequest"]
    for (project, name), schema in s_call.items():
        props = {**base["properties"], "project": {"const": project}, "method": {"const": name},
                 "params": schema}
        defs[f"call.{project}.{name}"] = {**base, "properties": props,
                                          "required": sorted({*base.get("required", ()), "params"})}
    defs["RawEvent"] = {"description": "platform.event's project + name + data, tagged by project and name",
                        "oneOf": [_ref(f"raw.{p}.{n}") for p, n in s_raw]}
    defs["PlatformCall"] = {"description": "platform.request's project + method + params, tagged",
                            "oneOf": [_ref(f"call.{p}.{m}") for p, m in s_call]}
    for (p, m), schema in s_answer.items():
        defs[f"answer.{p}.{m}"] = schema
    defs["PlatformAnswer"] = {"description": "Electron's answer to platform.request: the platform's JSON"
                              " (answer.<project>.<method> for the method asked)",
                              "anyOf": [_ref(f"answer.{p}.{m}") for p, m in s_answer]}
    # the tagged unions ride on the frames' own Structs
    defs["in.platform.event.params"] = {"allOf": [s_in["platform.event"], _ref("RawEvent")]}
    s_in["platform.event"] = _ref("in.platform.event.params")
    defs["BatchEvent"] = {"allOf": [dict(defs["BatchEvent"]), _ref("RawEvent")]}
    defs["PlatformRequest"] = {"description": "a platform.request's params: project, method and"
                               " params tagged (call.<project>.<method>)", "$ref": "#/$defs/PlatformCall"}

    into, outof = [], []
    for m, params in s_in.items():
        closed_in = False  # Electron → sidecar: unknown fields are ignored
        defs[f"in.{m}"] = _call(m, params, request=True, params_required=_has_required(INBOUND[m]),
                                closed=closed_in)
        defs[f"in.{m}.result"] = _result(s_ans[m], closed=True)
        defs[f"in.{m}.error"] = _error_frame(s_error)
        into.append(_ref(f"in.{m}"))
        outof += [_ref(f"in.{m}.result"), _ref(f"in.{m}.error")]
    defs["in.stream.ack.notification"] = _call("stream.ack", s_in["stream.ack"], request=False,
                                               params_required=True, closed=False)
    into.append(_ref("in.stream.ack.notification"))
    for m, params in s_out.items():
        request = m in SIDECAR_REQUESTS
        defs[f"out.{m}"] = _call(m, params, request=request, params_required=True, closed=True)
        outof.append(_ref(f"out.{m}"))
    defs["out.platform.request.result"] = _result(_ref("PlatformAnswer"), closed=False)
    defs["out.platform.requests.result"] = _result(s_requests_answer, closed=False)
    defs["out.platform.request.error"] = {"$ref": "#/$defs/jsonrpc.Error"}
    into += [_ref("out.platform.request.result"), _ref("out.platform.requests.result"), _ref("jsonrpc.Error")]
    defs["ElectronToSidecar"] = {"description": "every frame Electron sends", "anyOf": into}
    defs["SidecarToElectron"] = {"description": "every frame the sidecar sends", "anyOf": outof}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"urn:operator-sidecar:bridge-protocol:{PROTOCOL_MAJOR}",
        "title": "operator-sidecar bridge protocol",
        "description": (f"protocol {PROTOCOL_VERSION}. JSON-RPC 2.0 text frames over a loopback websocket;"
                        " $defs in.<method> are Electron → sidecar requests (in.<method>.result /"
                        " .error the answers), out.<method> sidecar → Electron notifications (seq"
                        " required, but for log: outside the stream) and requests (platform.request, platform.requests); see"
                        " docs/protocol.md."),
        "anyOf": [_ref("ElectronToSidecar"), _ref("SidecarToElectron")],
        "$defs": dict(sorted(defs.items())),
    }


def _close_outbound(defs: dict[str, dict], roots: list[dict]) -> None:
    """``additionalProperties: false`` on every object reachable from ``roots`` (what the
    sidecar sends).  Free-form maps (``dict`` fields: a task's ``meta``, a rule) stay maps."""
    seen: set[str] = set()
    stack = [r for r in roots]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                name = ref[len("#/$defs/"):]
                if name not in seen and name in defs:
                    seen.add(name)
                    target = defs[name]
                    if "properties" in target:
                        target.setdefault("additionalProperties", False)
                    stack.append(target)
            stack.extend(v for k, v in node.items() if k != "$ref")
        elif isinstance(node, list):
            stack.extend(node)
