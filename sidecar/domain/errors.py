"""The sidecar's one exception root and its four branches.

Rules / theory of operation
---------------------------
1. Every exception class defined in ``sidecar/`` and ``platform_clients/`` derives from
   :class:`SidecarError`, through exactly one of its branches (``tests/sidecar/test_errors.py``
   walks the modules; the one justified exception is ``senders.table.MachineInvariantError``, a
   bug of the machine — docs/decisions.md "One exception root").
2. A branch says what went wrong, not where: :class:`InputError` (the caller's input is not
   what the method takes), :class:`Refusal` (understood, but refused: a conflict, something
   not there, the process shutting down), :class:`StepFailed` (a step could not commit: the
   crash-only exit) and :class:`IOFailure` (the store, Stack, a channel).
3. Each branch carries a status hint, as h11's ``ProtocolError.error_status_hint`` does: the
   JSON-RPC error code its answer has (:attr:`SidecarError.error_status_hint`).  An
   :class:`InputError` may carry its own ``code`` and ``field`` (``data.field`` of the answer,
   the dotted JSON path of the offending field).
4. The conversion to a JSON-RPC error object is :meth:`SidecarError.error_object` and nothing
   else; the bridge (which imports nothing of the sidecar) takes any exception with that method
   (``bridge.errors.ErrorObject``), and ``SidecarApp.handle`` maps in ONE ``except SidecarError``.
5. A subclass that callers catch as ``ValueError`` (or jinja2's ``SecurityError``) keeps that
   as a second base; this module defines no ``__init__`` but :class:`InputError`'s keyword-only
   one, so re-parenting changes no constructor and no message.

This module imports nothing, so every floor — the sans-I/O rooms, ``protocol/``,
``platform_clients/`` — may import it.
"""
from __future__ import annotations

from typing import Any, ClassVar

__all__ = ["INTERNAL_ERROR", "INVALID_PARAMS", "SHUTTING_DOWN", "IOFailure", "InputError", "Refusal", "SidecarError",
           "StepFailed"]

# the JSON-RPC 2.0 codes the hints use (the same values as bridge.errors, which this floor may
# not import)
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
SHUTTING_DOWN = -32002  # the process is stopping: nothing of the request was done (DESIGN §4)


class SidecarError(Exception):
    """Root of every exception the sidecar raises (module rules).  ``error_status_hint``: the
    JSON-RPC code of the error answering a request this ended."""

    error_status_hint: ClassVar[int] = INTERNAL_ERROR

    def error_object(self) -> tuple[int, str, Any]:
        """``(code, message, data)`` of the JSON-RPC error answering a request this ended; the
        default is what the bridge answers any other exception with (-32603 naming the class)."""
        return self.error_status_hint, f"{type(self).__name__}: {self}", None


class InputError(SidecarError):
    """The caller's input is not what the method takes: -32602 (or its own ``code``), naming the
    offending ``field`` in ``data`` when it is known.  The message is the exception's text."""

    error_status_hint: ClassVar[int] = INVALID_PARAMS
    code: int | None = None  # a JSON-RPC code other than the hint's (None: the hint)
    field: str | None = None  # dotted JSON path of the offending field (``items[3].sender``)
    context: str | None = None  # the call this answers (a method name), prefixed to the message

    def __init__(self, *args: Any, field: str | None = None, code: int | None = None) -> None:
        super().__init__(*args)
        if field is not None:
            self.field = field
        if code is not None:
            self.code = code

    def error_object(self) -> tuple[int, str, Any]:
        code = self.code if self.code is not None else self.error_status_hint
        message = str(self) if self.context is None else f"{self.context}: {self}"
        return code, message, None if self.field is None else {"field": self.field}


class Refusal(SidecarError):
    """A request understood but refused — a conflict, something not there, the process
    shutting down; nothing changed.  -32602 unless the class says otherwise; the message is
    the exception's text."""

    error_status_hint: ClassVar[int] = INVALID_PARAMS

    def error_object(self) -> tuple[int, str, Any]:
        return self.error_status_hint, str(self), None


class StepFailed(SidecarError):
    """A step crashed or could not be committed; the process must restart (exit 6): the
    crash-only exit.  -32603 with the exception's text."""

    error_status_hint: ClassVar[int] = INTERNAL_ERROR

    def error_object(self) -> tuple[int, str, Any]:
        return self.error_status_hint, str(self), None


class IOFailure(SidecarError):
    """The store, Stack or a channel failed (I/O); -32603 naming the class, as the bridge
    answers an unexpected exception."""

    error_status_hint: ClassVar[int] = INTERNAL_ERROR
