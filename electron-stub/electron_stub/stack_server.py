"""The reference Stack (DESIGN §9): real HTTP on 127.0.0.1, a free port, fault injection.

Rules / theory of operation
---------------------------
* Endpoints (JSON bodies, all instants unix seconds):

  - ``GET /v1/tus/{tu}/startup`` → ``{"tu", "favorites": [{"ru","project","active","is_white",
    "spend_30d_usd","spend_total_usd","paid_actions","paid_with_bonuses_only","chat_limit",
    "mail_limit","blocked_by_tu","blocked_by_ru","markers": {...}}], "history": [{"task_id","type",
    "project","tu","ru","source","created_at","deadline","closed_at","reason","vip"}]}``.  For a
    TU with ``stack_favorites: false`` (README revision 2; :attr:`StackServer.no_favorites`) the ``favorites`` key is **absent**
    (Stack has no list, DESIGN §9/§12.5): its ``favorite`` lines, initial and timeline, are the
    platform world's only.
  - ``PUT /v1/tus/{tu}/favorites/{ru}/markers/{name}`` body ``{"value": marker | null}`` (null
    clears) → ``{"ok": true, "tu", "ru", "name", "value"}``.
  - ``POST /v1/tus/{tu}/tasks`` body ``{"event": "created"|"closed", "task": {... "task_id"}}`` —
    merged into the TU's history by ``task_id`` → ``{"ok": true, "task_id"}``.
  - ``POST /v1/tus/{tu}/candidates`` body ``{"ru", "type", "source", "at", "outcome", "task_id"?,
    "detail"?}`` — a service's candidate and what the Task Factory did with it (DESIGN §9, §13;
    ``outcome`` is ``created``, ``refused:<reason>`` or ``miss``) → ``{"ok": true}``; a body
    without those fields → 400.
  - ``PUT`` / ``DELETE /v1/tus/{tu}/deliveries/{id}``: handed-over deliveries, listed in the
    startup data as ``"deliveries"`` (DESIGN §9; :mod:`electron_stub.stack_deliveries`).
  - ``GET /v1/health`` → ``{"ok": true}`` while Stack takes writes (DESIGN §9: the Stack sender's
    probe, §10); under ``down`` it is dropped like every request; no other fault touches it.
  - ``POST /v1/batch`` body ``{"writes": [{"key", "method", "path", "body"}, …]}`` (1..500) →
    ``{"results": [{"key", "status", "body"}, …]}`` in order (DESIGN §9).  Each write is handled
    exactly like its single call (same idempotency, same keyed ``error_rate`` draw per key); a
    failed write fails the later writes of its pair (``tu/ru`` from the path, or the body's
    ``ru`` / ``task.ru``) in the same batch, answered 424 and not applied.  ``down`` drops the
    whole request, ``latency`` delays it once.  Startup data says ``"capabilities": ["batch"]``
    unless the server was made with ``batch=False``.  Counters: ``batches``, ``batched_writes``
    (and ``requests``: every HTTP request, so a report can compare single and batched sends).

* Every write needs an ``Idempotency-Key`` header: without one → 400.  A key whose write was
  acknowledged returns the first answer again and changes nothing (counted as a duplicate) —
  when the repeat is the same write.  The same key with a different method, path or body is a
  client bug (the second write would be silently lost): 422, counted as ``key_conflicts`` and
  kept in :attr:`StackServer.conflicts` for the harness's consistency check.
* A cleared marker (``value: null``) is kept as ``null`` in the startup data: "cleared" is a fact
  a restoring sidecar must see, unlike a marker never written (DESIGN §7).  :meth:`marker`
  answers None for both.
* ``block`` / ``limits`` lines change only favorites Stack already lists (a block does not make
  an RU a favorite, DESIGN §6); a ``favorite`` line is Stack's own list and may add one.  A
  bad body → 400, an unknown path → 404; neither records the key.
* Faults (scenario ``stack`` lines, :meth:`StackServer.set_fault`):
  ``down`` — every request (reads too) is refused by closing the connection without answering
  (the client sees the connection drop, as with a dead backend behind a proxy); ``up`` — back;
  ``error_rate p`` — a write answers 500 when the keyed draw over ``(seed, idem_key, attempt#)`` is
  below ``p`` (attempt# counts the arrivals of that key, so retries draw anew and a replay of the
  same run draws the same); ``latency s`` — every request sleeps ``min(s, 2)`` real seconds;
  ``refuse n`` (a project extension, electron-stub/README.md; ``n`` default 1) — the next ``n``
  writes that are not repeats of an acknowledged key answer 422 ``{"error": "injected refusal"}``
  (a validation error), are not applied and not remembered (counted ``refused_writes``); in a
  batch the refused write fails its pair's later writes (424) like any failed write.
* Every acknowledged write is recorded with the sidecar's virtual instant of the call — the
  ``Sidecar-Virtual-At`` header (unix seconds) a virtual-clock sidecar sends with every call,
  the instant of its delivery pass — or, without that header, the harness's current virtual
  instant (``now_fn()``), so the trace can show ``marker.acked`` lines.  The header makes the
  record independent of how the driver slices time: a call made inside a ``platform.events``
  frame (between its events) is recorded at its own instant (issue 11 item 3).  ``favorite`` timeline lines update
  the favorites served from then on (:meth:`update_favorite`).
* Shared state is guarded by one lock; handlers run in the server's threads.
"""
from __future__ import annotations

