"""The registry of bridge methods (DESIGN §4, §13): one entry per method — its params Struct,
the JSON decoder built once for that Struct, and its handler.

Rules / theory of operation
---------------------------
* A method is added by **registering** it (:meth:`Methods.register`), never by extending an
  if-chain: the read-only ``why`` today; ``rules.*``, ``groups.*``, ``senders.*``,
  ``deliveries.list`` and ``events.emit`` plug in the same way (a component hands the app its
  registrations).
* **Decode once**: the bridge hands params undecoded (``BridgeServer(raw_params=True)``: the
  envelope is decoded with ``params`` as :class:`msgspec.Raw`); each method decodes that Raw
  straight into its own Struct with the :class:`msgspec.json.Decoder` built at registration (one
  per method, msgspec's "one decoder per type" pattern) — no dict in between, no second
  conversion.  A bad field is a -32602 naming the method and the field
  (``"favorite.update: Expected `str`, got `int` - at `$.ru`"``), and nothing reaches the domain
  half-read.  A method registered without a Struct (``params=None``) gets the plain JSON value.
* An in-process caller (tests, a tool) may pass a Python value instead of Raw; it is encoded to
  JSON and goes through the same decoder, so it meets exactly the checks and errors Electron does.
* ``needs_clock``: a step method refuses (-32602) until a virtual clock was set; read-only
  methods (``why``, ``status``, ``clock.advance_to`` itself) do not need one.
* ``auth`` and ``stream.ack`` belong to the bridge and are never registered here.
"""
from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import msgspec

from bridge.errors import InvalidParams, MethodNotFound

P = TypeVar("P", bound=msgspec.Struct)
Handler = Callable[[Any], Awaitable[Any]]


_encoder = msgspec.json.Encoder()  # in-process params only (see the module rules)
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
_EMPTY = b"{}"  # absent params


@dataclass(frozen=True, slots=True)
class Method(Generic[P]):
    """One bridge method: ``decode(params) -> Struct`` (raises InvalidParams), ``handler``."""

    name: str
    params: type[P] | None  # None: the handler takes the plain JSON value
    handler: Callable[[P], Awaitable[Any]]
    needs_clock: bool
    decoder: msgspec.json.Decoder  # built once, at registration

    def decode(self, raw: Any) -> P:
        """``raw``: the frame's undecoded params (:class:`msgspec.Raw` or bytes) — decoded once;
        any other value is an in-process caller's, encoded first.  InvalidParams names the method
        and the offending field."""
        if raw is None:
            raw = _EMPTY
        elif not isinstance(raw, (msgspec.Raw, bytes)):
            raw = _encoder.encode(raw)
        try:
            return self.decoder.decode(raw)
        except msgspec.ValidationError as exc:
            field = field_of(str(exc))
            raise InvalidParams(f"{self.name}: {exc}",
                                data=None if field is None else {"field": field}) from None
        except msgspec.DecodeError as exc:  # only bytes from an in-process caller can be malformed
            raise InvalidParams(f"{self.name}: params are not JSON ({exc})") from None


class Methods:
    """Name → :class:`Method`."""

    def __init__(self) -> None:
        self._by_name: dict[str, Method[Any]] = {}

    def register(self, name: str, params: type[P] | None, handler: Callable[[P], Awaitable[Any]],
                 *, needs_clock: bool = True) -> None:
        """Add ``name`` with its params Struct (None: plain JSON) and build its one decoder;
        ValueError when it is taken or belongs to the bridge."""
        if name in self._by_name or name in BRIDGE_METHODS:
            raise ValueError(f"bridge method {name!r} is already registered")
        decoder = msgspec.json.Decoder(params) if params is not None else msgspec.json.Decoder()
        self._by_name[name] = Method(name, params, handler, needs_clock, decoder)

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
