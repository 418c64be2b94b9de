"""Small asyncio helpers whose waits a cancellation can never be swallowed by.

Rules / theory of operation
---------------------------
* On Python 3.11 ``asyncio.wait_for(fut, t)`` returns ``fut``'s result when ``fut`` finished in
  the same loop iteration in which the waiting task was cancelled: the cancellation is lost.  A
  loop such as ``while True: await wait_for(event.wait(), t)`` then never ends, and whoever
  cancelled it and awaits it (``close()``) waits forever — the sidecar that never exits.  Fixed in
  3.12; ``asyncio.timeout`` (3.11+) never loses a cancellation, so every wait here uses it and
  ``asyncio.wait_for`` is banned by the linter (pyproject.toml, ruff ``banned-api``).
* :func:`bounded` gives every ``close()`` a deadline: shutdown must end within 2 s in every state
  (DESIGN §3), so no single resource may hold it up.
* **Abandoned is not done.**  A stage that overran its deadline (or failed) is written into the
  caller's ``left`` list, and ``sidecar serve`` ends the process without closing the event loop
  or joining threads when that list is not empty (:func:`sidecar.cli.main.serve`): what was abandoned
  may still be running — a task that swallows its cancellation, aiosqlite's connection thread
  finishing a checkpoint — and must neither call back into a closed loop ("Event loop is
  closed") nor hold the process past its 2 s; the exit log names every entry instead of saying
  "shut down cleanly".
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import TypeVar

__all__ = ["bounded", "cancel_all", "wait_event"]

log = logging.getLogger("sidecar.app.aio")
T = TypeVar("T")


async def wait_event(event: asyncio.Event, timeout_s: float) -> bool:
    """Wait for ``event`` at most ``timeout_s`` seconds (≤ 0: just look); True if it is set.

    A cancellation of the caller always propagates as ``CancelledError``."""
    if event.is_set():
        return True
    try:
        async with asyncio.timeout(max(0.0, timeout_s)):
            await event.wait()
    except TimeoutError:
        return False
    return True


async def bounded(aw: Awaitable[T], timeout_s: float, what: str, left: list[str] | None = None) -> T | None:
    """Await ``aw`` for at most ``timeout_s`` seconds; on timeout log a warning naming ``what``,
    cancel it and return None — without waiting for the cancellation to finish, so even code
    that swallows a cancellation cannot hold the caller.  Other exceptions are logged and
    swallowed too: this is for shutdown steps, where one failing resource must not keep the rest
    open.  Either way ``what`` and why go into ``left`` (the module rules: the caller must not
    wait for it or close the loop under it).  A cancellation of the caller propagates (and
    cancels ``aw``)."""
    task = asyncio.ensure_future(aw)
    try:
        done, _ = await asyncio.wait({task}, timeout=max(0.0, timeout_s))
    except asyncio.CancelledError:
        task.cancel()
        raise
    if not done:
        task.cancel()
        log.warning("%s did not finish within %.2f s; going on without it", what, timeout_s)
        if left is not None:
            left.append(f"{what} (over {timeout_s:.2f} s)")
        return None
    exc = task.exception()
    if exc is not None:
        log.warning("%s failed: %s: %s", what, type(exc).__name__, exc)
        if left is not None:
            left.append(f"{what} (failed: {type(exc).__name__})")
        return None
    return task.result()


async def cancel_all(tasks: set[asyncio.Task] | list[asyncio.Task], timeout_s: float, what: str,
                     left: list[str] | None = None) -> None:
    """Cancel ``tasks`` and wait at most ``timeout_s`` seconds for them to end; log (never wait
    on) the ones that ignore their cancellation, and name them in ``left`` (see :func:`bounded`)."""
    tasks = [t for t in tasks if not t.done()]
    for t in tasks:
        t.cancel()
    if not tasks:
        return
    _, pending = await asyncio.wait(tasks, timeout=max(0.0, timeout_s))
    if pending:
        names = ", ".join(sorted(t.get_name() for t in pending))
        log.warning("%s: %d task(s) still running %.2f s after cancel: %s", what, len(pending),
                    timeout_s, names)
        if left is not None:
            left.append(f"{what} ({names} still running)")
