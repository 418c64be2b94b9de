"""The field a msgspec ``ValidationError`` names, as ``data.field`` of a -32602 (every
-32602 names its field).  Pure (``re`` only), so ``platform_clients`` use it too without pulling
in the bridge."""
from __future__ import annotations

import re

# msgspec names the field in its message only: "… - at `$.items[0].sender`", "Object contains
# unknown field `bogus`", "Object missing required field `tu`" (msgspec 0.18+ wording)
_AT = re.compile(r"at `\$\.([^`]+)`$")
_NAMED = re.compile(r"(?:unknown|required) field `([^`]+)`")


def field_of(message: str) -> str | None:
    """The field a msgspec ``ValidationError`` message names, as ``data.field`` of the -32602
    answer (the same dotted path the router and the manage API give), or None."""
    at = _AT.search(message)
    named = _NAMED.search(message)
    if named is not None:  # a field inside an object: prefix the object's path
        return f"{at.group(1)}.{named.group(1)}" if at is not None else named.group(1)
    return at.group(1) if at is not None else None
