"""Timeline line → the frames Electron would send the sidecar (``platform.event`` /
``favorite.update``), in exactly the raw shapes of ``platform_clients``.

Rules / theory of operation
---------------------------
* The raw socket event shapes are the msgspec Structs declared in ``platform_clients.golden``,
  ``.chathouse`` and ``.prime``: this module builds those Structs and encodes them with
  ``msgspec.to_builtins``; it never re-declares a shape.  A contract test round-trips every frame
  through ``<Project>Client.decode_event``.
* A ``platform.event`` frame is ``{"project", "tu", "name", "data", "received_at"}``; all
  instants are unix seconds; ``received_at`` is the virtual instant the harness delivers it.
* Per project (``ru`` → TU direction unless stated):

  ========================  ==================================  ===================================  ==============================
  line                      golden                              chathouse                            prime
  ========================  ==================================  ===================================  ==============================
  message from ru           receivePrivateMessage               Send type message                    MessageSent type message
  message from tu / answer  privateMessageSent (echo)           Send type message from the TU        MessageSent from the TU
  like                      receivePrivateMessage text 🌹        Send type message body ``[like]``    MessageSent type = like kind
  mail from ru              statistics EmailSend                Send type inmail_message             email
  mail from tu              mailSent                            Send type inmail_message from TU     email from the TU
  mail_read                 statistics EmailRead                statistic inmail_read                (none: Prime has no read stats)
  email                     incomingEmail                       incomingEmail                        incomingEmail
  notification              —                                   new_notification                     —
  system                    —                                   —                                    MessageSent type system
  dialog_created            —                                   —                                    dialog_created
  icebreaker                (none)                              Send type icebreaker                 (none)
  chat_request              chatRequest                         chat_request                         chatRequest
  block/unblock by ru       userBlocked                         block                                blockStatus
  ========================  ==================================  ===================================  ==============================

* A block/unblock by the TU, a ``favorite`` line and a ``limits`` line are ``favorite.update``
  frames (``sidecar.protocol.inbound.FavoriteUpdate`` keys).  ``online`` lines have no frame: the sidecar
  learns online state from its polls.  Lines that are not world events give no frame.
"""
from __future__ import annotations

from typing import Any

import msgspec

from electron_stub import scenario as sc
from electron_stub.world import World, like_body
from platform_clients import chathouse as ch
from platform_clients import golden as gd
from platform_clients import prime as pr

Frame = tuple[str, dict[str, Any]]  # (bridge method, params)


def platform_event(project: str, tu: str, name: str, data: msgspec.Struct, now: float) -> Frame:
    return ("platform.event", {"project": project, "tu": tu, "name": name,
                               "data": msgspec.to_builtins(data), "received_at": now})


def favorite_update(project: str, tu: str, ru: str, **changes: Any) -> Frame:
    return ("favorite.update", {"tu": tu, "ru": ru, "project": project, **changes})


# ---- chat and mail either way --------------------------------------------------------------

def chat_message(project: str, tu: str, ru: str, side: str, msg_id: str, body: str, now: float) -> Frame:
    """A chat message from ``side`` (``ru`` or ``tu``; ``tu`` = the own-send echo)."""
    sender, recipient = (ru, tu) if side == "ru" else (tu, ru)
    if project == "golden":
        name = "receivePrivateMessage" if side == "ru" else "privateMessageSent"
        return platform_event(project, tu, name, gd.PrivateMessage(
            messageId=msg_id, senderId=sender, recipientId=recipient, sentAt=now, text=body), now)
    if project == "chathouse":
        return platform_event(project, tu, "Send", ch.Send(
            id=msg_id, type="message", from_=sender, to=recipient, at=now, body=body), now)
    return platform_event(project, tu, "MessageSent", pr.MessageSent(
        id=msg_id, type="message", senderId=sender, recipientId=recipient, at=now, text=body), now)


def mail_letter(project: str, tu: str, ru: str, side: str, mail_id: str, now: float) -> Frame:
    """A platform letter from ``side``."""
    if project == "golden":
        if side == "ru":
            return platform_event(project, tu, "statistics", gd.Statistic(
                type="EmailSend", userId=ru, at=now, eventKey=mail_id, mailId=mail_id), now)
        return platform_event(project, tu, "mailSent", gd.MailSent(mailId=mail_id, recipientId=ru, sentAt=now), now)
    sender, recipient = (ru, tu) if side == "ru" else (tu, ru)
    if project == "chathouse":
        return platform_event(project, tu, "Send", ch.Send(
            id=mail_id, type="inmail_message", from_=sender, to=recipient, at=now, body=""), now)
    return platform_event(project, tu, "email", pr.Email(id=mail_id, senderId=sender, recipientId=recipient, at=now), now)


def own_send(project: str, tu: str, ru: str, channel: str, item_id: str, now: float, body: str = "") -> Frame:
    """The platform's echo of the TU's own send on ``channel`` (``chat`` | ``mail``)."""
    if channel == "chat":
        return chat_message(project, tu, ru, "tu", item_id, body, now)
    return mail_letter(project, tu, ru, "tu", item_id, now)


