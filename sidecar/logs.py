"""Logging: stderr and a rotating JSON-lines file in the data dir; never stdout (stdout carries
only the one ``ready`` line Electron reads, DESIGN §3)."""
from __future__ import annotations

import json
import logging
import logging.handlers
import sys
from pathlib import Path


# control characters in a message (an id with a newline or NUL, a platform's text) are written
# escaped, so one log record is one line and nobody can forge a line of their own
_ESCAPES = {c: f"\\x{c:02x}" for c in [*range(0x20), 0x7F]} | {0x0A: "\\n", 0x0D: "\\r", 0x09: "\\t"}


class OneLine(logging.Formatter):
    """The stderr format, with control characters of the message escaped (tracebacks stay)."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        return super().formatMessage(record).translate(_ESCAPES)


class JsonLines(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        doc = {"ts": round(record.created, 3), "level": record.levelname, "logger": record.name,
               "msg": record.getMessage()}
        if record.exc_info:
            doc["exc"] = self.formatException(record.exc_info)
        return json.dumps(doc, ensure_ascii=False)


# Libraries that log one INFO line per HTTP request: at a Stack write per marker change that is
# tens of thousands of lines a shift, each formatted twice (stderr and the JSON file) — 10-20 % of
# a replay's wall time.  Their warnings still come through; ``--log-level DEBUG`` shows everything.
CHATTY_LIBRARIES = ("httpx", "httpcore")


def setup(data_dir: Path, level: str = "INFO") -> None:
    """Log to stderr and ``<data_dir>/sidecar.log.jsonl`` (rotating, 5 MiB × 3) at ``level``;
    per-request lines of :data:`CHATTY_LIBRARIES` only at DEBUG."""
    for name in CHATTY_LIBRARIES:
        logging.getLogger(name).setLevel(logging.DEBUG if level.upper() == "DEBUG" else logging.WARNING)
    root = logging.getLogger()
    root.handlers.clear()
    root.setLevel(level.upper())
    err = logging.StreamHandler(sys.stderr)
    err.setFormatter(OneLine("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root.addHandler(err)
    data_dir.mkdir(parents=True, exist_ok=True)
    fh = logging.handlers.RotatingFileHandler(data_dir / "sidecar.log.jsonl", maxBytes=5 << 20,
                                              backupCount=3, encoding="utf-8")
    fh.setFormatter(JsonLines())
    root.addHandler(fh)
