"""Store errors (DESIGN §3 "one sidecar per data dir", §9 "nothing half-written").

Rules
-----
* Every failure the store reports is a :class:`StoreError`; callers that only want "the step did
  not commit" catch that one class.
* :class:`DataDirLocked` — another sidecar (another process, or another ``Store`` in this one)
  holds the data dir's lock file; the second instance must refuse to start (DESIGN §3).
* :class:`SchemaTooNew` — the database was migrated by a newer sidecar; this code must not touch it
  (an older binary writing into a newer schema could corrupt what the newer one relies on).
* :class:`MigrationError` — a migration script failed; its transaction was rolled back and
  ``user_version`` still names the last migration that completed.
* A failed :meth:`Store.commit` raises :class:`StoreError` with the SQLite/encoding error as
  ``__cause__``; nothing of the batch was written.
"""
from __future__ import annotations

from pathlib import Path

from sidecar.domain.errors import IOFailure


class StoreError(IOFailure):
    """Base of every store failure."""


class DataDirLocked(StoreError):
    """The lock file is held by another process or another open ``Store``."""

    def __init__(self, lock_path: Path, holder: str = "") -> None:
        self.lock_path = lock_path  # the ``.lock`` file beside the database
        self.holder = holder  # what the lock file says about its holder (pid), may be ""
        msg = f"data dir is locked by another sidecar: {lock_path}"
        if holder:
            msg += f" (holder: {holder})"
        super().__init__(msg)


class SchemaTooNew(StoreError):
    """The database's ``PRAGMA user_version`` is newer than the migrations this code knows."""

    def __init__(self, found: int, known: int) -> None:
        self.found = found  # user_version in the file
        self.known = known  # len(MIGRATIONS) of this code
        super().__init__(
            f"database schema version {found} is newer than this sidecar's {known}; "
            "run a newer sidecar or point it at another data dir"
        )


class MigrationError(StoreError):
    """Migration ``version`` failed and was rolled back."""

    def __init__(self, version: int, cause: BaseException) -> None:
        self.version = version  # the user_version the failed script would have set
        super().__init__(f"migration to schema version {version} failed: {cause}")


class DatabaseDamaged(StoreError):
    """``PRAGMA quick_check`` found the file damaged, or SQLite called it malformed / not a
    database (DESIGN §3 "A damaged database is found at open").  Nothing was written to it;
    ``sidecar repair`` moves it aside and salvages what SQLite can still read."""

    def __init__(self, path: Path, detail: str) -> None:
        self.path = path  # the database file
        self.detail = detail  # quick_check's first finding, or SQLite's error
        super().__init__(
            f"the database {path} is damaged ({detail}); nothing was written to it. Run "
            f"`sidecar repair --data-dir {path.parent}`: it moves the file aside, salvages what "
            "can still be read, and the next start restores the rest from Stack")