import re
import threading
import time
from typing import Any, Callable
from urllib.parse import unquote

from electron_stub import keyed
from electron_stub import scenario as sc
from electron_stub.loopback import LoopbackServer
from electron_stub import stack_deliveries
from electron_stub.stack_http import StackHandler, copied, dump, fingerprint, load, serve_batch, virtual_at
from sidecar.stack.virtual_at import VIRTUAL_AT_HEADER

FAV_KEYS = ("active", "is_white", "spend_30d_usd", "spend_total_usd", "paid_actions",
            "paid_with_bonuses_only", "chat_limit", "mail_limit", "blocked_by_tu", "blocked_by_ru")
MAX_LATENCY_S = 2.0
_ROUTES = [
    ("GET", re.compile(r"^/v1/tus/([^/]+)/startup$"), "startup"),
    ("PUT", re.compile(r"^/v1/tus/([^/]+)/favorites/([^/]+)/markers/([^/]+)$"), "marker"),
    ("POST", re.compile(r"^/v1/tus/([^/]+)/tasks$"), "task"),
    ("POST", re.compile(r"^/v1/tus/([^/]+)/candidates$"), "candidate"),
    ("PUT", re.compile(stack_deliveries.ROUTE), "delivery"),  # handed over (stack_deliveries)
    ("DELETE", re.compile(stack_deliveries.ROUTE), "delivery_delete"),
]


WRITE_KINDS = ("marker", "task", "candidate", "delivery", "delivery_delete")


def _route_of(method: str, path: str) -> tuple[str, tuple[str, ...]] | None:
    """The first route matching the request: ``(name, path groups)``, or None."""
    for meth, rx, name in _ROUTES:
        if meth == method and (m := rx.match(path)):
            return name, m.groups()
    return None


def _kind_of(path: str, route: tuple[str, tuple[str, ...]] | None) -> str:
    """The route name of a request (``startup``, ``marker``, ``task``, ``candidate``), or
    ``batch`` / ``health`` / ``unknown``; ``route`` is :func:`_route_of`'s answer."""
    if path == "/v1/batch":
        return "batch"
    if path == "/v1/health":
        return "health"
    return route[0] if route is not None else "unknown"


