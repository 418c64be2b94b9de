"""The platforms' world at virtual time: who is a favorite, who is online, what was said.

Rules / theory of operation
---------------------------
* State, keyed by ``(project, tu, ru)`` (a *pair*): the favorite's attributes (as Stack knows
  them: ``active``, ``is_white``, spend, paid actions, limits, blocks either way), the chat log
  (messages, likes, system messages, icebreakers — the items a dialog list shows as its last
  message), chat requests, the dialog-created instant, Chathouse tab new's not-yet-created
  dialog and mutual like (README revision 2: shown until the TU writes), the mail log (platform letters either
  way), mail reads and incoming e-mails.  Per project: the set of online RU ids.
* All instants are unix seconds (UTC floats).  The initial world's ``t`` values (negative =
  before start) are converted with the scenario's start.
* :meth:`World.apply` plays one timeline line into the state at instant ``now``; the encoders
  (:mod:`electron_stub.encode`) turn the same line into the platform's raw frames, and the
  answers (:mod:`electron_stub.answers`) read the state to answer ``platform.request``.
  The world never reads the wall clock and holds no randomness.
* ``online`` lines set the RU's online state for every TU of that project (the world is per
  project: one RU id is one customer of that platform).  The world does not infer online state
  from activity: that is the sidecar's job (DESIGN §2 RU Online).
* Golden has no limits: its favorites' ``chat_limit`` / ``mail_limit`` stay ``None``.
"""
from __future__ import annotations

from typing import Any

import msgspec

from electron_stub import scenario as sc

DEFAULT_FAVORITE: dict[str, Any] = {
    "active": True, "is_white": False, "spend_30d_usd": 0.0, "spend_total_usd": 0.0,
    "paid_actions": 0, "paid_with_bonuses_only": False, "chat_limit": None, "mail_limit": None,
    "blocked_by_tu": False, "blocked_by_ru": False,
}

CHAT_TYPES = ("message", "like", "system", "icebreaker")


class Item(msgspec.Struct, kw_only=True):
    """One chat item.  ``side``: ``ru`` | ``tu`` | ``system``; ``type``: one of CHAT_TYPES;
    ``like``: the like kind (rose, like, likephoto, wink, like_newsfeed_post) for likes."""

    id: str
    side: str
    at: float
    type: str = "message"
    body: str = ""
    like: str = ""

    def as_last_message(self) -> dict:
        """The ``RawDialog.lastMessage`` shape: ``{"from","at","type","body"}``."""
        return {"from": self.side, "at": self.at, "type": self.type, "body": self.body}


class Letter(msgspec.Struct, kw_only=True):
    """A platform letter (mail) either way."""

    id: str
    side: str  # ru | tu
    at: float


class Pair(msgspec.Struct, kw_only=True):
    """Everything the world knows about one (project, tu, ru)."""

    project: str
    tu: str
    ru: str
    items: list[Item] = []
    mails: list[Letter] = []
    reads: list[dict] = []  # {"mail_id","event_key","at"}
    emails: list[dict] = []  # {"id","received_at","at"}
    chat_requests: list[float] = []
    dialog_created_at: float | None = None
    empty_dialog_at: float | None = None  # a not-yet-created dialog appeared in tab new (Chathouse)
    mutual_like_at: float | None = None  # a mutual like appeared in tab new (Chathouse)

    # ---- queries ------------------------------------------------------------------------

    def visible(self, include_likes: bool = True) -> list[Item]:
        return list(self.items) if include_likes else [i for i in self.items if i.type != "like"]

    def last_item(self, include_likes: bool = True) -> Item | None:
        """The dialog's last chat item (by time, then insertion order)."""
        # one pass over the items, no visible() copy: asked for every dialog row (issue 24)
        best = None
        for i in self.items:
            if (include_likes or i.type != "like") and (best is None or i.at >= best.at):
                best = i
        return best

    def last_tu_message_at(self) -> float | None:
        ts = [i.at for i in self.items if i.side == "tu" and i.type == "message"]
        return max(ts) if ts else None

    def last_mail(self, side: str | None = None) -> Letter | None:
        best = None
        for m in self.mails:
            if (side is None or m.side == side) and (best is None or m.at >= best.at):
                best = m
        return best

    def unanswered_mail_at(self) -> float | None:
        """The RU's last letter if the TU has not written a letter since, else None."""
        # last_mail("ru") and last_mail("tu") in one pass: only their instants matter here
        ru_at: float | None = None
        tu_at: float | None = None
        for m in self.mails:
            if m.side == "ru":
                if ru_at is None or m.at >= ru_at:
                    ru_at = m.at
            elif m.side == "tu" and (tu_at is None or m.at >= tu_at):
                tu_at = m.at
        if ru_at is None or (tu_at is not None and tu_at >= ru_at):
            return None
        return ru_at

    def last_activity(self, include_likes: bool = True) -> float | None:
        ts = [i.at for i in self.items if include_likes or i.type != "like"]
        if self.dialog_created_at is not None:
            ts.append(self.dialog_created_at)
        return max(ts) if ts else None

    def has_dialog(self) -> bool:
        """The dialog exists (its id is known): an item, a Prime ``dialog_created`` or a mutual
        like (a match opens the dialog; unlike the not-yet-created one, README revision 2)."""
        return bool(self.items) or self.dialog_created_at is not None or self.mutual_like_at is not None

    def empty_in_new(self) -> bool:
        """A not-yet-created dialog shown in tab new: it appeared and nobody has written yet (the
        first chat item creates the dialog; README revision 2 ``empty_dialog``)."""
        return self.empty_dialog_at is not None and not self.has_dialog()

    def mutual_like_standing(self) -> bool:
        """A mutual like the TU has not answered: no TU chat message since it appeared (README
        revision 2 ``mutual_like``; the TU writing first is what Open Limits asks for)."""
        if self.mutual_like_at is None:
            return False
        tu_at = self.last_tu_message_at()
        return tu_at is None or tu_at < self.mutual_like_at


