"""Exclusive data-dir lock (DESIGN §3: one sidecar per operator machine / data dir).

Rules / theory of operation
---------------------------
* The lock is an OS advisory lock on ``<db>.lock`` beside the database, taken without waiting:
  POSIX ``fcntl.flock(LOCK_EX | LOCK_NB)``, Windows ``msvcrt.locking(LK_NBLCK)`` on byte 0.
* Both are tied to an open file description/handle, not to the process: a second ``open`` of the
  same file in the *same* process conflicts too, so two ``Store`` objects on one data dir in one
  process are refused just like a second process.
* The OS drops the lock when the holder dies, even by SIGKILL, so a crashed sidecar never leaves a
  stale lock behind; the file itself is never deleted (deleting a lock file races with the next
  opener) and only carries the holder's pid for the error message.
* The holder's pid is written only *after* the lock is taken, so a refused opener never clobbers
  the holder's line.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

from .errors import DataDirLocked

if sys.platform == "win32":  # pragma: no cover - exercised on Windows builds only
    import msvcrt

    def _try_lock(fd: int) -> bool:
        os.lseek(fd, 0, os.SEEK_SET)
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True

    def _unlock(fd: int) -> None:
        os.lseek(fd, 0, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)

else:
    import fcntl

    def _try_lock(fd: int) -> bool:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    def _unlock(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_UN)


class DirLock:
    """An acquired lock on ``path``; :meth:`release` is idempotent."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path  # the lock file
        self._fd: int | None = fd  # open descriptor holding the lock, None once released

    @classmethod
    def acquire(cls, path: Path) -> "DirLock":
        """Take the lock on ``path`` (created if missing) or raise :class:`DataDirLocked`."""
        fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_BINARY", 0), 0o644)
        try:
            if not _try_lock(fd):
                raise DataDirLocked(path, _read_holder(fd))
            os.ftruncate(fd, 0)
            os.lseek(fd, 0, os.SEEK_SET)
            os.write(fd, f"pid={os.getpid()}\n".encode())
        except BaseException:
            os.close(fd)
            raise
        return cls(path, fd)

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        """Drop the lock and close the descriptor (no-op when already released)."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            _unlock(fd)
        finally:
            os.close(fd)


def _read_holder(fd: int) -> str:
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        return os.read(fd, 64).decode(errors="replace").strip()
    except OSError:  # pragma: no cover - Windows refuses reads of a locked region
        return ""
