"""Service hooks are broadcast from one place (issue 12): :class:`sidecar.runtime.hooks.Services`
is the only code that loops over a TU's services or calls a broadcast hook inside a loop; the
engine, the TU runtime, dispatch and the passes call its one method per hook."""
from __future__ import annotations

import ast
from pathlib import Path

from sidecar.domain import events as ev
from sidecar.runtime.hooks import Services
from sidecar.runtime.step import Step

ROOT = Path(__file__).resolve().parents[2]
BROADCASTER = "sidecar/runtime/hooks.py"
BROADCAST_HOOKS = {"on_login", "on_logout", "on_reconnect", "on_event", "on_online",
                   "on_task_created", "on_task_closed", "on_favorite_changed"}


def _loops(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, (ast.For, ast.AsyncFor)):
            yield node, [node.iter], node.body
        elif isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            yield node, [g.iter for g in node.generators], [node]


def _names(node: ast.AST) -> set[str]:
    out = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Name):
            out.add(n.id)
        elif isinstance(n, ast.Attribute):
            out.add(n.attr)
    return out


def broadcasts(source: str) -> list[int]:
    """Line numbers of loops over services, or of broadcast hooks called inside a loop."""
    hits = []
    for node, iters, body in _loops(ast.parse(source)):
        over_services = any({"services", "by_name"} & _names(it) for it in iters)
        calls_hook = any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                         and n.func.attr in BROADCAST_HOOKS
                         for b in body for n in ast.walk(b))
        if over_services or calls_hook:
            hits.append(node.lineno)
    return hits


def test_only_the_broadcaster_loops_over_services():
    found = {}
    for path in sorted((ROOT / "sidecar").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel == BROADCASTER:
            continue
        lines = broadcasts(path.read_text(encoding="utf-8"))
        if lines:
            found[rel] = lines
    assert found == {}, f"services are broadcast outside {BROADCASTER}: {found}"


def test_the_check_sees_a_loop_over_services():
    assert broadcasts("for svc in rt.services:\n    svc.on_event(step, e)\n") == [1]
    assert broadcasts("[s.on_login(step) for s in xs]\n") == [1]
    assert broadcasts("for s in self.by_name.values():\n    pass\n") == [1]
    assert broadcasts("for x in items:\n    x.handle()\n") == []
    assert broadcasts((ROOT / BROADCASTER).read_text(encoding="utf-8"))  # it does loop


class _Recorder:
    def __init__(self, name: str, log: list) -> None:
        self.name, self.log = name, log

    def __getattr__(self, hook: str):
        return lambda *args, **kw: self.log.append((self.name, hook))


def test_every_hook_reaches_every_service_in_dispatch_order():
    log: list = []
    services = Services([_Recorder("a", log), _Recorder("b", log)])  # type: ignore[list-item]
    step = Step(now=0.0)
    services.login(step)
    services.event(step, ev.ChatIn(tu="t", ru="r", at=0.0, msg_id="m"))
    services.online(step, set(), set(), {}, True)
    services.logout(step)
    assert log == [("a", "on_login"), ("b", "on_login"), ("a", "on_event"), ("b", "on_event"),
                   ("a", "on_online"), ("b", "on_online"), ("a", "on_logout"), ("b", "on_logout")]
    assert services.named("b") is not None and services.named("c") is None


def test_a_hook_left_as_the_base_no_op_is_skipped_and_the_order_kept():
    """issue 11 item 5: the broadcaster calls a hook only on the services whose class implements
    it (the base class's no-ops are marked); the others still hear it in dispatch order, and a
    service that implements a hook hears it even when it is replaced on the instance."""
    from sidecar.services.base import Service

    log: list = []

    class Talks(Service):
        def on_event(self, step, event):
            log.append((self.name, "on_event"))

    class Quiet(Service):
        pass

    a, q, b = Talks(None), Quiet(None), Talks(None)  # type: ignore[arg-type]
    a.name, q.name, b.name = "a", "q", "b"
    q.on_event = lambda *args: log.append(("q", "on_event"))  # type: ignore[method-assign]
    b.on_event = lambda *args: log.append(("b", "patched"))  # type: ignore[method-assign]
    services = Services([a, q, b])
    services.event(Step(now=0.0), ev.ChatIn(tu="t", ru="r", at=0.0, msg_id="m"))
    assert log == [("a", "on_event"), ("b", "patched")]  # q's class leaves on_event a no-op
    for hook in BROADCAST_HOOKS:  # every broadcast hook's default is marked, an override is not
        assert getattr(getattr(Service, hook), "noop_hook", False), hook
    assert not hasattr(Talks.on_event, "noop_hook")