class World:
    """Mutable world state; see the module docstring for the rules.

    ``start`` is the scenario's start (unix seconds).  Methods raise ``KeyError`` only for a TU the
    scenario never declared when ``strict`` is asked of :meth:`project_of`.
    """

    def __init__(self, start: float) -> None:
        self.start = start
        self.tus: dict[str, str] = {}  # tu -> project
        self.favorites: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.pairs: dict[tuple[str, str, str], Pair] = {}
        self.online: dict[str, set[str]] = {p: set() for p in sc.PROJECTS}
        self._pairs_by_tu: dict[tuple[str, str], dict[str, Pair]] = {}  # index: (project, tu) -> ru -> pair
        self._favs_by_tu: dict[tuple[str, str], dict[str, dict]] = {}  # index: (project, tu) -> ru -> fav
        self._seq = 0  # for ids of items a line does not name (likes, system messages …)

    # ---- building ------------------------------------------------------------------------

    @classmethod
    def from_scenario(cls, scenario: sc.Scenario) -> "World":
        w = cls(scenario.start)
        for line in scenario.world:
            w.apply_initial(line)
        return w

    def apply_initial(self, line: Any) -> None:
        """Play one initial-world line (``tu``, ``favorite``, ``chat_log``, ``mail_log``;
        ``history`` belongs to Stack and is ignored here)."""
        if isinstance(line, sc.Tu):
            self.tus[line.tu] = line.project
        elif isinstance(line, sc.Favorite):
            self.set_favorite(line.project, line.tu, line.ru, line.changes())
        elif isinstance(line, sc.ChatLog):
            self.pair(line.project, line.tu, line.ru).items.append(
                Item(id=line.id, side=line.from_, at=self.start + line.at))
        elif isinstance(line, sc.MailLog):
            self.pair(line.project, line.tu, line.ru).mails.append(
                Letter(id=line.id, side=line.from_, at=self.start + line.at))

    def pair(self, project: str, tu: str, ru: str) -> Pair:
        key = (project, tu, ru)
        p = self.pairs.get(key)
        if p is None:
            p = self.pairs[key] = Pair(project=project, tu=tu, ru=ru)
            self._pairs_by_tu.setdefault((project, tu), {})[ru] = p
        return p

    def favorite(self, project: str, tu: str, ru: str) -> dict[str, Any] | None:
        return self.favorites.get((project, tu, ru))

    def set_favorite(self, project: str, tu: str, ru: str, changes: dict[str, Any]) -> dict[str, Any]:
        """Create (with defaults) or update a favorite; returns it."""
        fav = self.favorites.get((project, tu, ru))
        if fav is None:
            fav = self.favorites[(project, tu, ru)] = {"project": project, "tu": tu, "ru": ru,
                                                       **DEFAULT_FAVORITE}
            self._favs_by_tu.setdefault((project, tu), {})[ru] = fav
        fav.update(changes)
        if project == "golden":
            fav["chat_limit"] = fav["mail_limit"] = None
        self.tus.setdefault(tu, project)
        return fav

    def favorites_of(self, project: str, tu: str) -> list[dict[str, Any]]:
        """The TU's favorites in a stable order (RU id)."""
        favs = self._favs_by_tu.get((project, tu), {})
        return [favs[ru] for ru in sorted(favs)]

    def is_online(self, project: str, ru: str) -> bool:
        return ru in self.online[project]

    def next_id(self, prefix: str) -> str:
        self._seq += 1
        return f"{prefix}-w{self._seq}"

    # ---- timeline ------------------------------------------------------------------------

    def apply(self, line: Any, now: float) -> None:
        """Play one timeline line at ``now`` (unix seconds).  Lines without a world effect
        (login, logout, crash, stack, expect, notification) are no-ops here."""
        k = type(line)
        if k is sc.Online:
            (self.online[line.project].add if line.online else self.online[line.project].discard)(line.ru)
        elif k is sc.Message:
            self.pair(line.project, line.tu, line.ru).items.append(
                Item(id=line.id, side=line.from_, at=now, body=line.body))
        elif k is sc.Like:
            self.pair(line.project, line.tu, line.ru).items.append(
                Item(id=self.like_id(line), side="ru", at=now,
                     type="like", body=like_body(line.project, line.like), like=line.like))
        elif k is sc.Mail:
            self.pair(line.project, line.tu, line.ru).mails.append(Letter(id=line.id, side=line.from_, at=now))
        elif k is sc.MailReadLine:
            self.pair(line.project, line.tu, line.ru).reads.append(
                {"mail_id": line.mail_id, "event_key": line.event_key, "at": now})
        elif k is sc.EmailLine:
            rec = now if line.received_at is None else self.start + line.received_at
            self.pair(line.project, line.tu, line.ru).emails.append({"id": line.id, "received_at": rec, "at": now})
        elif k is sc.SystemLine:
            self.pair(line.project, line.tu, line.ru).items.append(
                Item(id=self.item_id(line, "sys"), side="system", at=now, type="system", body=line.text))
        elif k is sc.Icebreaker:
            self.pair(line.project, line.tu, line.ru).items.append(
                Item(id=self.item_id(line, "ice"), side="ru", at=now, type="icebreaker", body=""))
        elif k is sc.DialogCreatedLine:
            self.pair(line.project, line.tu, line.ru).dialog_created_at = now
        elif k is sc.ChatRequestLine:
            self.pair(line.project, line.tu, line.ru).chat_requests.append(now)
        elif k is sc.EmptyDialog:
            self.pair(line.project, line.tu, line.ru).empty_dialog_at = now
        elif k is sc.MutualLike:
            self.pair(line.project, line.tu, line.ru).mutual_like_at = now
        elif k in (sc.Block, sc.Unblock):
            field = "blocked_by_tu" if line.by == "tu" else "blocked_by_ru"
            self.set_favorite(line.project, line.tu, line.ru, {field: k is sc.Block})
        elif k is sc.Favorite:
            self.set_favorite(line.project, line.tu, line.ru, line.changes())
        elif k is sc.Limits:
            ch = {}
            if line.chat is not None:
                ch["chat_limit"] = line.chat
            if line.mail is not None:
                ch["mail_limit"] = line.mail
            self.set_favorite(line.project, line.tu, line.ru, ch)

    def record_send(self, project: str, tu: str, ru: str, channel: str, item_id: str, now: float,
                    body: str = "") -> None:
        """The operator (TU) sent on ``channel`` (``chat`` | ``mail``): log it in the world."""
        p = self.pair(project, tu, ru)
        if channel == "chat":
            p.items.append(Item(id=item_id, side="tu", at=now, body=body))
        else:
            p.mails.append(Letter(id=item_id, side="tu", at=now))

    @staticmethod
    def item_id(line: Any, prefix: str) -> str:
        """A stable id for an item the line does not name: from its file line number."""
        return f"{prefix}-L{line.lineno}"

    @classmethod
    def like_id(cls, line: Any) -> str:
        return cls.item_id(line, "like")

    def online_favorites(self, project: str, tu: str) -> list[dict[str, Any]]:
        online = self.online[project]  # is_online's set, looked up once per list (issue 24)
        return [f for f in self.favorites_of(project, tu) if f["ru"] in online]

    def pairs_of(self, project: str, tu: str) -> list[Pair]:
        pairs = self._pairs_by_tu.get((project, tu), {})
        return [pairs[ru] for ru in sorted(pairs)]


def like_body(project: str, like: str) -> str:
    """What a like looks like as a message body on each platform."""
    if project == "golden":
        return "🌹"
    if project == "chathouse":
        return "[like]"
    return ""
