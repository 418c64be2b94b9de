"""Per-TU runtime: the state every service of one TU shares, and the helpers that turn a
service's intent into effects on the current :class:`~sidecar.services.base.Step`.

Rule 1.  State kept here: the favorites cache (Stack's favorites with markers as frozen
         :class:`~sidecar.domain.favorites.Favorite` values, updated by ``favorite.update``, block
         events and the online passes — seed 003 "з апі оновлюємо тільки онлайн і хто кого
         заблокував"; an update replaces only that RU's value), the RU Online set and the last
         dialog snapshot per RU.
Rule 2.  **Favorites are what Stack's startup data lists** (DESIGN §6; seed 003 "фаворитів
         обчислюємо і тримаємо на своїй стороні").  A block event, a limits answer, a dialog row or
         a ``favorite.update`` for any other RU is kept as that pair's attributes (``pairs``:
         blocks, limits), which gate tasks like a favorite's do, but never make the RU a favorite.
         A cleared marker is kept as ``None`` (not dropped): "cleared by a block or a new
         Unanswered" is a fact restore must see, distinct from "never written" (DESIGN §7).
Rule 3.  An online pass expires the open online-only prompts of every RU it does not list (DESIGN
         §6), before the services hear of the pass — also the first after a restart; grid passes
         only (the login's and a reconnect's do not), so a crash moves no expiry.
Rule 4.  Online/offline is never stored (seed 004 "Збереження"): after a restart it comes from the
         login pass.  The services are heard through :class:`~sidecar.runtime.hooks.Services`, the
         one broadcaster; this module never loops over them.
Rule 5.  Timer keys are ``(tu, *key)`` in the engine's one scheduler; ``cancel_all`` drops them at
         logout.  Every marker change is written locally (favorite row) and enqueued for Stack in
         the same step (DESIGN §9), so it commits in one transaction with the state change that
         caused it.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from sidecar.core.rng import KeyedRandom
from sidecar.core.scheduler import Scheduler
from sidecar.domain.favorites import Favorite
from sidecar.domain.tasks import CloseReason, HistoryRow, TaskType
from sidecar.runtime.decisions import DecisionLog
from sidecar.runtime.factory import Candidate, Refused, TaskFactory
from sidecar.runtime.hooks import Services
from sidecar.runtime.step import Request, ServiceHooks, Step
from sidecar.store import ops
from sidecar.stack import writes as stack_out

if TYPE_CHECKING:  # pragma: no cover
    from platform_clients.base import PlatformClient
    from sidecar.domain.events import DialogSnapshot
    from sidecar.domain.tasks import Task

# put_state builds it positionally (one per chat message): keep in step with its fields
assert ops.PutState.__struct_fields__ == ("tu", "scope", "key", "value")


class TuRuntime:
    """One logged-in (or restoring) TU."""

    def __init__(self, tu: str, project: str, client: type["PlatformClient"], operator: str = "",
                 *, scheduler: Scheduler, factory: TaskFactory, rng: KeyedRandom,
                 decisions: DecisionLog, epoch: int = 0) -> None:
        # shared, process-wide parts handed down by the engine (no pointer back up to it)
        self.scheduler = scheduler  # the one ordered timer queue; this TU's keys are (tu, ...)
        self.factory = factory  # the Task Factory (open tasks of every TU)
        self.rng = rng  # keyed randomness, deployment seed
        self.decisions = decisions  # the decision log's memory (DESIGN §13)
        self.epoch = epoch  # this login session (a late answer to an older one is ignored)
        self.tu = tu  # our profile id
        self.project = project  # golden | chathouse | prime
        self.client = client  # the project's platform client (pure)
        self.operator = operator  # who is logged in (trace/status only)
        self.logged_in = False  # tasks are created only for a logged-in TU
        self.inbox_synced = False  # the login's check chat has answered (or there is none)
        # the login resumes a session a crash ended (its durable session row was still there):
        # a sidecar that never stopped ran no pass at this instant
        self.resumed = False
        self.favorites: dict[str, Favorite] = {}  # ru -> Stack's favorite, with its markers
        self.pairs: dict[str, Favorite] = {}  # ru -> attributes of a non-favorite pair (blocks, limits)
        self.online: set[str] = set()  # RU Online: who is online now
        self.snapshots: dict[str, "DialogSnapshot"] = {}  # ru -> last dialog row seen by a pass
        self.history: dict[str, list[HistoryRow]] = {}  # ru -> Stack task history rows (restore input)
        self.local_state: dict[str, dict] = {}  # scope -> key -> value, loaded at login
        self.services = Services()  # per-TU services in dispatch order: the one broadcaster

    # wiring -----------------------------------------------------------------------------------
    def add_services(self, services: Sequence[ServiceHooks]) -> None:
        self.services = Services(services)

    @property
    def by_name(self) -> Mapping[str, ServiceHooks]:
        """Service.name -> service (a timer's or a request's owner)."""
        return self.services.by_name

    # facts handed up by the services ----------------------------------------------------------
    def propose(self, step: Step, cand: Candidate) -> "Task | Refused":
        """A service's candidate goes to the Task Factory (created or refused, logged)."""
        return self.factory.propose(step, self, cand)

    def blocking_type(self, ru: str, type_: TaskType) -> TaskType | None:
        """The open task type of the pair that holds a ``type_`` candidate back, or None."""
        return self.factory.blocking_type(self.tu, ru, type_)

    # reports from the Task Factory ------------------------------------------------------------
    def task_created(self, step: Step, task: "Task") -> None:
        self.services.task_created(step, task)

    def task_closed(self, step: Step, task: "Task") -> None:
        self.services.task_closed(step, task)

    def is_favorite(self, ru: str) -> bool:
        return ru in self.favorites

    def attrs(self, ru: str) -> Favorite:
        """The pair's attributes: the favorite's, else what events told of a non-favorite (an
        empty value — every attribute unknown — when nothing was told)."""
        fav = self.favorites.get(ru)
        if fav is None:
            fav = self.pairs.get(ru)
        return fav if fav is not None else Favorite(ru=ru)

    def blocked(self, ru: str) -> bool:
        """``attrs(ru).blocked`` without building the empty value of a pair nothing was told
        of (every new RU's first message asks)."""
        fav = self.favorites.get(ru)
        if fav is None:
            fav = self.pairs.get(ru)
        return fav is not None and fav.blocked

    def limit(self, ru: str, channel: str) -> int | None:
        """The pair's ``chat`` / ``mail`` limit, None when unknown.  Every dialog row that carries
        a limit (online pass, check chat) and every live limits answer writes it into the pair's
        attributes (:meth:`note_limits`), so the latest one wins.  Unknown counts as absent
        (DESIGN §6)."""
        return self.attrs(ru).limit(channel)

    # timers -----------------------------------------------------------------------------------
    def schedule(self, key: tuple, due: float, payload: Any = None) -> None:
        self.scheduler.schedule((self.tu, *key), due, payload)

    def cancel(self, key: tuple) -> bool:
        return self.scheduler.cancel((self.tu, *key))

    def due_of(self, key: tuple) -> float | None:
        return self.scheduler.due_of((self.tu, *key))

    def cancel_all(self) -> None:
        tu = self.tu
        self.scheduler.cancel_where(lambda k: k[0] == tu)

    # requests ---------------------------------------------------------------------------------
    def request(self, step: Step, service: str, method: str, params: dict, tag: str,
                context: Any = None) -> None:
        """Ask Electron for platform data; the answer reaches ``service.on_result``."""
        step.requests.append(Request(service, method, params, tag, context, tu=self.tu,
                                     project=self.project, epoch=self.epoch, at=step.now))

    # online -----------------------------------------------------------------------------------
    def mark_online(self, ru: str) -> bool:
        """An RU's own activity shows it online until the next pass says otherwise (DESIGN §2).
        Returns True when it was not online before: the caller then runs :meth:`came_online`
        *after* the services handled the activity itself, so an RU's own message is answered
        (and wipes a chain) before any online-triggered reminder could fire for it."""
        if ru in self.online:
            return False
        self.online.add(ru)
        return True

    def came_online(self, step: Step, ru: str) -> None:
        if ru not in self.online:
            return
        self.services.online(step, {ru}, self.online, {}, False)

    def apply_online_pass(self, step: Step, online: set[str],
                          snapshots: list["DialogSnapshot"], scheduled: bool = False) -> None:
        """A pass result replaces the online set; dialog rows refresh limits and blocks.
        ``scheduled``: the pass ran at its keyed grid slot (not at a login or a reconnect)."""
        came = online - self.online
        self.online = set(online)
        # judged against the open prompts, not the previous set: a restarted sidecar's first grid
        # pass must expire an adopted prompt whose RU left while it was down.  Grid passes only:
        # a restart's login pass would close it at the crash instant, where the sidecar that never
        # stopped closes it at its next grid pass (DESIGN §5)
        if scheduled:
            for ru in sorted(self.factory.open_rus(self.tu) - self.online):
                self.factory.expire_offline(step, self, ru)
        rows = {}
        for snap in snapshots:
            rows[snap.ru] = snap
            self.snapshots[snap.ru] = snap
            self.note_row(step, snap)
        self.services.online(step, came, self.online, rows, True, scheduled=scheduled)

    def note_row(self, step: Step, snap: "DialogSnapshot") -> None:
        """A dialog row refreshes the pair's blocks (seed 003: "з апі оновлюємо ... хто кого
        заблокував") and the limits it carries."""
        known = snap.ru in self.favorites or snap.ru in self.pairs
        changes: dict[str, Any] = {}
        if known or snap.blocked_by_tu or snap.blocked_by_ru:
            changes = {"blocked_by_tu": snap.blocked_by_tu, "blocked_by_ru": snap.blocked_by_ru}
        if self.client.has_limits:
            if snap.chat_limit is not None:
                changes["chat_limit"] = snap.chat_limit
            if snap.mail_limit is not None:
                changes["mail_limit"] = snap.mail_limit
        if changes:
            self.update_favorite(step, snap.ru, changes)

    # favorites --------------------------------------------------------------------------------
    def update_favorite(self, step: Step, ru: str, changes: Mapping[str, Any]) -> None:
        """Apply attribute changes (``None`` values are ignored, markers change only through
        :meth:`write_marker`); persist and tell services.  Only the changed RU's value is
        replaced (:meth:`Favorite.updated`).  For an RU Stack does not list as a favorite the
        changes go to its pair attributes (in memory; passes refresh them after a restart) — it
        does not become a favorite."""
        listed = ru in self.favorites
        before = self.attrs(ru)
        after = before.updated(changes)
        if after is None:
            return
        if listed:
            self.favorites[ru] = after
            step.ops.append(ops.PutFavorite(tu=self.tu, ru=ru, project=self.project, data=after))
        else:
            self.pairs[ru] = after
        self.services.favorite_changed(step, ru, before, after)
        newly_blocked = ((after.blocked_by_tu and not before.blocked_by_tu)
                         or (after.blocked_by_ru and not before.blocked_by_ru))
        if newly_blocked:  # seed 003 scenario 10: the block check removes the open tasks —
            # after the services dropped their state, so a closing task plans nothing new
            self.factory.close_pair(step, self, ru, CloseReason.BLOCKED)

    def spend_30d(self, ru: str) -> float | None:
        """The RU's global 30-day spend (the VIP tier, seed 003 "по всіх клієнтах"): the
        favorite's when Stack lists one, else the last dialog row's; None when unknown."""
        fav = self.favorites.get(ru)
        spend = None if fav is None else fav.spend_30d_usd
        if spend is None:
            snap = self.snapshots.get(ru)
            spend = None if snap is None else snap.spend_30d_usd
        return spend

    def marker(self, ru: str, name: str) -> Any:
        fav = self.favorites.get(ru)
        return None if fav is None else fav.marker(name)

    def marker_cleared(self, ru: str, name: str) -> bool:
        """True when the marker was cleared (a fact), not merely never written (DESIGN §7)."""
        fav = self.favorites.get(ru)
        return fav is not None and fav.marker_cleared(name)

    def write_marker(self, step: Step, ru: str, name: str, value: Any, idem_key: str) -> None:
        """Set (or clear with ``None``) ``favorite.<name>`` locally and enqueue it for Stack in
        the same step (DESIGN §9): a ``markers`` routing event whose built-in route is the Stack write.  ``idem_key`` per DESIGN §9 (operation included).  Markers
        exist only on favorites: ValueError for any other RU (a programming error)."""
        fav = self.favorites.get(ru)
        if fav is None:
            raise ValueError(f"{self.tu}: marker {name} for {ru}, which is not a favorite")
        fav = self.favorites[ru] = fav.with_marker(name, value)  # None: cleared, kept as a fact
        step.ops.append(ops.PutFavorite(tu=self.tu, ru=ru, project=self.project, data=fav))
        step.emit(stack_out.marker_event(self.tu, ru, name, value, idem_key))

    # state ------------------------------------------------------------------------------------
    def put_state(self, step: Step, scope: str, key: str, value: Any) -> None:
        step.ops.append(ops.PutState(self.tu, scope, key, value))  # positional: PutState's fields

    def delete_state(self, step: Step, scope: str, key: str) -> None:
        step.ops.append(ops.DeleteState(tu=self.tu, scope=scope, key=key))

    # tasks ------------------------------------------------------------------------------------
    def persist_task(self, step: Step, task: "Task", event: str) -> None:
        """Task row + Stack task-history event, in the step's transaction (DESIGN §9)."""
        step.ops.append(ops.PutTask(task=task))
        step.emit(stack_out.task_routed(task, event))
        self.note_history(task)

    def note_history(self, task: "Task") -> None:
        """The in-memory task history (restore input and the services' look-ups) learns the
        task's current state; idempotent."""
        rows = self.history.setdefault(task.ru, [])
        for i in range(len(rows) - 1, -1, -1):
            if rows[i].task_id == task.task_id:
                rows[i] = rows[i].closed_as(task)
                return
        rows.append(HistoryRow.of(task))

    def last_task(self, ru: str, type_: str, *, closed: bool | None = None) -> HistoryRow | None:
        """The newest history row of ``type_`` for the pair (``closed`` filters)."""
        for row in reversed(self.history.get(ru, ())):
            if row.type != type_:
                continue
            if closed is None or (row.closed_at is not None) == closed:
                return row
        return None
