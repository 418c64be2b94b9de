"""Sending a pump round's claimed rows through their channels (DESIGN §10; the rules are the
pump's, :mod:`.pump`): a target's batch one row after another (:func:`send_run`), single rows of
several targets together (:func:`send_other`), Stack's writes in ``POST /v1/batch`` requests or
single calls (:func:`send_stack`), the warm-up probes sender health asks for (:func:`send_probes`),
and which due rows a round takes (:func:`one_per_target`,
:func:`per_target`).  A channel that raises (a bug) fails the attempt retryably
(:func:`channel_error`), logged; nothing here touches the store or sender health."""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping

from sidecar.router.attempt import Begin, Outcome, held, retryable, terminal
from sidecar.router.io.channels import Channel
from sidecar.router.io.stack_channel import StackChannel
from sidecar.router.model import Delivery

log = logging.getLogger("sidecar.router.io.pump")
MAX_BATCH = 500  # Stack writes per POST /v1/batch


async def send_run(channels: Mapping[str, Channel], items: list[tuple[Delivery, Begin]],
                   now: float) -> list[tuple[Delivery, Begin, Outcome]]:
    """A target's claimed rows sent one after another (a sender sends one delivery at a
    time, seed 000); after the first that is not delivered the rest are ``held`` — not
    attempts: their claim is undone (the pump's settle) and the next pass asks sender health
    again, knowing the failure — so a failing receiver gets one attempt per pass, as before."""
    out: list[tuple[Delivery, Begin, Outcome]] = []
    failed = False
    for row, b in items:
        if failed:
            out.append((row, b, held("an earlier delivery of the target failed in this pass")))
            continue
        ch = channels.get(row.target)
        if ch is None:
            o = terminal(f"bad target {row.target!r}: not configured")
        else:
            try:
                o = await ch.send(row, now)
            except Exception as exc:  # noqa: BLE001 - a channel bug must not lose the row
                log.exception("channel %s raised for delivery %s", row.target, row.id)
                o = channel_error(exc)
        out.append((row, b, o))
        failed = not o.ok
    return out


async def send_other(channels: Mapping[str, Channel], items: list[tuple[Delivery, Begin]],
                     now: float, concurrency: int) -> list[tuple[Delivery, Begin, Outcome]]:
    sem = asyncio.Semaphore(concurrency)

    async def one(row: Delivery, b: Begin) -> tuple[Delivery, Begin, Outcome]:
        ch = channels.get(row.target)
        if ch is None:
            return row, b, terminal(f"bad target {row.target!r}: not configured")
        async with sem:
            try:
                return row, b, await ch.send(row, now)
            except Exception as exc:  # noqa: BLE001 - a channel bug must not lose the row
                log.exception("channel %s raised for delivery %s", row.target, row.id)
                return row, b, channel_error(exc)

    return list(await asyncio.gather(*(one(r, b) for r, b in items)))


async def send_stack(stack: StackChannel | None, items: list[tuple[Delivery, Begin]],
                     now: float, concurrency: int) -> tuple[list[list[tuple[Delivery, Begin, Outcome]]], int]:
    """Send the round's Stack rows: ``(attempts, HTTP requests)`` where each attempt is the
    outcomes of the rows that travelled in one ``POST /v1/batch`` — or, without batching,
    of all the round's single writes, sent together before any answered (sender health
    counts each attempt once)."""
    if not items:
        return [], 0
    if stack is None:
        return [[(r, b, terminal("bad target 'stack': no Stack configured")) for r, b in items]], 0
    if stack.batch:
        out: list[list[tuple[Delivery, Begin, Outcome]]] = []
        requests = 0
        for i in range(0, len(items), MAX_BATCH):
            chunk = items[i:i + MAX_BATCH]
            try:
                results = await stack.send_batch([r for r, _ in chunk], now)
            except Exception as exc:  # noqa: BLE001 - a client bug must not lose the rows
                log.exception("stack channel raised for a batch of %d writes", len(chunk))
                results = [channel_error(exc)] * len(chunk)
            requests += 1
            out.append([(r, b, o) for (r, b), o in zip(chunk, results)])
        return out, requests
    sem = asyncio.Semaphore(concurrency)

    async def one(row: Delivery, b: Begin) -> tuple[Delivery, Begin, Outcome]:
        async with sem:
            try:
                return row, b, await stack.send(row, now)
            except Exception as exc:  # noqa: BLE001 - a client bug must not lose the row
                log.exception("stack channel raised for delivery %s", row.id)
                return row, b, channel_error(exc)

    return [list(await asyncio.gather(*(one(r, b) for r, b in items)))], len(items)


async def send_probes(channels: Mapping[str, Channel], stack: StackChannel | None, names: list[str],
                      now: float) -> list[tuple[str, str, Outcome]]:
    """One probe per sender in ``names`` on its channel (``stack``: Stack's ``GET /v1/health``),
    together: ``(sender, channel kind, answer)`` each, in ``names``' order (seed 000 §3).  A
    sender with no channel answers terminally ("bad target"); a channel that raises, an
    unconfirmed probe (logged)."""
    async def one(name: str) -> tuple[str, str, Outcome]:
        ch: Channel | None = stack if name == "stack" else channels.get(name)
        if ch is None:
            return name, "", terminal(f"bad target {name!r}: not configured")
        try:
            return name, ch.kind, await ch.probe(now)
        except Exception as exc:  # noqa: BLE001 - a channel bug is an unconfirmed probe
            log.exception("probe of %s raised", name)
            return name, ch.kind, retryable(f"probe error: {type(exc).__name__}")

    return list(await asyncio.gather(*(one(n) for n in names)))


def channel_error(exc: Exception) -> Outcome:
    """A channel or client that raised: retryable (the row is kept), never an HTTP status — but
    not "no answer" either (``status`` 0), so a bug does not look like a Stack outage.  Only the
    exception's type reaches the row: its text may hold a URL with a secret (the traceback is
    in the log)."""
    return retryable(f"channel error: {type(exc).__name__}", 0)


def one_per_target(rows) -> list[Delivery]:
    """The oldest due row of each target: a sender sends one delivery at a time, so sender health
    answers "may it send?" knowing the outcome of the one before (seed 000)."""
    seen: set[str] = set()
    out = []
    for r in rows:
        if r.target not in seen:
            seen.add(r.target)
            out.append(r)
    return out


def per_target(rows, per_target: int, targets: int) -> list[Delivery]:
    """At most ``per_target`` rows of each of the first ``targets`` targets, in order."""
    count: dict[str, int] = {}
    out = []
    for r in rows:
        n = count.get(r.target, 0)
        if n >= per_target or (n == 0 and len(count) >= targets):
            continue
        count[r.target] = n + 1
        out.append(r)
    return out
