"""The store binds ``None`` and ``bytes`` through a registered adapter (sidecar/store/writer.py,
Rule 7): the same values reach SQLite — NULL and BLOB — by a dictionary hit instead of
``sqlite3``'s two failed attribute lookups per parameter."""
from __future__ import annotations

import sqlite3

from sidecar.store import writer as wmod


def test_none_and_bytes_have_an_adapter_and_the_base_types_none():
    adapters = sqlite3.adapters
    proto = sqlite3.PrepareProtocol
    assert adapters[(type(None), proto)] is wmod._same
    assert adapters[(bytes, proto)] is wmod._same
    # an adapter for one of these would make sqlite3 adapt every parameter of the process
    for base in (int, float, str, bytearray):
        assert (base, proto) not in adapters


def test_the_values_bind_as_without_an_adapter(tmp_path):
    wmod.plain_binds()  # idempotent
    conn = sqlite3.connect(tmp_path / "b.db", isolation_level=None)
    try:
        conn.execute("CREATE TABLE t (a, b, c, d)")
        conn.execute("INSERT INTO t VALUES (?,?,?,?)", (None, b"\x00ab", b"", bytearray(b"x")))
        row = conn.execute("SELECT a, b, c, d, typeof(a), typeof(b), typeof(c), typeof(d) FROM t").fetchone()
        assert row == (None, b"\x00ab", b"", b"x", "null", "blob", "blob", "blob")
        assert conn.execute("SELECT count(*) FROM t WHERE a IS NULL AND b = ?", (b"\x00ab",)).fetchone() == (1,)
    finally:
        conn.close()
