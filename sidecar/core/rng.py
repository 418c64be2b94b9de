"""Keyed randomness (DESIGN §5).

Every draw is a pure function of the deployment seed and a stable key, e.g.
``("followUpChat", tu, ru, source_task_id, step, "delay")``.  There is no RNG stream, so a
restart, a crash or another operator's machine re-derives the same value and never re-rolls, and
processing order cannot change an outcome.
"""
from __future__ import annotations

import hashlib
import struct

_SCALE = float(1 << 53)


class KeyedRandom:
    """Deterministic draws from ``(seed, *key)``; thread- and order-independent."""

    def __init__(self, seed: int | str) -> None:
        self.seed = str(seed)  # the deployment seed, part of every digest

    def unit(self, *key: object) -> float:
        """A float in [0, 1) for ``key``."""
        h = hashlib.blake2b(digest_size=8, key=self.seed.encode()[:64])
        h.update("\x1f".join(map(str, key)).encode())
        (n,) = struct.unpack(">Q", h.digest())
        return (n >> 11) / _SCALE

    def uniform(self, lo: float, hi: float, *key: object) -> float:
        """U(lo, hi) for ``key``."""
        return lo + (hi - lo) * self.unit(*key)

    def chance(self, p: float, *key: object) -> bool:
        """True with probability ``p`` for ``key`` (p ≥ 1 is always True, p ≤ 0 never)."""
        return self.unit(*key) < p
