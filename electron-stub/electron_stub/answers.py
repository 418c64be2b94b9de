"""Answers to the sidecar's ``platform.request {project, tu, method, params}``, read from the
world at the current virtual instant.

Rules / theory of operation
---------------------------
* Shapes are the ones the ``platform_clients`` module docstrings declare; dialog rows are
  ``platform_clients.base.RawDialog`` encoded with ``msgspec.to_builtins``, pages are
  ``RawDialogPage`` (``{"dialogs": [...], "next_cursor": int | None}``).
* ``RawDialog.lastMessage`` is ``{"from": "ru"|"tu"|"system", "at": unix s, "type":
  "message"|"system"|"icebreaker"|<like>, "body"}`` as each platform shows a like: Chathouse a
  ``message`` whose body is the like (seed 003 "лайк по тілу"), Prime the like kind
  (``likephoto`` / ``wink`` / ``like_newsfeed_post``); ``spend30dUsd`` is the RU's 30-day spend
  when the world knows it (the VIP label, seed 003); ``lastTuMessageAt`` is the TU's last chat
  message; ``unansweredMailAt`` the RU's last letter when the TU has not written one since;
  ``dialogId`` is null while the dialog has no item.  Golden limits are null.
* Golden: ``online_ru`` (online favorites of the TU), ``chat_history {ru_ids}``, ``get_mail {ru}``.
* Chathouse: ``scroll_all_online`` (online favorites' dialogs), ``scroll_new`` (tab new: last chat
  item from the RU — message or like — unanswered, or an unanswered RU letter, or the last item is
  an icebreaker, or a not-yet-created dialog — ``dialogId`` and ``lastMessage`` null — or a
  standing mutual like, ``mutualLike: true``: README revision 2 ``empty_dialog`` /
  ``mutual_like``), ``inmails_chain {ru}``.
* Prime: ``dialogs {criteria, cursor?}`` — ``["active","online"]`` online favorites;
  ``["unanswered"]`` last chat message from the RU; ``[]`` every dialog with an item, likes
  visible; ``["active"]`` pages of :data:`PAGE` by last activity, newest first, back to 7 days,
  ``cursor`` = page index, ``limit`` = rows per page (default :data:`PAGE`), ``next_cursor``
  null at the end.  Prime likes are visible only in
  ``[]`` (DESIGN §12.5): the other criteria compute ``lastMessage`` without them.
  ``inbox_unanswered``, ``chat_restriction {ru}`` (limits, 0 when none), ``correspondence_get {ru}``
  and ``emails_history {ru}`` (both: the pair's platform letters).
* An unknown method raises ``bridge.errors.RemoteError(-32601, ...)`` (the bridge client turns it
  into a JSON-RPC error); missing or bad params raise ``RemoteError(-32602, ...)``.
"""
from __future__ import annotations

from typing import Any

import msgspec

from electron_stub.encode import dialog_id
from electron_stub.world import Pair, World
from platform_clients.base import RawDialog, RawDialogPage

PAGE = 15  # Prime active scroll page size (DESIGN §12.3)
ACTIVE_BACK_S = 7 * 86400  # Prime active scroll depth


class PlatformRequestError(Exception):
    """Fallback error when ``bridge.errors`` is not importable (unit tests without the bridge)."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code, self.message, self.data = code, message, data


def rpc_error(code: int, message: str) -> Exception:
    """``bridge.errors.RemoteError(code, message)`` if the bridge is there, else the fallback."""
    try:
        from bridge.errors import RemoteError  # type: ignore
    except Exception:  # noqa: BLE001 - the bridge is being written in parallel
        return PlatformRequestError(code, message)
    return RemoteError(code, message)


def dialog_row(world: World, project: str, tu: str, ru: str, include_likes: bool = True) -> RawDialog:
    """One pair as a dialog list row at the world's current state."""
    fav = world.favorite(project, tu, ru) or {}
    pair = world.pairs.get((project, tu, ru))
    last = pair.last_item(include_likes) if pair else None
    shown = last.as_last_message() if last else None
    if shown is not None and last.type == "like":
        shown["type"] = "message" if project == "chathouse" else (last.like or "like")
    return RawDialog(
        userId=ru,
        dialogId=dialog_id(tu, ru) if pair is not None and pair.has_dialog() else None,
        isOnline=world.is_online(project, ru),
        lastMessage=shown,
        lastTuMessageAt=pair.last_tu_message_at() if pair else None,
        chatLimit=None if project == "golden" else fav.get("chat_limit"),
        mailLimit=None if project == "golden" else fav.get("mail_limit"),
        blockedByMe=bool(fav.get("blocked_by_tu")),
        blockedByUser=bool(fav.get("blocked_by_ru")),
        mutualLike=pair.mutual_like_standing() if pair else False,
        unansweredMailAt=pair.unanswered_mail_at() if pair else None,
        spend30dUsd=fav.get("spend_30d_usd"),
    )


def page(rows: list[RawDialog], next_cursor: int | None = None) -> dict:
    return msgspec.to_builtins(RawDialogPage(dialogs=rows, next_cursor=next_cursor))


def _ru(params: dict) -> str:
    ru = params.get("ru") if isinstance(params, dict) else None
    if not isinstance(ru, str) or not ru:
        raise rpc_error(-32602, "params.ru (string) is required")
    return ru


def _letters(pair: Pair | None) -> dict:
    mails = sorted(pair.mails, key=lambda m: m.at) if pair else []
    return {"mails": [{"id": m.id, "from": m.side, "at": m.at} for m in mails]}


