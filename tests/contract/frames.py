"""Validating frames against ``sidecar schema`` (issue 20 item 2): each frame against the ``$def``
of what it is — a request by its method, an answer by the method of the request it answers (the
ids of each direction are tracked per machine), a ``platform.request`` answer by the project and
method asked — so a frame cannot pass by matching some other method's shape."""
from __future__ import annotations

import functools
import json
from collections.abc import Iterable
from typing import Any

from jsonschema import Draft202012Validator
from referencing import Registry, Resource

from sidecar.cli.schema import json_schema


@functools.cache
def document() -> dict:
    return json_schema()


@functools.cache
def validator(name: str) -> Draft202012Validator:
    """A validator of ``$defs[name]`` (refs resolved inside the document)."""
    doc = document()
    registry = Registry().with_resource(doc["$id"], Resource.from_contents(doc))
    return Draft202012Validator({"$ref": f"{doc['$id']}#/$defs/{name}"}, registry=registry)


def problems(name: str, instance: Any) -> list[str]:
    return [f"{name}: {'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message[:300]}"
            for e in validator(name).iter_errors(instance)]


def def_of(direction: str, frame: dict, asked: dict[tuple[str, Any], Any]) -> list[str]:
    """The ``$def`` names ``frame`` must match; records requests in ``asked``
    (``(direction, id)`` → method or ``(method, project, platform method)``)."""
    if direction == "ready":
        return ["ReadyLine"]
    side = "in" if direction == "to_sidecar" else "out"
    if "method" in frame:
        method = frame["method"]
        if "id" not in frame:
            return [f"{side}.{method}.notification" if side == "in" else f"out.{method}"]
        if side == "out" and method == "platform.request":
            p = frame.get("params", {})
            asked[(direction, frame["id"])] = (method, p.get("project"), p.get("method"))
        else:
            asked[(direction, frame["id"])] = method
        return [f"{side}.{method}"]
    other = "to_electron" if direction == "to_sidecar" else "to_sidecar"
    method = asked.pop((other, frame.get("id")), None)
    if method is None:
        return ["jsonrpc.Error" if "error" in frame else "jsonrpc.Result"]
    kind = "error" if "error" in frame else "result"
    if isinstance(method, tuple):  # platform.request: the platform's answer to that call
        _, project, call = method
        names = [f"out.platform.request.{kind}"]
        if kind == "result":
            return names + [f"answer.{project}.{call}:result"]
        return names
    return [f"in.{method}.{kind}" if side == "out" else f"out.{method}.{kind}"]


def check(lines: Iterable[dict]) -> tuple[int, list[str]]:
    """(frames checked, problems) over capture lines ``{"machine", "dir", "frame"}``."""
    asked: dict[str, dict] = {}
    count, out = 0, []
    for line in lines:
        frame = json.loads(line["frame"])
        ids = asked.setdefault(line["machine"], {})
        if line["dir"] == "to_sidecar" and frame.get("method") == "auth":
            ids.clear()  # a new connection: ids count from 1 again
        for name in def_of(line["dir"], frame, ids):
            if name.endswith(":result"):
                out += problems(name[:-len(":result")], frame["result"])
            else:
                out += problems(name, frame)
        count += 1
    return count, out
