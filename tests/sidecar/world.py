"""A tiny platform world for driving the engine in unit tests (virtual clock, no I/O)."""
from __future__ import annotations

from sidecar.router.ops import PutDelivery
from sidecar.services import default_services
from tests.sidecar.driver import Driver, stack_writes

T0 = 1796025600.0  # 2026-11-30T08:00:00Z


def fav(ru: str, project: str = "golden", **kw) -> dict:
    base = {"ru": ru, "project": project, "active": True, "is_white": False,
            "spend_30d_usd": 50.0, "spend_total_usd": 400.0, "paid_actions": 40,
            "paid_with_bonuses_only": False,
            "chat_limit": None if project == "golden" else 3,
            "mail_limit": None if project == "golden" else 1, "markers": {}}
    base.update(kw)
    return base


def without_follow_up_mail(rt):
    return [s for s in default_services(rt) if s.name != "follow_up_mail"]


class World:
    """Online RUs, chat and mail logs; answers the platform requests the services make.

    ``follow_up_mail``: run the Follow-up mail service too.  Off by default: the other services'
    tests assert exact task lists and marker writes, and in a world whose TU never mailed every
    online favorite would also get a 6 h Follow-up mail (DESIGN §8.1); the Follow-up mail tests,
    the seed scenarios and the shift run every service together."""

    def __init__(self, project: str = "golden", tu: str = "tu-1", seed: int | str = 3, *,
                 follow_up_mail: bool = False) -> None:
        self.project = project
        self.tu = tu
        self.follow_up_mail = follow_up_mail
        self.online: set[str] = set()
        self.chat: dict[str, list[dict]] = {}  # ru -> [{"id","from","at","kind"}]
        self.mails: dict[str, list[dict]] = {}  # ru -> [{"id","from","at"}] (platform letters)
        self.limits: dict[str, tuple[int | None, int | None]] = {}  # None: the row carries no limit
        self.new_rows: dict[str, dict] = {}  # ru -> raw row of the unanswered column (check chat)
        self.startup: dict | None = None  # what Stack served at the last login
        self.d = Driver(self.answer, seed=seed,
                        services=default_services if follow_up_mail else without_follow_up_mail)
        self.d.advance_to(T0)

    # platform ---------------------------------------------------------------------------------
    def answer(self, tu: str, method: str, params: dict):
        if method == "online_ru":
            return {"online": sorted(self.online)}
        if method == "chat_history":
            return {"dialogs": [{"ru": ru, "messages": self.chat.get(ru, [])} for ru in params["ru_ids"]]}
        if method in ("scroll_all_online", "dialogs") and (method == "scroll_all_online"
                                                           or params.get("criteria") == ["active", "online"]):
            return {"dialogs": [self.row(ru) for ru in sorted(self.online)]}
        if method == "scroll_new" or (method == "dialogs" and params.get("criteria") == ["unanswered"]):
            return {"dialogs": [dict(r) for _, r in sorted(self.new_rows.items())]}
        if method == "chat_restriction":
            c, m = self.limits.get(params["ru"], (3, 1))
            return {"chatLimit": c, "mailLimit": m}
        if method in ("get_mail", "inmails_chain", "correspondence_get", "emails_history"):
            return {"mails": [dict(x) for x in self.mails.get(params["ru"], [])]}
        return {"dialogs": [], "mails": []}

    def row(self, ru: str) -> dict:
        msgs = self.chat.get(ru, [])
        last = msgs[-1] if msgs else None
        tu_at = max((m["at"] for m in msgs if m["from"] == "tu"), default=None)
        c, m = self.limits.get(ru, (3, 1))
        return {"userId": ru, "dialogId": "d-" + ru if msgs else None, "isOnline": True,
                "lastMessage": None if last is None else {"from": last["from"], "at": last["at"],
                                                          "type": last.get("kind", "message")},
                "lastTuMessageAt": tu_at, "chatLimit": c, "mailLimit": m}

    # actions ----------------------------------------------------------------------------------
    def at(self, *parts: float) -> "World":
        """Advance to ``T0 + parts[0] + parts[1] + …`` summed left to right — the order in which
        the services add delays to instants — so exact-time assertions hold bit for bit."""
        t = T0
        for part in parts:
            t += part
        self.d.advance_to(t)
        return self

    def pass_slot(self, after: float, name: str = "online") -> float:
        """The first keyed grid slot of pass ``name`` strictly after ``after`` (the instants the
        pass runs at when its timer, not a login or a reconnect, runs it)."""
        from sidecar.services.passes import PassService
        rt = self.d.engine.tus[self.tu]
        svc = rt.services.named(PassService.name)
        assert isinstance(svc, PassService)
        return svc._next_slot(after, rt.client.pass_named(name))

    def at_abs(self, t: float) -> "World":
        """Advance to the absolute instant ``t`` (unix seconds)."""
        self.d.advance_to(t)
        return self

    def login(self, favorites: list[dict], history: list[dict] = (), **kw) -> None:
        self.startup = {"favorites": favorites, "history": list(history)}
        self.d.login(self.tu, self.project, startup=self.startup, **kw)

    def local(self) -> dict:
        """What this engine committed so far, as SQLite would hold it after a crash: favorites,
        tasks, service state, and every marker write still unacknowledged (pending)."""
        import msgspec
        from sidecar.store import ops as o
        from sidecar.domain.favorites import Favorite
        favs: dict[str, Favorite] = {}
        tasks: dict[str, object] = {}
        state: dict[str, dict] = {}
        pending: dict[tuple[str, str], object] = {}
        for op in self.d.ops:
            if isinstance(op, o.PutFavorite):
                favs[op.ru] = msgspec.json.decode(msgspec.json.encode(op.data), type=Favorite)
            elif isinstance(op, o.DeleteFavorite):
                favs.pop(op.ru, None)
            elif isinstance(op, o.PutTask):
                # a copy as SQLite holds it (overdue is derived again at restore)
                tasks[op.task.task_id] = msgspec.convert(msgspec.to_builtins(op.task), type(op.task))
            elif isinstance(op, o.PutState):
                state.setdefault(op.scope, {})[op.key] = op.value
            elif isinstance(op, o.DeleteState):
                state.get(op.scope, {}).pop(op.key, None)
            elif isinstance(op, PutDelivery) and op.delivery.source == "markers":
                d = op.delivery  # the marker's pending stack delivery (structured columns)
                assert d.channel == "stack" and d.ru is not None
                pending[(d.ru, d.subject)] = msgspec.json.decode(d.message)["value"]
        return {"local_favorites": favs, "local_tasks": list(tasks.values()), "local_state": state,
                "pending_markers": pending}

    def restart(self, startup: dict | None = None) -> "World":
        """A crash and restart at the current instant: a new engine (same seed) logs the TU in
        from :meth:`local` and Stack's ``startup`` (default: what it served at the last login),
        ``resumed`` (the session row a crash leaves behind)."""
        w = World(self.project, self.tu, self.d.engine.rng.seed, follow_up_mail=self.follow_up_mail)
        w.online, w.chat, w.limits, w.new_rows = set(self.online), self.chat, self.limits, self.new_rows
        w.mails = self.mails
        w.d.advance_to(self.d.now)
        w.startup = self.startup if startup is None else startup
        w.d.login(self.tu, self.project, startup=w.startup, resumed=True, **self.local())
        return w

    def ru_writes(self, ru: str, text: str = "hi") -> None:
        now = self.d.now
        mid = f"m-{len(self.chat.get(ru, []))}-{ru}"
        self.chat.setdefault(ru, []).append({"id": mid, "from": "ru", "at": now, "kind": "message"})
        self.online.add(ru)
        if self.project == "golden":
            self.d.event(self.tu, "golden", "receivePrivateMessage",
                         {"messageId": mid, "senderId": ru, "recipientId": self.tu, "sentAt": now, "text": text})
        elif self.project == "chathouse":
            self.d.event(self.tu, "chathouse", "Send",
                         {"id": mid, "type": "message", "from": ru, "to": self.tu, "at": now, "body": text})
        else:
            self.d.event(self.tu, "prime", "MessageSent",
                         {"id": mid, "type": "message", "senderId": ru, "recipientId": self.tu, "at": now, "text": text})

    def tu_writes(self, ru: str) -> None:
        now = self.d.now
        mid = f"t-{len(self.chat.get(ru, []))}-{ru}"
        self.chat.setdefault(ru, []).append({"id": mid, "from": "tu", "at": now, "kind": "message"})
        if self.project == "golden":
            self.d.event(self.tu, "golden", "privateMessageSent",
                         {"messageId": mid, "senderId": self.tu, "recipientId": ru, "sentAt": now, "text": "."})
        elif self.project == "chathouse":
            self.d.event(self.tu, "chathouse", "Send",
                         {"id": mid, "type": "message", "from": self.tu, "to": ru, "at": now, "body": "."})
        else:
            self.d.event(self.tu, "prime", "MessageSent",
                         {"id": mid, "type": "message", "senderId": self.tu, "recipientId": ru, "at": now, "text": "."})

    def tu_mails(self, ru: str) -> None:
        """The TU sends a letter now (the platform's echo of it)."""
        now = self.d.now
        mid = f"tm-{len(self.mails.get(ru, []))}-{ru}"
        self.mails.setdefault(ru, []).append({"id": mid, "from": "tu", "at": now})
        if self.project == "golden":
            self.d.event(self.tu, "golden", "mailSent", {"mailId": mid, "recipientId": ru, "sentAt": now})
        elif self.project == "chathouse":
            self.d.event(self.tu, "chathouse", "Send",
                         {"id": mid, "type": "inmail_message", "from": self.tu, "to": ru, "at": now, "body": ""})
        else:
            self.d.event(self.tu, "prime", "email", {"id": mid, "senderId": self.tu, "recipientId": ru, "at": now})

    def ru_reads(self, ru: str, event_key: str, mail_id: str = "ml-0") -> None:
        """The RU read the TU's letter: the platform's read statistics (none on Prime)."""
        now = self.d.now
        if self.project == "golden":
            self.d.event(self.tu, "golden", "statistics", {"type": "EmailRead", "userId": ru, "at": now,
                                                            "eventKey": event_key, "mailId": mail_id})
        elif self.project == "chathouse":
            self.d.event(self.tu, "chathouse", "statistic", {"type": "inmail_read", "from": ru, "to": self.tu,
                                                              "at": now, "eventKey": event_key, "mailId": mail_id})

    def open_task(self, type_: str, ru: str):
        return self.d.engine.factory.open_for(self.tu, ru, __import__("sidecar.domain.tasks", fromlist=["TaskType"]).TaskType(type_))

    def markers(self, ru: str) -> list:
        """Every followUpChat marker value written for ``ru``, in order (None = clear)."""
        import msgspec
        out = []
        for d in stack_writes(self.d.ops, "markers"):
            if d.ru == ru:
                out.append((d.idem_key, msgspec.json.decode(d.message)["value"]))
        return out