class StackServer:
    """The reference Stack.  ``seed`` keys the error-rate draws; ``now_fn`` gives the harness's
    virtual instant (unix seconds) for the record of acknowledged writes."""

    def __init__(self, seed: int = 0, now_fn: Callable[[], float | None] = lambda: None, *,
                 batch: bool = True) -> None:
        self.seed, self.now_fn = seed, now_fn
        self.batch = batch  # advertise and serve POST /v1/batch
        self.lock = threading.Lock()
        self.favorites: dict[str, dict[str, dict[str, Any]]] = {}  # tu -> ru -> favorite
        # TUs Stack has no favorites list for: their startup data has no ``favorites`` key
        # (DESIGN §9, §12.5 — unlike ``[]``, an empty list)
        self.no_favorites: set[str] = set()
        self.history: dict[str, dict[str, dict[str, Any]]] = {}  # tu -> task_id -> task
        self.candidates: dict[str, list[Any]] = {}
        self.deliveries: dict[str, dict[str, dict[str, Any]]] = {}  # tu -> id -> handed over
        self.idem: dict[str, tuple[int, bytes]] = {}  # key -> first answer
        self.idem_write: dict[str, str] = {}  # key -> the acknowledged write (method path body)
        self.conflicts: list[dict[str, Any]] = []  # same key, different write (client bug)
        self.attempts: dict[str, int] = {}
        self.acked: list[dict[str, Any]] = []  # {"at","kind","tu","ru"?,"name"?,"value"?,"key"}
        self.counters = {"acked": 0, "faulted": 0, "duplicates": 0, "bad_requests": 0, "reads": 0,
                         "refused": 0, "key_conflicts": 0, "requests": 0, "batches": 0,
                         "batched_writes": 0, "refused_writes": 0}
        self.mode = {"down": False, "error_rate": 0.0, "latency": 0.0, "refuse": 0}
        self.request_kinds: dict[str, int] = {}  # HTTP requests by route name (benchmarks)
        self.write_kinds: dict[str, int] = {}  # writes by route name, single or in a batch
        self._httpd: LoopbackServer | None = None
        self._at: float | None = None  # (lock held) the instant of the write being applied

    # ---- lifecycle ------------------------------------------------------------------------

    def start(self) -> str:
        """Bind 127.0.0.1 on a free port, serve in a daemon thread; returns the base URL."""
        outer = self

        class Handler(StackHandler):
            stack = outer

        self._httpd = LoopbackServer(Handler, name="stack-server").start()
        return self.url

    @property
    def url(self) -> str:
        assert self._httpd is not None, "not started"
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def stop(self) -> None:
        """Off the network: open connections are reset, delayed answers dropped (see loopback)."""
        if self._httpd is not None:
            self._httpd.stop()
            self._httpd = None

    def _pause(self, seconds: float) -> None:
        """Injected latency, cut short when the server stops (no answer outlives it)."""
        httpd = self._httpd
        if httpd is not None:
            httpd.pause(seconds)
        else:
            time.sleep(seconds)

    @property
    def clients_gone(self) -> int:
        """Requests whose client (a crashed or killed sidecar) left before the answer."""
        return self._httpd.clients_gone if self._httpd is not None else 0

    # ---- world ----------------------------------------------------------------------------

    def seed_from_scenario(self, scenario: sc.Scenario) -> None:
        """Load the initial favorites (with markers) and prior task history."""
        with self.lock:
            self.no_favorites = {x.tu for x in scenario.world if isinstance(x, sc.Tu) and not x.stack_favorites}
            for line in scenario.world:
                if isinstance(line, sc.Favorite) and line.tu not in self.no_favorites:
                    fav = self._fav(line.project, line.tu, line.ru)
                    fav.update(line.changes())
                    fav["markers"] = dict(line.markers or {})
            for line in scenario.world:
                if isinstance(line, sc.History):
                    t = line.task
                    created = scenario.abs(t.created_at)
                    fav = self.favorites.get(line.tu, {}).get(line.ru, {})
                    self.history.setdefault(line.tu, {})[t.task_id] = {
                        "task_id": t.task_id, "type": t.type, "project": line.project, "tu": line.tu,
                        "ru": line.ru, "source": t.source, "created_at": created,
                        "deadline": created + keyed.TTL_S.get(t.type, 0),
                        "closed_at": None if t.closed_at is None else scenario.abs(t.closed_at),
                        "reason": t.reason, "vip": keyed.vip_tier(fav.get("spend_30d_usd"))}

    def _fav(self, project: str, tu: str, ru: str) -> dict[str, Any]:
        favs = self.favorites.setdefault(tu, {})
        if ru not in favs:
            favs[ru] = {"ru": ru, "project": project, "active": True, "is_white": False,
                        "spend_30d_usd": 0.0, "spend_total_usd": 0.0, "paid_actions": 0,
                        "paid_with_bonuses_only": False, "chat_limit": None, "mail_limit": None,
                        "blocked_by_tu": False, "blocked_by_ru": False, "markers": {}}
        return favs[ru]

    def update_favorite(self, project: str, tu: str, ru: str, changes: dict[str, Any],
                        listed_only: bool = False) -> None:
        """A favorite's attributes changed (``favorite`` / ``limits`` / ``block`` lines);
        ``listed_only``: change only a favorite Stack already lists (blocks, limits)."""
        with self.lock:
            if tu in self.no_favorites or (listed_only and ru not in self.favorites.get(tu, {})):
                return
            self._fav(project, tu, ru).update({k: v for k, v in changes.items() if k in FAV_KEYS})

    def set_fault(self, mode: str, value: float | None = None) -> None:
        """Apply a scenario ``stack`` line: ``down``, ``up``, ``error_rate p``, ``latency s``,
        ``refuse n`` (the next ``n`` writes answer 422; default 1)."""
        with self.lock:
            if mode == "down":
                self.mode["down"] = True
            elif mode == "up":
                self.mode["down"] = False
            elif mode == "error_rate":
                self.mode["error_rate"] = float(value or 0.0)
            elif mode == "latency":
                self.mode["latency"] = min(float(value or 0.0), MAX_LATENCY_S)
            elif mode == "refuse":
                self.mode["refuse"] = int(value if value is not None else 1)
            else:
                raise ValueError(f"unknown stack fault mode {mode!r}")

    def marker(self, tu: str, ru: str, name: str) -> Any:
        """The marker Stack holds now (None = absent)."""
        with self.lock:
            return (self.favorites.get(tu, {}).get(ru, {}).get("markers") or {}).get(name)

    def startup(self, tu: str) -> dict[str, Any]:
        with self.lock:
            favs = [copied(f) for _, f in sorted(self.favorites.get(tu, {}).items())]
            hist = sorted(self.history.get(tu, {}).values(), key=lambda t: (t.get("created_at") or 0, t["task_id"]))
            out = {"tu": tu, "favorites": favs, "history": copied(hist)}
            if self.deliveries.get(tu):  # handed-over deliveries, when it holds some
                out["deliveries"] = stack_deliveries.listed(self, tu)
            if tu in self.no_favorites:
                del out["favorites"]  # no list at all, not an empty one
            if self.batch:
                out["capabilities"] = ["batch"]
            return out

    def requests_by_kind(self) -> tuple[dict[str, int], dict[str, int]]:
        """``(HTTP requests by kind, writes by kind)`` so far: kinds are the route names
        (``startup``, ``marker``, ``task``, ``candidate``) plus ``batch``, ``health`` and
        ``unknown``; a batched write counts once as a write of its kind (the benchmarks' Stack
        requests by kind, issue 11 item 7)."""
        with self.lock:
            return dict(sorted(self.request_kinds.items())), dict(sorted(self.write_kinds.items()))

    def acked_markers(self) -> list[dict[str, Any]]:
        with self.lock:
            return [dict(a) for a in self.acked if a["kind"] == "marker"]

    # ---- request handling (called from handler threads) -----------------------------------

    def handle(self, method: str, path: str, headers: Any, body: bytes, *,
               in_batch: bool = False, at: float | None = None) -> tuple[int, bytes] | None:
        """One request → (status, JSON body), or None to drop the connection (``down``).
        ``in_batch``: one write of a batch (the request-level faults were applied already);
        ``at``: its batch's instant."""
        route = _route_of(method, path)  # matched once: every batched write comes here (issue 24)
        kind = _kind_of(path, route)
        if not in_batch:
            at = virtual_at(headers.get(VIRTUAL_AT_HEADER) if headers is not None else None)
        with self.lock:
            if not in_batch:
                self.counters["requests"] += 1
                self.request_kinds[kind] = self.request_kinds.get(kind, 0) + 1
            if kind in WRITE_KINDS:
                self.write_kinds[kind] = self.write_kinds.get(kind, 0) + 1
        if method == "GET" and path == "/v1/health":
            with self.lock:
                down = bool(self.mode["down"])
            if down:
                with self.lock:
                    self.counters["refused"] += 1
                return None  # it does not take writes: the probe gets no answer either
            return 200, b'{"ok":true}'
        if method == "POST" and path == "/v1/batch" and self.batch and not in_batch:
            return serve_batch(self, body, at)
        with self.lock:
            down, latency, rate = self.mode["down"], self.mode["latency"], self.mode["error_rate"]
        if in_batch:
            down, latency = False, 0.0
        if latency > 0:
            self._pause(latency)
        if down:
            with self.lock:
                self.counters["refused"] += 1
            return None
        if route is None:
            return self._bad(404, f"no route {method} {path}")
        name, groups = route
        args = [unquote(g) for g in groups]
        if name == "startup":
            with self.lock:
                self.counters["reads"] += 1
            return 200, dump(self.startup(args[0]))
        key = headers.get("Idempotency-Key")
        if not key:
            return self._bad(400, "Idempotency-Key header is required on writes")
        write = fingerprint(method, path, body)
        with self.lock:
            if key in self.idem:
                return self._repeat(key, write, at)
            attempt = self.attempts[key] = self.attempts.get(key, 0) + 1
            refuse = self.mode["refuse"] > 0
            if refuse:
                self.mode["refuse"] -= 1
                self.counters["refused_writes"] += 1
        if refuse:
            return 422, dump({"error": "injected refusal", "key": key})
        if rate > 0 and keyed.chance(self.seed, rate, "stack-error", key, attempt):
            with self.lock:
                self.counters["faulted"] += 1
            return 500, dump({"error": "injected fault", "attempt": attempt})
        try:
            data = load(body)
        except ValueError:
            return self._bad(400, "body is not JSON")
        if not isinstance(data, dict):
            return self._bad(400, "body must be a JSON object")
        with self.lock:
            if key in self.idem:  # a concurrent twin won the race
                return self._repeat(key, write, at)
            self._at = at
            answer = getattr(self, "_w_" + name)(*args, data, key) if name in ("marker", "task", "candidate") \
                else getattr(stack_deliveries, "put" if name == "delivery" else "delete")(self, *args, data, key)
            if answer[0] == 200:
                self.idem[key] = answer
                self.idem_write[key] = write
                self.counters["acked"] += 1
            else:
                self.counters["bad_requests"] += 1
            return answer

    def _repeat(self, key: str, write: str, at: float | None) -> tuple[int, bytes]:
        """A key seen before (lock held): the first answer, or 422 for a different write."""
        first = self.idem_write.get(key)
        if first is not None and first != write:
            self.counters["key_conflicts"] += 1
            self.conflicts.append({"at": self.now_fn() if at is None else at, "key": key, "first": first, "then": write})
            return 422, dump({"error": "Idempotency-Key reused for a different write", "key": key})
        self.counters["duplicates"] += 1
        return self.idem[key]

    def _bad(self, status: int, what: str) -> tuple[int, bytes]:
        with self.lock:
            self.counters["bad_requests"] += 1
        return status, dump({"error": what})

    def _record(self, **rec: Any) -> None:
        """(lock held) An acknowledged write, at the instant of the call being handled."""
        self.acked.append({"at": self.now_fn() if self._at is None else self._at, **rec})

    # writes: called with the lock held

    def _w_marker(self, tu: str, ru: str, name: str, data: dict, key: str) -> tuple[int, bytes]:
        if "value" not in data:
            return 400, dump({"error": "body needs value (null clears)"})
        value = data["value"]
        fav = self.favorites.setdefault(tu, {}).get(ru)
        if fav is None:
            fav = self.favorites[tu][ru] = {"ru": ru, "project": None, "markers": {}}
        markers = fav.setdefault("markers", {})
        markers[name] = value  # null: cleared, kept as a fact (module rules)
        self._record(kind="marker", tu=tu, ru=ru, name=name, value=value, key=key)
        return 200, dump({"ok": True, "tu": tu, "ru": ru, "name": name, "value": value})

    def _w_task(self, tu: str, data: dict, key: str) -> tuple[int, bytes]:
        task = data.get("task")
        if data.get("event") not in ("created", "closed") or not isinstance(task, dict) or not task.get("task_id"):
            return 400, dump({"error": "body needs event created|closed and task.task_id"})
        hist = self.history.setdefault(tu, {})
        hist.setdefault(task["task_id"], {}).update(task)
        self._record(kind="task", tu=tu, ru=task.get("ru"), event=data["event"], task_id=task["task_id"], key=key)
        return 200, dump({"ok": True, "task_id": task["task_id"]})

    def _w_candidate(self, tu: str, data: dict, key: str) -> tuple[int, bytes]:
        missing = [k for k in ("ru", "type", "source", "outcome") if not isinstance(data.get(k), str)]
        if not isinstance(data.get("at"), (int, float)) or isinstance(data.get("at"), bool):
            missing.append("at")
        if missing:
            return 400, dump({"error": f"candidate body needs {', '.join(missing)}"})
        outcome = data["outcome"]
        if not (outcome in ("created", "miss") or (outcome.startswith("refused:") and len(outcome) > 8)):
            return 400, dump({"error": f"candidate outcome {outcome!r}: created, refused:<reason> or miss"})
        self.candidates.setdefault(tu, []).append(data)
        self._record(kind="candidate", tu=tu, ru=data.get("ru"), key=key)
        return 200, dump({"ok": True})

