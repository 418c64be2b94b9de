"""Spawn a real ``sidecar serve`` process as Electron does (tests only)."""
from __future__ import annotations

import asyncio
import json
import os
import secrets
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


class SidecarProcess:
    def __init__(self, data_dir: Path, *, clock: str = "virtual", binary: str | None = None,
                 extra: tuple[str, ...] = ()) -> None:
        self.data_dir = data_dir
        self.clock = clock
        self.binary = binary
        self.extra = extra
        self.token = secrets.token_urlsafe(16)
        self.proc: asyncio.subprocess.Process | None = None
        self.port = 0

    async def __aenter__(self) -> "SidecarProcess":
        cmd = ([self.binary] if self.binary else [sys.executable, "-m", "sidecar"]) + [
            "serve", "--port", "0", "--data-dir", str(self.data_dir), "--clock", self.clock, *self.extra]
        self.proc = await asyncio.create_subprocess_exec(
            *cmd, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, env=dict(os.environ, SIDECAR_TOKEN=self.token), cwd=ROOT)
        line = await asyncio.wait_for(self.proc.stdout.readline(), 30)
        ready = json.loads(line)
        assert ready["event"] == "ready" and ready["protocol"] == 1
        self.port = ready["port"]
        return self

    async def stop(self) -> int:
        self.proc.stdin.close()
        return await asyncio.wait_for(self.proc.wait(), 15)

    async def __aexit__(self, *exc) -> None:
        if self.proc.returncode is None:
            try:
                await self.stop()
            except asyncio.TimeoutError:
                self.proc.kill()
                await self.proc.wait()
