"""Versioned schema migrations (DESIGN §9; docs/architecture.md "Store API").

Rules / theory of operation
---------------------------
* ``MIGRATIONS[i]`` is the SQL script that takes the schema from version ``i`` to ``i + 1``;
  ``PRAGMA user_version`` holds the version of the file (0 = empty).  Append new scripts, never edit
  a released one: a data dir written by an older sidecar is upgraded step by step.
* Each migration runs in its **own** transaction together with the ``user_version`` bump
  (``BEGIN IMMEDIATE; <script>; PRAGMA user_version = N; COMMIT``): a failure rolls that one script
  back and leaves the file at the last version that completed (:class:`MigrationError`).
* A file whose ``user_version`` is greater than ``len(MIGRATIONS)`` was written by a newer sidecar:
  :class:`SchemaTooNew`, and nothing is touched.
* :func:`migrate` is synchronous: the store runs it on aiosqlite's connection thread.

Schema v1 (times are unix seconds UTC as REAL; JSON columns are msgspec-encoded TEXT)
-------------------------------------------------------------------------------------
* ``tasks`` — one row per task, open or closed (``domain.tasks.Task``); open = ``closed_at IS NULL``
  Indexes: open tasks per TU (partial), history per (tu, ru, type, closed_at) and (tu, closed_at).
* ``favorites`` — the favorites cache; ``data`` = the whole favorite dict with markers; PK (tu, ru)
* ``service_state`` — generic durable runtime state of the services (chains, timers, cursors);
  PK (tu, scope, key).
* ``sessions`` — which TUs are logged in (restored after a crash).
* ``outbox`` — Stack writes not yet acknowledged (DESIGN §9); ``idem_key`` UNIQUE; the head of a
  pair is its lowest ``id``.
* ``meta`` — free key/value text for the store itself.

Schema v2: the decision log
---------------------------
* ``decisions`` — the decision log (DESIGN §13, :mod:`sidecar.runtime.decisions`): one row per candidate
  outcome, chain miss or chain removal; ``detail`` JSON; read per pair in (``at``, ``id``) order,
  pruned by ``at`` after 7 days.

Schema v3: the router (DESIGN §10, :mod:`sidecar.router.io.storage`)
------------------------------------------------------------------
* ``router_rules`` — one row per rule, by ``name``; conditions and actions as JSON.
* ``deliveries`` — one row per delivery (the audit, ``deliveries.list``): ``seq`` orders rows
  (and a Stack pair's writes), ``id`` = ``<event_id>.<n>`` is the stable webhook-id; status
  ``pending|delivered|failed|skipped|duplicate`` (CHECK).  Indexes: due pending rows, per target
  and event time, Stack pairs' pending rows, and one pending Stack row per idempotency key.
* ``router_dedup`` — ``(source, dedup_key)`` → when it was last accepted (the dedup window).
* ``router_throttle`` — ``(channel, target)`` → the last real delivery (throttle windows survive
  restarts, config reloads and rule changes).
* ``router_journal`` — the ``journal`` channel's table (its file is a rotating JSON-lines log).
No secret is ever stored: targets live in the config (``sidecar.router.config``).

Schema v4: sender health (DESIGN §10 second half, seed 000)
-----------------------------------------------------------
* ``sender_state`` — one row per sender: ``data`` = the whole ``senders.health.SenderState``
  (the stored ``cooldown_end`` is what makes a restart never re-draw a cooldown); ``state`` and
  ``cooldown_end`` are copies for queries.
* ``sender_history`` — a row per transition (codes 100–109), per sender by time.
* ``sender_groups`` — ``data`` = the ``senders.groups.Group``; ``priority`` UNIQUE (seed 000 §6).
* ``sender_assignments`` — (sender, group_id) pairs.

Schema v5: structured outbox columns
-----------------------------------------------
* ``outbox.tu``, ``outbox.ru``, ``outbox.marker`` — the TU and RU a Stack write is about and a
  marker write's name, so a login reads its unacknowledged markers by column; older marker rows
  are filled from their path (unquoted ids) by the migration.
"""
from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from .errors import MigrationError, SchemaTooNew

