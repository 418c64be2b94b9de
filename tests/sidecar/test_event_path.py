"""One platform event to ``task.created`` is a straight line (issue 12): at the instant the Task
Factory records the note, the call stack enters no file twice — no service reaches back through
the engine, no hook re-enters the runtime that called it.  The path is the production
executor's (``tests/sidecar/driver.py`` is only its ports)."""
from __future__ import annotations

import traceback

import pytest

from sidecar.runtime import step as step_mod
from tests.sidecar.world import World, fav

ROOT_MARK = "/sidecar/"


def _stack_files() -> list[str]:
    files: list[str] = []
    for frame in traceback.extract_stack()[:-2]:  # drop this helper and the patched notify
        f = frame.filename.replace("\\", "/")
        if "site-packages" in f or f.startswith("<"):
            continue
        if not files or files[-1] != f:
            files.append(f)
    return files


@pytest.mark.parametrize("project", ["golden", "chathouse", "prime"])
def test_platform_event_to_task_created_never_reenters_a_file(monkeypatch, project):
    seen: list[list[str]] = []
    original = step_mod.Step.notify

    def notify(self, method, params):
        if method == "task.created" and not seen:
            seen.append(_stack_files())
        return original(self, method, params)

    monkeypatch.setattr(step_mod.Step, "notify", notify)
    w = World(project)
    w.login([fav("ru-1", project)])
    w.at(10).ru_writes("ru-1")
    assert seen, "no task.created"
    path = [f for f in seen[0] if ROOT_MARK in f and "/tests/" not in f]
    hops = [f.rsplit("/sidecar/", 1)[1] for f in path]
    assert hops == ["runtime/executor.py", "runtime/engine.py", "runtime/dispatch.py",
                    "runtime/hooks.py", "services/inbound.py", "runtime/tu.py", "runtime/decisions.py",
                    "runtime/factory.py"], hops
    assert len(set(seen[0])) == len(seen[0]), seen[0]  # tests' own frames included
