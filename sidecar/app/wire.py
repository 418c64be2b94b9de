"""Domain notes → wire Structs (DESIGN §4): the app's one translation from what a step decided
(:mod:`sidecar.domain.notes`) to what Electron receives (:mod:`sidecar.protocol.outbound`).

* :func:`to_wire` converts a note into ``sidecar.protocol.outbound.OUTBOUND[method]`` by attribute (msgspec's
  ``from_attributes``): one converter per method, the field names are the contract.  A note whose
  method has no wire Struct is a programming error (KeyError).
* :func:`task_view` is a task as ``tasks.list`` lists it.
"""
from __future__ import annotations

from typing import Any

import msgspec

from sidecar.protocol.inbound import Params
from sidecar.protocol.outbound import OUTBOUND, TaskView
from sidecar.domain.tasks import Task


def to_wire(method: str, note: Any) -> Params:
    """The wire Struct of ``note`` for the outbound ``method`` (``seq`` is the bridge's)."""
    return msgspec.convert(note, OUTBOUND[method], from_attributes=True)


def task_view(t: Task) -> TaskView:
    """A task as Electron shows it (``tasks.list``): its ``WIRE_FIELDS``, by attribute."""
    return msgspec.convert(t, TaskView, from_attributes=True)