V1 = """
CREATE TABLE tasks (
    task_id     TEXT PRIMARY KEY,
    tu          TEXT NOT NULL,
    project     TEXT NOT NULL,
    ru          TEXT NOT NULL,
    type        TEXT NOT NULL,
    source      TEXT NOT NULL,
    created_at  REAL NOT NULL,
    deadline    REAL NOT NULL,
    closed_at   REAL,
    reason      TEXT,
    vip         TEXT,
    meta        TEXT NOT NULL DEFAULT '{}'
) WITHOUT ROWID;
CREATE INDEX tasks_open_by_tu ON tasks (tu, deadline) WHERE closed_at IS NULL;
CREATE INDEX tasks_history_by_pair ON tasks (tu, ru, type, closed_at);
CREATE INDEX tasks_history_by_tu ON tasks (tu, closed_at);

CREATE TABLE favorites (
    tu       TEXT NOT NULL,
    ru       TEXT NOT NULL,
    project  TEXT NOT NULL,
    data     TEXT NOT NULL,
    PRIMARY KEY (tu, ru)
) WITHOUT ROWID;

CREATE TABLE service_state (
    tu     TEXT NOT NULL,
    scope  TEXT NOT NULL,
    key    TEXT NOT NULL,
    value  TEXT NOT NULL,
    PRIMARY KEY (tu, scope, key)
) WITHOUT ROWID;

CREATE TABLE sessions (
    tu            TEXT PRIMARY KEY,
    project       TEXT NOT NULL,
    operator      TEXT NOT NULL,
    logged_in_at  REAL NOT NULL
) WITHOUT ROWID;

CREATE TABLE outbox (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    pair        TEXT NOT NULL,
    idem_key    TEXT NOT NULL UNIQUE,
    method      TEXT NOT NULL,
    path        TEXT NOT NULL,
    body        BLOB NOT NULL,
    kind        TEXT NOT NULL,
    created_at  REAL NOT NULL,
    attempts    INTEGER NOT NULL DEFAULT 0,
    next_at     REAL NOT NULL,
    last_error  TEXT
);
CREATE INDEX outbox_by_pair ON outbox (pair, id);
CREATE INDEX outbox_by_next_at ON outbox (next_at, id);

CREATE TABLE meta (
    key    TEXT PRIMARY KEY,
    value  TEXT NOT NULL
) WITHOUT ROWID;
"""

V2 = """
CREATE TABLE decisions (
    id       INTEGER PRIMARY KEY AUTOINCREMENT,
    tu       TEXT NOT NULL,
    ru       TEXT NOT NULL,
    at       REAL NOT NULL,
    type     TEXT NOT NULL,
    source   TEXT NOT NULL,
    outcome  TEXT NOT NULL,
    task_id  TEXT,
    detail   TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX decisions_by_pair ON decisions (tu, ru, at, id);
CREATE INDEX decisions_by_at ON decisions (at);
"""

V3 = """
CREATE TABLE router_rules (
    name        TEXT PRIMARY KEY,
    data        TEXT NOT NULL,
    created_at  REAL NOT NULL,
    updated_at  REAL NOT NULL
) WITHOUT ROWID;

CREATE TABLE deliveries (
    seq              INTEGER PRIMARY KEY AUTOINCREMENT,
    id               TEXT NOT NULL UNIQUE,
    event_id         TEXT NOT NULL,
    event_at         REAL NOT NULL,
    source           TEXT NOT NULL,
    subject          TEXT NOT NULL,
    action           TEXT NOT NULL,
    priority         TEXT NOT NULL,
    rule             TEXT,
    channel          TEXT NOT NULL,
    target           TEXT NOT NULL,
    status           TEXT NOT NULL
        CHECK (status IN ('pending','delivered','failed','skipped','duplicate')),
    attempts         INTEGER NOT NULL DEFAULT 0,
    next_attempt_at  REAL,
    expires_at       REAL,
    last_error       TEXT,
    note             TEXT,
    message          BLOB NOT NULL,
    delivered_at     REAL,
    pair             TEXT,
    idem_key         TEXT,
    method           TEXT,
    path             TEXT,
    updated_at       REAL NOT NULL
);
CREATE INDEX deliveries_due ON deliveries (next_attempt_at, seq) WHERE status = 'pending';
CREATE INDEX deliveries_by_target ON deliveries (target, event_at);
CREATE INDEX deliveries_by_event_at ON deliveries (event_at);
CREATE INDEX deliveries_stack_pair ON deliveries (pair, seq) WHERE status = 'pending' AND channel = 'stack';
CREATE UNIQUE INDEX deliveries_stack_key ON deliveries (idem_key)
    WHERE status = 'pending' AND channel = 'stack';

CREATE TABLE router_dedup (
    source       TEXT NOT NULL,
    dedup_key    TEXT NOT NULL,
    accepted_at  REAL NOT NULL,
    PRIMARY KEY (source, dedup_key)
) WITHOUT ROWID;

CREATE TABLE router_throttle (
    channel  TEXT NOT NULL,
    target   TEXT NOT NULL,
    last_at  REAL NOT NULL,
    PRIMARY KEY (channel, target)
) WITHOUT ROWID;

CREATE TABLE router_journal (
    n            INTEGER PRIMARY KEY AUTOINCREMENT,
    delivery_id  TEXT NOT NULL UNIQUE,
    target       TEXT NOT NULL,
    at           REAL NOT NULL,
    body         TEXT NOT NULL
);
CREATE INDEX router_journal_by_at ON router_journal (target, at);
"""


