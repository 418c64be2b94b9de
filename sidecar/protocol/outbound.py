"""The bridge's method catalogue (DESIGN §4), sidecar → Electron: one msgspec Struct per
notification's params (``OUTBOUND``: task created / closed / updated, chain attempts, sender
states, deliveries — the resumable stream — and log records, outside it) and per request the
sidecar makes (``platform.request`` / ``platform.requests``).  The app builds them from the domain's notes (:mod:`sidecar.app.wire`); the
Electron → sidecar side is :mod:`sidecar.protocol.inbound`, whose ``Params`` base these share.
``sidecar schema`` prints their JSON Schema.

Times on the wire are unix seconds (UTC) as floats unless a field says ISO.
"""
from __future__ import annotations

import msgspec

from sidecar.protocol.inbound import LogLevel, Params


class TaskView(msgspec.Struct, kw_only=True):
    """A task as Electron shows it: :class:`sidecar.domain.tasks.Task`'s ``WIRE_FIELDS`` view,
    written out here because it is the contract (its JSON Schema); tests/app/test_task_views.py
    checks it against Task field by field."""

    task_id: str
    type: str
    project: str
    tu: str
    ru: str
    source: str
    created_at: float
    deadline: float
    vip: str | None = None
    meta: dict = {}
    overdue: bool = False  # an answer-awaiting task past its deadline (DESIGN §6)


class TaskCreated(Params, kw_only=True):
    seq: int = 0  # set by the bridge's resumable stream
    task: TaskView


class TaskClosed(Params, kw_only=True):
    seq: int = 0
    task_id: str
    type: str
    tu: str
    ru: str
    reason: str
    closed_at: float


class TaskUpdated(Params, kw_only=True):
    """An open task changed: ``overdue`` — an answer-awaiting task passed its deadline and stays
    open until answered (DESIGN §6).  Instants are unix seconds."""

    seq: int = 0
    task_id: str
    type: str
    tu: str
    ru: str
    overdue: bool
    deadline: float
    at: float


class ChainAttempt(Params, kw_only=True):
    """Diagnostic for the trace: one roll of a Follow-up chain (DESIGN §7)."""

    seq: int = 0
    tu: str
    ru: str
    step: int
    chance: float
    hit: bool
    outcome: str
    at: float


class SenderState(Params, kw_only=True):
    """A sender's transition (seed 000; DESIGN §10): ``state`` now (``active`` | ``cooldown`` |
    ``need_check``), ``previous`` before, ``code`` the history row's code (seed 000: 109 failed
    send, 104 warm-up sent, 105 warm-up confirmed, 100 cooldown finished with the verdict in
    ``note``; ours: 101 cooldown start, 102 extension, 103 Need Check with the path in ``note``,
    106 manual recovery).  ``at`` / ``cooldown_end``: unix seconds."""

    seq: int = 0
    sender: str
    state: str
    previous: str = ""
    code: int = 0
    note: str = ""
    at: float = 0.0
    failed_in_row: int = 0
    cooldown_times: int = 0
    cooldown_end: float | None = None
    need_check_path: str | None = None


class DeliveryNote(Params, kw_only=True):
    """One delivery outcome of a non-Stack target (DESIGN §10): every attempt's result
    (``delivered``, ``pending`` = failed and retried later, ``failed``) and every row settled
    when routed (``skipped``, ``duplicate``, ``failed``).  Instants are unix seconds."""

    seq: int = 0
    delivery_id: str
    target: str
    channel: str
    status: str
    attempt: int
    source: str
    subject: str
    action: str
    priority: str
    rule: str | None = None
    event_at: float
    at: float
    error: str | None = None


class LogNote(Params, kw_only=True):
    """One log record for a client that subscribed (``logs.subscribe``), sent OUTSIDE the stream:
    no ``seq``, never acked nor replayed, dropped when nobody reads (:mod:`sidecar.app.log_feed`).
    The fields of the JSON-lines log file (:class:`sidecar.logs.JsonLines`): ``ts`` the record's
    instant (unix seconds, ms), ``level``, ``logger`` (e.g. ``sidecar.app.root``), ``msg`` the
    message, ``exc`` the traceback text (absent when none); ``dropped``: records lost just
    before this one (buffer full or client not reading; 0 none)."""

    ts: float
    level: LogLevel
    logger: str
    msg: str
    exc: str | msgspec.UnsetType = msgspec.UNSET
    dropped: int = 0


class PlatformRequest(Params, kw_only=True):
    """The sidecar asks Electron to call a platform API with the operator's session.

    ``at``: the instant (unix seconds) of the step that asks — on the virtual clock a driver
    answers from its world as of then.  ``batch_seen``: during a ``platform.events`` call, how
    many of its events the sidecar had begun handling when it asked (0: a timer before the
    first; k: the k-th event's own step, or a timer after it and before the next); absent
    outside such a call.  ``batch_skipped``: the indices (0-based) of that call's ``if_open``
    events skipped so far (absent: none).  Electron, answering live, may ignore all three."""

    project: str
    tu: str
    method: str
    params: dict = {}
    at: float | None = None
    # "absent" is left out of the frame, never null (msgspec.UNSET; tests/contract/test_absent_fields.py)
    batch_seen: int | msgspec.UnsetType = msgspec.UNSET
    batch_skipped: list[int] | msgspec.UnsetType = msgspec.UNSET


class PlatformRequests(Params, kw_only=True):
    """Several ``platform.request`` of ONE step in one round trip (virtual clock only):
    each item is a ``platform.request``'s params (same ``at``).  Answer
    ``{"results": [{"result": <the platform's answer>} | {"error": {"code", "message"}}, …]}``,
    one per request, in order; answer each exactly as the single ``platform.request``."""

    requests: list[PlatformRequest]


OUTBOUND: dict[str, type[Params]] = {
    "task.created": TaskCreated,
    "task.closed": TaskClosed,
    "task.updated": TaskUpdated,
    "chain.attempt": ChainAttempt,
    "sender.state": SenderState,
    "delivery": DeliveryNote,
    "log": LogNote,
    "platform.request": PlatformRequest,
    "platform.requests": PlatformRequests,
}
