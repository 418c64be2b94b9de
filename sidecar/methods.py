"""The registry of bridge methods (DESIGN §4, §13): one entry per method — its params Struct,
the converter built once for that Struct, and its handler.

Rules / theory of operation
---------------------------
* A method is added by **registering** it (:meth:`Methods.register`), never by extending an
  if-chain: the read-only ``why`` today; ``rules.*``, ``groups.*``, ``senders.*``,
  ``deliveries.list`` and ``events.emit`` plug in the same way (a component hands the app its
  registrations).
* The bridge hands params as decoded JSON; each method converts them straight into its own
  Struct with the converter bound at registration (one per method, msgspec's "one decoder per
  type" pattern),
  so a bad field is a -32602 naming the method and nothing reaches the domain half-read.
* ``needs_clock``: a step method refuses (-32602) until a virtual clock was set; read-only
  methods (``why``, ``status``, ``clock.advance_to`` itself) do not need one.
* ``auth`` and ``stream.ack`` belong to the bridge and are never registered here.
"""
from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, Generic, TypeVar

import msgspec

from bridge.errors import InvalidParams, MethodNotFound

P = TypeVar("P", bound=msgspec.Struct)
Handler = Callable[[Any], Awaitable[Any]]


def _convert(typ: type[P], raw: Any) -> P:
    return msgspec.convert(raw if raw is not None else {}, typ)


@dataclass(frozen=True, slots=True)
class Method(Generic[P]):
    """One bridge method: ``decode(params) -> Struct`` (raises InvalidParams), ``handler``."""

    name: str
    params: type[P]
    handler: Callable[[P], Awaitable[Any]]
    needs_clock: bool
    convert: Callable[[Any], P]

    def decode(self, raw: Any) -> P:
        try:
            return self.convert(raw)
        except msgspec.ValidationError as exc:
            raise InvalidParams(f"{self.name}: {exc}") from None


class Methods:
    """Name → :class:`Method`."""

    def __init__(self) -> None:
        self._by_name: dict[str, Method[Any]] = {}

    def register(self, name: str, params: type[P], handler: Callable[[P], Awaitable[Any]], *,
                 needs_clock: bool = True) -> None:
        """Add ``name``; ValueError when it is taken or belongs to the bridge."""
        if name in self._by_name or name in BRIDGE_METHODS:
            raise ValueError(f"bridge method {name!r} is already registered")
        self._by_name[name] = Method(name, params, handler, needs_clock, partial(_convert, params))

    def get(self, name: str) -> Method[Any]:
        """The method; MethodNotFound (-32601) for an unknown one."""
        m = self._by_name.get(name)
        if m is None:
            raise MethodNotFound(f"unknown method {name!r}")
        return m

    def __contains__(self, name: str) -> bool:
        return name in self._by_name

    def __iter__(self):
        return iter(self._by_name)


BRIDGE_METHODS = frozenset({"auth", "stream.ack"})  # answered by the bridge itself


__all__ = ["BRIDGE_METHODS", "Method", "Methods"]