def like(project: str, tu: str, ru: str, kind: str, like_id: str, now: float) -> Frame:
    if project == "golden":
        return platform_event(project, tu, "receivePrivateMessage", gd.PrivateMessage(
            messageId=like_id, senderId=ru, recipientId=tu, sentAt=now, text=like_body(project, kind)), now)
    if project == "chathouse":
        return platform_event(project, tu, "Send", ch.Send(
            id=like_id, type="message", from_=ru, to=tu, at=now, body=like_body(project, kind)), now)
    return platform_event(project, tu, "MessageSent", pr.MessageSent(
        id=like_id, type=kind, senderId=ru, recipientId=tu, at=now, text=""), now)


def block(project: str, tu: str, ru: str, by: str, blocked: bool, now: float) -> Frame:
    """A block change: by the TU → ``favorite.update``; by the RU → the platform's block event."""
    if by == "tu":
        return favorite_update(project, tu, ru, blocked_by_tu=blocked)
    if project == "golden":
        return platform_event(project, tu, "userBlocked", gd.UserBlocked(
            blockerId=ru, blockedId=tu, blocked=blocked, at=now), now)
    if project == "chathouse":
        return platform_event(project, tu, "block", ch.Block(from_=ru, to=tu, blocked=blocked, at=now), now)
    return platform_event(project, tu, "blockStatus", pr.BlockStatus(
        senderId=ru, recipientId=tu, blocked=blocked, at=now), now)


def chat_request(project: str, tu: str, ru: str, now: float) -> Frame:
    if project == "chathouse":
        return platform_event(project, tu, "chat_request", ch.ChatRequest(from_=ru, at=now), now)
    return platform_event(project, tu, "chatRequest", gd.ChatRequest(senderId=ru, at=now), now)


# ---- one timeline line --------------------------------------------------------------------

def frames_for(line: Any, now: float, world: World | None = None) -> list[Frame]:
    """The frames one timeline line makes at ``now`` (unix seconds).  ``world`` (optional) is
    only read for the ``start`` of an e-mail's ``received_at``."""
    k = type(line)
    if k is sc.Message:
        return [chat_message(line.project, line.tu, line.ru, line.from_, line.id, line.body, now)]
    if k is sc.Like:
        return [like(line.project, line.tu, line.ru, line.like, World.like_id(line), now)]
    if k is sc.Mail:
        return [mail_letter(line.project, line.tu, line.ru, line.from_, line.id, now)]
    if k is sc.MailReadLine:
        if line.project == "golden":
            return [platform_event(line.project, line.tu, "statistics", gd.Statistic(
                type="EmailRead", userId=line.ru, at=now, eventKey=line.event_key, mailId=line.mail_id), now)]
        if line.project == "chathouse":
            return [platform_event(line.project, line.tu, "statistic", ch.Statistic(
                type="inmail_read", from_=line.ru, to=line.tu, at=now, eventKey=line.event_key,
                mailId=line.mail_id), now)]
        return []  # Prime has no read statistics (DESIGN §12.1)
    if k is sc.EmailLine:
        start = world.start if world is not None else None
        rec = now if line.received_at is None or start is None else start + line.received_at
        return [platform_event(line.project, line.tu, "incomingEmail", gd.IncomingEmail(
            emailId=line.id, fromId=line.ru, receivedAt=rec, at=now), now)]
    if k is sc.NotificationLine:
        return [platform_event(line.project, line.tu, "new_notification", ch.NewNotification(
            type=line.type, userId=line.ru, at=now), now)]
    if k is sc.SystemLine:
        return [platform_event(line.project, line.tu, "MessageSent", pr.MessageSent(
            id=World.item_id(line, "sys"), type="system", senderId=line.ru, recipientId=line.tu, at=now,
            text=line.text), now)]
    if k is sc.DialogCreatedLine:
        return [platform_event(line.project, line.tu, "dialog_created", pr.DialogCreated(
            dialogId=dialog_id(line.tu, line.ru), ruId=line.ru, at=now), now)]
    if k is sc.Icebreaker:
        if line.project != "chathouse":
            return []  # only Chathouse has an icebreaker event
        return [platform_event(line.project, line.tu, "Send", ch.Send(
            id=World.item_id(line, "ice"), type="icebreaker", from_=line.ru, to=line.tu, at=now, body=""), now)]
    if k is sc.ChatRequestLine:
        return [chat_request(line.project, line.tu, line.ru, now)]
    if k in (sc.Block, sc.Unblock):
        return [block(line.project, line.tu, line.ru, line.by, k is sc.Block, now)]
    if k is sc.Favorite:
        ch_ = line.changes()
        return [favorite_update(line.project, line.tu, line.ru, **ch_)] if ch_ else []
    if k is sc.Limits:
        ch_ = {}
        if line.project != "golden":
            if line.chat is not None:
                ch_["chat_limit"] = line.chat
            if line.mail is not None:
                ch_["mail_limit"] = line.mail
        return [favorite_update(line.project, line.tu, line.ru, **ch_)] if ch_ else []
    return []


def dialog_id(tu: str, ru: str) -> str:
    """The platform's dialog id of a pair (stable)."""
    return f"d-{tu}-{ru}"
