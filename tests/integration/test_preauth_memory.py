"""200 unauthenticated connections, each sending a 10 MB first frame at once, leave a real
``sidecar serve`` process's memory flat (issue 18 item 5): the pre-auth cap refuses each frame at
its header (close 1009), so no payload is buffered.  Buffered, they would be 200 × 10 MB = 2 GB.

Growth is measured from ``/proc/PID/status``: ``VmHWM`` (peak RSS) after the flood minus
``VmRSS`` before it — an upper bound of the flood's peak growth, independent of the machine's
speed."""
from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.integration.sidecar_proc import SidecarProcess

pytestmark = pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs /proc (Linux)")

CONNECTIONS = 200
FRAME = 10_000_000  # bytes each connection announces and would send
BOUND_MB = 50  # generous: refused at the header, the flood costs a few MB of connection state
CHUNK = b"x" * (256 << 10)


def memory_kb(pid: int) -> dict[str, int]:
    """``VmRSS`` and ``VmHWM`` of ``pid`` in KiB."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0])
    return out


async def oversized_first_frame(port: int, token: str) -> int | None:
    """Open a websocket by hand, send an ``auth`` frame with the right token padded to
    :data:`FRAME` bytes, chunk by chunk, until the server answers; return the close code the
    server sent (None when its first frame was no close: the frame was accepted)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                     b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
        head = await reader.readuntil(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 101 "), head
        prefix = b'{"jsonrpc":"2.0","id":1,"method":"auth","params":{"token":"' + token.encode() + b'","pad":"'
        suffix = b'"}}'
        # FIN + text; masked, 64-bit length; an all-zero masking key leaves the payload as it is
        writer.write(bytes([0x81, 0xFF]) + FRAME.to_bytes(8, "big") + b"\0\0\0\0" + prefix)
        answer = asyncio.ensure_future(reader.read(256))
        left = FRAME - len(prefix) - len(suffix)
        try:
            while left > 0 and not answer.done():
                piece = CHUNK[:left]
                writer.write(piece)
                left -= len(piece)
                await writer.drain()
            if not answer.done():
                writer.write(suffix)
                await writer.drain()
        except ConnectionError:
            pass  # the server closed first
        async with asyncio.timeout(60):
            frame = await answer
        if len(frame) >= 4 and frame[0] == 0x88:
            return int.from_bytes(frame[2:4], "big")
        return None
    finally:
        writer.close()


async def test_200_oversized_first_frames_leave_memory_flat(tmp_path):
    async with SidecarProcess(tmp_path) as sc:
        stderr = asyncio.ensure_future(sc.proc.stderr.read())  # 200 refusal lines must not fill the pipe
        assert await oversized_first_frame(sc.port, sc.token) == 1009  # warm the refusal path up
        pid = sc.proc.pid
        before = memory_kb(pid)
        codes = await asyncio.gather(*(oversized_first_frame(sc.port, sc.token) for _ in range(CONNECTIONS)))
        after = memory_kb(pid)
        growth_mb = (after["VmHWM"] - before["VmRSS"]) / 1024
        print(f"\npre-auth flood: {CONNECTIONS} × {FRAME} B: VmRSS {before['VmRSS']} kB before, "
              f"VmRSS {after['VmRSS']} kB / VmHWM {after['VmHWM']} kB after; peak growth ≤ {growth_mb:.1f} MB")
        assert codes == [1009] * CONNECTIONS
        assert growth_mb < BOUND_MB
        sc.proc.stdin.close()
        async with asyncio.timeout(10):
            assert await sc.proc.wait() == 0
        await stderr
