"""Regular expressions the schema carries (``msgspec.Meta(pattern=…)``): valid in both ECMA-262
(ajv, every JavaScript validator) and Python's ``re`` (msgspec, ``jsonschema``), with the same
meaning in both (the ``\\A…\\Z`` anchors they replace are Python-only, and ajv could not
compile 11 of the 36 inbound methods).

Why the ``(?!\\n)``: JSON Schema's ``pattern`` is a *search*.  Without the ``m`` flag ECMA-262's
``$`` matches only at the end of the input, but Python's ``$`` also matches just before a final
newline, so ``^[^\\x00-\\x1f\\x7f]+$`` would let ``"tu-1\\n"`` through in Python.  The lookahead
refuses that one position; in ECMA-262 it never fires (nothing follows the end).  Proven against
the old ``\\A…\\Z`` patterns by ``tests/contract/test_patterns.py``.
"""
from __future__ import annotations

#: at least one character, none of them a control character (NUL, newline, DEL …)
NO_CONTROL = r"^[^\x00-\x1f\x7f]+$(?!\n)"
#: the same, the empty string allowed (a raw platform id that may be "")
NO_CONTROL_OR_EMPTY = r"^[^\x00-\x1f\x7f]*$(?!\n)"