V4 = """
CREATE TABLE sender_state (
    sender        TEXT PRIMARY KEY,
    state         TEXT NOT NULL,
    cooldown_end  REAL,
    data          TEXT NOT NULL
) WITHOUT ROWID;

CREATE TABLE sender_history (
    id      INTEGER PRIMARY KEY AUTOINCREMENT,
    sender  TEXT NOT NULL,
    at      REAL NOT NULL,
    code    INTEGER NOT NULL,
    note    TEXT NOT NULL DEFAULT ''
);
CREATE INDEX sender_history_by_sender ON sender_history (sender, at, id);

CREATE TABLE sender_groups (
    id        TEXT PRIMARY KEY,
    priority  INTEGER NOT NULL UNIQUE,
    data      TEXT NOT NULL
) WITHOUT ROWID;

CREATE TABLE sender_assignments (
    sender    TEXT NOT NULL,
    group_id  TEXT NOT NULL REFERENCES sender_groups (id) ON DELETE CASCADE,
    PRIMARY KEY (sender, group_id)
) WITHOUT ROWID;
"""

# Structured columns of an outbox row: the TU and RU a write is about and, for a
# marker write, the marker's name — so a login reads its unacknowledged markers by column, not by
# splitting an HTTP path.  Rows queued before this version are filled from their path (ids made
# of URL-safe characters; a quoted one keeps NULL and is read from its path, see Store).
V5 = """
ALTER TABLE outbox ADD COLUMN tu TEXT;
ALTER TABLE outbox ADD COLUMN ru TEXT;
ALTER TABLE outbox ADD COLUMN marker TEXT;
UPDATE outbox SET
    tu = substr(path, 9, instr(substr(path, 9), '/favorites/') - 1),
    ru = substr(substr(path, 9), instr(substr(path, 9), '/favorites/') + 11,
                instr(substr(path, 9), '/markers/') - instr(substr(path, 9), '/favorites/') - 11),
    marker = substr(substr(path, 9), instr(substr(path, 9), '/markers/') + 9)
  WHERE kind = 'marker' AND path LIKE '/v1/tus/%/favorites/%/markers/%' AND instr(path, '%') = 0;
CREATE INDEX outbox_markers_by_tu ON outbox (tu, kind, id);
"""

# The Stack outbox moves onto the router's ``stack`` channel (DESIGN §10 "built-in
# route"): a stack delivery row carries the TU and RU its write is about (a login reads its
# unacknowledged markers by column), and every unsent outbox row becomes a pending ``stack``
# delivery in the same order (seq follows the outbox id), keeping its idempotency key, body,
# attempts and next attempt.  The outbox table stays (empty) so a file written by an older sidecar
# still opens; nothing queues into it any more.
V6 = """
ALTER TABLE deliveries ADD COLUMN tu TEXT;
ALTER TABLE deliveries ADD COLUMN ru TEXT;
CREATE INDEX deliveries_stack_markers ON deliveries (tu, source, seq)
    WHERE status = 'pending' AND channel = 'stack';
INSERT INTO deliveries (id, event_id, event_at, source, subject, action, priority, rule, channel,
                        target, status, attempts, next_attempt_at, last_error, note, message,
                        pair, idem_key, method, path, tu, ru, updated_at)
  SELECT 'outbox-' || id || '.0', 'outbox-' || id, created_at,
         CASE kind WHEN 'marker' THEN 'markers' WHEN 'task' THEN 'tasks' ELSE 'candidates' END,
         CASE WHEN kind = 'marker' THEN coalesce(marker, 'marker') WHEN kind = 'task' THEN 'task'
              ELSE 'candidate' END,
         CASE WHEN kind = 'marker' AND idem_key LIKE '%:clear' THEN 'clear'
              WHEN kind = 'marker' THEN 'set'
              WHEN kind = 'task' AND idem_key LIKE '%:closed' THEN 'closed'
              WHEN kind = 'task' THEN 'created' ELSE 'queued' END,
         CASE kind WHEN 'marker' THEN 'high' WHEN 'task' THEN 'normal' ELSE 'low' END,
         NULL, 'stack', 'stack', 'pending', attempts, next_at, last_error,
         'carried over from the outbox (schema v6)', body, pair, idem_key, method, path, tu, ru,
         created_at
    FROM outbox ORDER BY id;
DELETE FROM outbox;
"""

