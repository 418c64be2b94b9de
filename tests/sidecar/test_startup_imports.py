"""What a sidecar imports to start (issue 11: the suite starts hundreds of sidecars, and one
start was ~1.9 G instructions, most of it imports).  Jinja, httpx, standardwebhooks and the
bridge's client side are imported where they are first needed — a template to compile, a Stack
URL, an HTTP target, a dial-out — so a sidecar that has none of them never loads them.  The
frozen build still holds them (tests/packaging/test_frozen.py renders a template through a
webhook target); the router and Stack tests use them from source."""
from __future__ import annotations

from bridge.client import BridgeClient
from tests.integration.sidecar_proc import SidecarProcess, answer_no_dialogs, send_event

LAZY = ("jinja2", "markupsafe", "httpx", "httpcore", "standardwebhooks", "bridge.client",
        "sidecar.router.sandbox", "sidecar.stack.client")

# run in the child before sidecar.cli.main.main(): every import of a LAZY module is one stderr line
WATCH = f"""
import sys
class _Watch:
    def find_spec(self, name, path=None, target=None):
        if any(name == m or name.startswith(m + ".") for m in {LAZY!r}):
            sys.stderr.write("LAZY-IMPORTED " + name + "\\n")
        return None
sys.meta_path.insert(0, _Watch())
"""


async def test_a_sidecar_without_stack_templates_or_http_targets_never_imports_them(tmp_path):
    async with SidecarProcess(tmp_path, clock="virtual", prelude=WATCH) as sc:
        c = await BridgeClient.connect(sc.port, sc.token, on_request=answer_no_dialogs)
        await c.call("clock.advance_to", {"t": 1796025600.0})
        await c.call("session.login", {"tu": "c-tu-1", "project": "chathouse"})
        await c.call("platform.event", send_event(1, 1796025601.0))  # a task, its Stack writes routed
        await c.call("clock.advance_to", {"t": 1796029200.0})
        await c.close()
        assert await sc.stop() == 0
        err = await sc.stderr_text()
    assert "LAZY-IMPORTED" not in err, [ln for ln in err.splitlines() if "LAZY-IMPORTED" in ln]


async def test_the_watch_sees_a_lazy_import(tmp_path, monkeypatch):
    """Not vacuous: an HTTP target makes the same start import httpx and standardwebhooks."""
    monkeypatch.setenv("SIDECAR_ROUTER_TARGETS", '{"hook": {"channel": "webhook", "url": '
                       '"http://127.0.0.1:9/h", "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}}')
    async with SidecarProcess(tmp_path, clock="virtual", prelude=WATCH) as sc:
        assert await sc.stop() == 0
        err = await sc.stderr_text()
    assert "LAZY-IMPORTED httpx" in err and "LAZY-IMPORTED standardwebhooks" in err, err[-2000:]