def _online_rows(world: World, project: str, tu: str, include_likes: bool) -> list[RawDialog]:
    return [dialog_row(world, project, tu, f["ru"], include_likes) for f in world.online_favorites(project, tu)]


def _pairs(world: World, project: str, tu: str) -> list[Pair]:
    return list(world.pairs_of(project, tu))


# ---- per project ----------------------------------------------------------------------------

def golden(world: World, tu: str, method: str, params: dict, now: float) -> Any:
    if method == "online_ru":
        return {"online": [f["ru"] for f in world.online_favorites("golden", tu)]}
    if method == "chat_history":
        ids = params.get("ru_ids") if isinstance(params, dict) else None
        if not isinstance(ids, list):
            raise rpc_error(-32602, "params.ru_ids (list) is required")
        out = []
        for ru in ids:
            pair = world.pairs.get(("golden", tu, ru))
            items = sorted(pair.items, key=lambda i: i.at) if pair else []
            out.append({"ru": ru, "messages": [{"id": i.id, "from": i.side, "at": i.at, "kind": i.type}
                                               for i in items]})
        return {"dialogs": out}
    if method == "get_mail":
        return _letters(world.pairs.get(("golden", tu, _ru(params))))
    raise rpc_error(-32601, f"golden: unknown platform method {method!r}")


def chathouse(world: World, tu: str, method: str, params: dict, now: float) -> Any:
    if method == "scroll_all_online":
        return page(_online_rows(world, "chathouse", tu, True))
    if method == "scroll_new":
        rows = []
        for p in _pairs(world, "chathouse", tu):
            last = p.last_item(True)
            unanswered_chat = last is not None and last.side == "ru" and last.type in ("message", "like")
            ice = last is not None and last.type == "icebreaker"
            open_limits = p.empty_in_new() or p.mutual_like_standing()
            if unanswered_chat or ice or open_limits or p.unanswered_mail_at() is not None:
                rows.append(dialog_row(world, "chathouse", tu, p.ru, True))
        return page(rows)
    if method == "inmails_chain":
        return _letters(world.pairs.get(("chathouse", tu, _ru(params))))
    raise rpc_error(-32601, f"chathouse: unknown platform method {method!r}")


def prime(world: World, tu: str, method: str, params: dict, now: float) -> Any:
    if method == "dialogs":
        crit = params.get("criteria") if isinstance(params, dict) else None
        if not isinstance(crit, list):
            raise rpc_error(-32602, "params.criteria (list) is required")
        key = sorted(crit)
        if key == ["active", "online"]:
            return page(_online_rows(world, "prime", tu, False))
        if key == ["unanswered"]:
            rows = []
            for p in _pairs(world, "prime", tu):
                last = p.last_item(False)
                if last is not None and last.side == "ru" and last.type == "message":
                    rows.append(dialog_row(world, "prime", tu, p.ru, False))
            return page(rows)
        if key == []:
            return page([dialog_row(world, "prime", tu, p.ru, True) for p in _pairs(world, "prime", tu) if p.items])
        if key == ["active"]:
            return _active_page(world, tu, params.get("cursor"), params.get("limit"), now)
        raise rpc_error(-32602, f"prime dialogs: unsupported criteria {crit!r}")
    if method == "inbox_unanswered":
        mails = []
        for p in _pairs(world, "prime", tu):
            at = p.unanswered_mail_at()
            if at is not None:
                mails.append({"ru": p.ru, "id": p.last_mail("ru").id, "at": at})
        return {"mails": mails}
    if method == "chat_restriction":
        fav = world.favorite("prime", tu, _ru(params)) or {}
        return {"chatLimit": int(fav.get("chat_limit") or 0), "mailLimit": int(fav.get("mail_limit") or 0)}
    if method in ("correspondence_get", "emails_history"):
        return _letters(world.pairs.get(("prime", tu, _ru(params))))
    raise rpc_error(-32601, f"prime: unknown platform method {method!r}")


def _active_page(world: World, tu: str, cursor: Any, size: Any, now: float) -> dict:
    if cursor is None:
        cursor = 0
    if not isinstance(cursor, int) or isinstance(cursor, bool) or cursor < 0:
        raise rpc_error(-32602, "params.cursor must be a page index >= 0 or null")
    if size is None:
        size = PAGE
    if not isinstance(size, int) or isinstance(size, bool) or not 1 <= size <= 100:
        raise rpc_error(-32602, "params.limit must be rows per page, 1..100, or null")
    recent = []
    for p in _pairs(world, "prime", tu):
        at = p.last_activity(include_likes=False)
        if at is not None and at >= now - ACTIVE_BACK_S:
            recent.append((-at, p.ru))
    recent.sort()
    chunk = recent[cursor * size:(cursor + 1) * size]
    nxt = cursor + 1 if (cursor + 1) * size < len(recent) else None
    return page([dialog_row(world, "prime", tu, ru, False) for _, ru in chunk], nxt)


HANDLERS = {"golden": golden, "chathouse": chathouse, "prime": prime}


def answer(world: World, project: str, tu: str, method: str, params: Any, now: float) -> Any:
    """Answer one ``platform.request`` at ``now`` (unix seconds).  Raises the RPC error of
    :func:`rpc_error` for an unknown project/method (-32601) or bad params (-32602)."""
    fn = HANDLERS.get(project)
    if fn is None:
        raise rpc_error(-32601, f"unknown project {project!r}")
    return fn(world, tu, method, params if isinstance(params, dict) else {}, now)