# ``events.emit`` of a duplicate answers the FIRST event's id (seed 002 ingest
# "вернёт id первого события (deduplicated: true)"): a dedup key remembers the event that was
# accepted.  Keys accepted before this version have none (NULL) and answer without an id.
V7 = """
ALTER TABLE router_dedup ADD COLUMN event_id TEXT;
"""

# Group send intervals are minutes (seed 000 §6 «хвилини»): values stored by an
# older sidecar were seconds, so they convert ÷ 60 and pace as they did.
V8 = """
UPDATE sender_groups SET data = json_set(data,
    '$.send_from_message_interval', coalesce(json_extract(data, '$.send_from_message_interval'), 0) / 60.0,
    '$.send_to_message_interval', coalesce(json_extract(data, '$.send_to_message_interval'), 0) / 60.0);
"""

# The pump reads each target's due head (DESIGN §10 "Targets are isolated"): an index on
# (target, next attempt) over pending rows, so a pass costs the heads it reads, not the backlog
# (a 20,000-row Stack backlog made every other target's read scan it).
V9 = """
CREATE INDEX deliveries_head ON deliveries (target, next_attempt_at, seq) WHERE status = 'pending';
"""

# Handed-over deliveries (DESIGN §9; sidecar.router.handover): which pending
# rows a logout handed to Stack, and the trigger that queues their Stack DELETE in the very
# transaction that settles them (every settle path at once: delivered, failed, expired).  The
# index finds a TU's pending non-Stack rows at its logout.
V10 = """
CREATE TABLE router_handovers (
    delivery_id TEXT PRIMARY KEY,
    tu          TEXT NOT NULL,
    pair        TEXT NOT NULL,
    path        TEXT NOT NULL,
    at          REAL NOT NULL
);
CREATE INDEX deliveries_tu_pending ON deliveries (tu, seq) WHERE status = 'pending' AND channel != 'stack';
CREATE TRIGGER router_handover_release AFTER UPDATE OF status ON deliveries
WHEN OLD.status = 'pending' AND NEW.status != 'pending' AND NEW.channel != 'stack'
    AND EXISTS (SELECT 1 FROM router_handovers WHERE delivery_id = NEW.id)
BEGIN
    INSERT OR IGNORE INTO deliveries (id, event_id, event_at, source, subject, action, priority,
        rule, channel, target, status, attempts, next_attempt_at, message, note, pair, idem_key,
        method, path, tu, ru, updated_at)
    SELECT 'handover:' || h.tu || ':' || h.delivery_id || ':delete@' || printf('%.3f', NEW.updated_at),
        NEW.event_id, NEW.updated_at, 'deliveries', 'handover', 'delete', NEW.priority, NULL,
        'stack', 'stack', 'pending', 0, NEW.updated_at, CAST('{}' AS BLOB),
        'release of ' || h.delivery_id || ' (' || NEW.status || ')', h.pair,
        'handover:' || h.tu || ':' || h.delivery_id || ':delete@' || printf('%.3f', NEW.updated_at),
        'DELETE', h.path, h.tu, NEW.ru, NEW.updated_at
    FROM router_handovers h WHERE h.delivery_id = NEW.id;
    DELETE FROM router_handovers WHERE delivery_id = NEW.id;
END;
"""

#: The scripts, oldest first; ``len(MIGRATIONS)`` is the schema version this code writes.
MIGRATIONS: tuple[str, ...] = (V1, V2, V3, V4, V5, V6, V7, V8, V9, V10)


def user_version(conn: sqlite3.Connection) -> int:
    """The file's ``PRAGMA user_version`` (0 for a new file)."""
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def migrate(conn: sqlite3.Connection, migrations: Sequence[str] = MIGRATIONS) -> tuple[int, int]:
    """Bring ``conn`` (autocommit mode, ``isolation_level=None``) up to ``len(migrations)``.

    Returns ``(version_before, version_after)``.  Raises :class:`SchemaTooNew` when the file is
    newer than ``migrations`` and :class:`MigrationError` when a script fails (that script is
    rolled back; earlier ones stay applied).
    """
    known = len(migrations)
    before = user_version(conn)
    if before > known:
        raise SchemaTooNew(before, known)
    for version in range(before + 1, known + 1):
        script = migrations[version - 1]
        try:
            # executescript() issues the statements as written; the BEGIN/COMMIT pair makes the
            # script and the version bump one transaction (user_version lives in the db header,
            # which is part of the transaction).
            conn.executescript(
                f"BEGIN IMMEDIATE;\n{script}\n;PRAGMA user_version = {version};\nCOMMIT;"
            )
        except sqlite3.Error as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise MigrationError(version, exc) from exc
    return before, known
