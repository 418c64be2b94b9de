"""A routing event's priority (seed 002 ``PRIORITY_ORDER``; DESIGN §10 "Events").

Rule 1.  Four priorities, lowest first: ``low``, ``normal``, ``high``, ``critical``.  This Literal
         is the one list: the wire types (:mod:`sidecar.protocol.rules`) refuse anything else
         with -32602 naming the field, and the router ranks by its order
         (:data:`sidecar.router.model.PRIORITIES`).
"""
from __future__ import annotations

from typing import Literal

Priority = Literal["low", "normal", "high", "critical"]
