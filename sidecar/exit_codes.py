"""``sidecar serve``'s exit codes, one table for ``--help``, the README and ``sidecar schema``
(``ExitCode``, :mod:`sidecar.contract_tables`), kept apart from :mod:`sidecar.cli` so the schema
reads it without importing the command line (which imports the schema)."""

EXIT_CODES = """\
exit codes:
  0    shutdown (SIGTERM, SIGINT, SIGHUP, stdin EOF, parent death) within 2 s; the log names any abandoned close
  1    unexpected internal error (logged with its traceback)
  2    bad setting or command line (one line on stderr names it); nothing was started
  3    the data dir is locked by another running sidecar
  4    the database cannot be opened (unreadable, or a newer schema; it is left untouched)
  5    shutdown did not finish within 1.5 s and was forced (unsent Stack writes stay queued)
  6    a step could not be saved (or crashed): nothing of it was kept; a restart restores it all
  7    the database is damaged (PRAGMA quick_check); nothing was written to it: run `sidecar repair`
  128+N  a second signal N during shutdown ended the process at once (143 SIGTERM, 130 SIGINT)
"""
