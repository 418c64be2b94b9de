"""-32602 refusals that name their field (issue 20 item 1; DESIGN §4: error ``data`` always has
``field``; a JSON pointer for raw events).

* ``data.field`` is the params path of the refused value, dotted as msgspec and the manage API
  give it (``project``, ``items.0.sender``); ``"params"`` when the request as a whole is refused
  (params not an object, the virtual clock not set yet).
* A raw platform event's field is a JSON pointer into the params (``/data/sentAt``): the event's
  ``data`` is the platform's own object, whose keys may hold dots.
* :func:`refusal` maps the engine's and the platform clients' refusals (raised before anything
  changed) to that error; ``tests/contract/test_error_field.py`` holds every ``InvalidParams`` in
  ``sidecar/`` to a ``data`` (a static check) and checks the real answers.
"""
from __future__ import annotations

import re
from typing import Any

from bridge.errors import InvalidParams, error_text
from platform_clients import BadRawEvent, UnknownRawEvent
from sidecar.protocol.methods import field_of

__all__ = ["invalid", "refusal", "raw_pointer"]

_INDEX = re.compile(r"\[(\d+)\]")


def invalid(message: str, field: str, **data: Any) -> InvalidParams:
    """A -32602 whose ``data`` is ``{"field": field, **data}``."""
    return InvalidParams(message, data={"field": field, **data})


def raw_pointer(message: str) -> str:
    """The JSON pointer (into the params) of the raw-event value a BadRawEvent's message names;
    ``/data`` when it names none (the data as a whole)."""
    path = field_of(message)
    if not path:
        return "/data"
    return "/data/" + _INDEX.sub(r".\1", path).replace(".", "/").lstrip("/")


def refusal(exc: BaseException) -> InvalidParams:
    """The -32602 for an engine / platform-client refusal (see the module rules)."""
    message = error_text(exc)
    if isinstance(exc, UnknownRawEvent):
        return invalid(message, "name")
    if isinstance(exc, BadRawEvent):
        return invalid(message, raw_pointer(message))
    return invalid(message, getattr(exc, "field", None) or "params")
