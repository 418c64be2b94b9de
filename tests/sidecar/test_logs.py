"""Logging costs nothing per Stack request at the default level (issue 11, the cheap fixes)."""
from __future__ import annotations

import importlib.util
import logging

import httpx

from sidecar import logs


def _one_request() -> None:
    with httpx.Client(transport=httpx.MockTransport(lambda r: httpx.Response(200))) as c:
        c.get("http://stack.test/v1/health")


def test_httpx_does_not_log_per_request_at_info(tmp_path, caplog):
    try:
        logs.setup(tmp_path, "INFO")
        with caplog.at_level(logging.INFO):
            _one_request()
        assert not [r for r in caplog.records if r.name.startswith(("httpx", "httpcore"))]
        assert logging.getLogger("httpx").getEffectiveLevel() == logging.WARNING
        logs.setup(tmp_path, "DEBUG")
        assert logging.getLogger("httpx").getEffectiveLevel() == logging.DEBUG
    finally:
        logging.getLogger().handlers.clear()
        logging.getLogger().setLevel(logging.WARNING)  # DEBUG left on the root leaks into later tests' caplog
        for name in logs.CHATTY_LIBRARIES:
            logging.getLogger(name).setLevel(logging.NOTSET)


def test_sniffio_is_installed():
    """httpcore imports ``sniffio`` on every request; without it each is a failed import (a
    sys.path walk), about four per request (encode/httpcore discussion #1102)."""
    assert importlib.util.find_spec("sniffio") is not None, "sniffio is missing: add it to the dependencies"
    from httpcore._synchronization import current_async_library  # the call site that imports it

    import asyncio

    assert asyncio.run(_in_loop(current_async_library)) == "asyncio"


async def _in_loop(fn):
    return fn()
