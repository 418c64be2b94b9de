"""The sans-I/O floor (DESIGN §5; issue 7 item 7, issue 12, issue 19): the runtime room, services,
domain, core, the store ops, the Stack write builders, the sender-health machine (``senders/``
but its ``io/``) and the router's pure modules (``router/`` but its ``io/`` and ``config``) import
no asyncio, aiosqlite, sqlite3, httpx or websockets (GUIDE "flow one way": the drivers — app, cli,
store.db, stack.client, router.io, senders.io — do the I/O), and no module of the ``sidecar``
package imports another that imports it back, type-only imports included.  The rooms of issue 19:
nothing outside ``app/`` and ``cli/`` imports them, and ``protocol/`` stands on ``domain/`` and its
own modules only.  The I/O check runs in a fresh interpreter: pytest itself loads asyncio."""
from __future__ import annotations

import ast
import pkgutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
IO_LIBRARIES = ("asyncio", "aiosqlite", "sqlite3", "httpx", "websockets", "socket")
#: the I/O side of the router and the sender-health machine: the channels, the pump and the
#: sqlite3 readers (``io/``), and the router's config loader (pydantic-settings imports asyncio)
DRIVER_PARTS = ("sidecar.router.io", "sidecar.senders.io", "sidecar.router.config")


def sans_io_modules() -> list[str]:
    import sidecar.domain
    import sidecar.router
    import sidecar.runtime
    import sidecar.senders
    import sidecar.services

    mods = ["sidecar.store.ops", "sidecar.stack.writes",
            "sidecar.core.clock", "sidecar.core.scheduler", "sidecar.core.rng"]
    for pkg in (sidecar.runtime, sidecar.services, sidecar.domain, sidecar.senders, sidecar.router):
        mods += [m.name for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + ".")]
    return sorted(m for m in set(mods) if not is_driver(m))


def is_driver(mod: str) -> bool:
    return any(mod == d or mod.startswith(d + ".") for d in DRIVER_PARTS)


def test_the_runtime_room_is_listed():
    mods = sans_io_modules()
    for name in ("engine", "tu", "factory", "executor", "step", "decisions"):
        assert f"sidecar.runtime.{name}" in mods


def test_the_sender_machine_and_the_pure_router_are_listed():
    mods = sans_io_modules()
    for name in ("health", "groups", "manage", "gate", "store", "simulate"):
        assert f"sidecar.senders.{name}" in mods
    for name in ("model", "render", "route", "attempt", "ops", "core", "cadence", "sandbox"):
        assert f"sidecar.router.{name}" in mods
    assert not [m for m in mods if ".io" in m or m.startswith(("sidecar.app", "sidecar.cli"))]


def test_sans_io_modules_import_no_io_library():
    mods = sans_io_modules()
    code = (f"import importlib, sys\nfor m in {mods!r}: importlib.import_module(m)\n"
            f"print(' '.join(sorted({{n for n in sys.modules if n.split('.')[0] in {IO_LIBRARIES!r}}})))")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [], f"sans-I/O modules pulled in: {r.stdout.strip()}"


def test_the_check_would_see_an_io_import():
    """The subprocess check is not vacuous: the runtime side does load them."""
    code = "import sys, sidecar.app.root; print('asyncio' in sys.modules and 'aiosqlite' in sys.modules)"
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.stdout.strip() == "True", r.stderr


# ---- one-way imports ---------------------------------------------------------------------------

def module_files(package: str = "sidecar") -> dict[str, Path]:
    base = ROOT / package
    out = {}
    for path in base.rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """Every ``sidecar`` module ``name`` imports, anywhere in the file (``if TYPE_CHECKING``
    blocks and function bodies included); ``from a import b`` counts ``a.b`` when that is a
    module.  A package's own ``__init__`` is not an edge of its children (Python loads it)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    pkg = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for a in node.names:
                found.add(f"{base}.{a.name}" if f"{base}.{a.name}" in known else base)
    return {m for m in found if m in known and m != name}


def import_graph() -> dict[str, set[str]]:
    files = module_files()
    known = set(files)
    return {name: imports_of(name, path, known) for name, path in files.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_circle_in_the_sidecar_package():
    assert cycles(import_graph()) == []


def test_the_circle_check_sees_a_type_only_circle():
    """Not vacuous: a circle closed only by an ``if TYPE_CHECKING`` import is found."""
    graph = import_graph()
    assert "sidecar.runtime.engine" in graph["sidecar.runtime.executor"]
    graph["sidecar.runtime.tu"] = graph["sidecar.runtime.tu"] | {"sidecar.runtime.engine"}
    assert any({"sidecar.runtime.engine", "sidecar.runtime.tu"} <= set(c) for c in cycles(graph))


def test_the_runtime_imports_no_service_and_no_driver():
    """Flow one way: services stand on the runtime; the runtime never reaches up into a
    service, the app, the bridge or the wire structs of ``sidecar.protocol.inbound``'s callers."""
    graph = import_graph()
    drivers = {m for m in graph if m.startswith(("sidecar.app", "sidecar.cli", "sidecar.router.io",
                                                 "sidecar.senders.io"))}
    drivers |= {"sidecar.config", "sidecar.logs", "sidecar.store.db", "sidecar.stack.client"}
    for mod, deps in graph.items():
        if mod.startswith("sidecar.runtime"):
            assert not {d for d in deps if d.startswith("sidecar.services")}, mod
            assert not deps & drivers, (mod, deps & drivers)


def test_no_back_pointer_from_a_tu_runtime_to_the_engine():
    src = (ROOT / "sidecar" / "runtime" / "tu.py").read_text(encoding="utf-8")
    assert "engine" not in imports_of("sidecar.runtime.tu", ROOT / "sidecar/runtime/tu.py",
                                      set(module_files()))
    assert "self.engine" not in src


def test_the_core_builds_no_wire_struct():
    """Steps record domain notes (``sidecar.domain.notes``); the app turns them into the wire
    Structs of ``sidecar.protocol.outbound`` (``sidecar.app.wire``) — the core never imports the wire."""
    graph = import_graph()
    for mod, deps in graph.items():
        if mod.startswith(("sidecar.runtime", "sidecar.services", "sidecar.domain")):
            assert not {d for d in deps if d.startswith("sidecar.protocol.inbound")}, mod


# ---- the rooms (issue 19) ----------------------------------------------------------------------

def in_room(mod: str, room: str) -> bool:
    return mod == room or mod.startswith(room + ".")


def test_only_the_app_and_the_cli_import_the_app_and_the_cli():
    """``app/`` (the composition root) and ``cli/`` are the top floor: no other room of the
    package reaches up into them (``sidecar.__main__`` is the ``python -m sidecar`` door)."""
    graph = import_graph()
    top = ("sidecar.app", "sidecar.cli")
    for mod, deps in graph.items():
        if any(in_room(mod, r) for r in top) or mod == "sidecar.__main__":
            continue
        assert not {d for d in deps if any(in_room(d, r) for r in top)}, mod


def test_the_app_and_the_cli_rooms_are_not_empty():
    """Not vacuous: the rooms exist and the root does stand on them."""
    graph = import_graph()
    assert "sidecar.app.clockwork" in graph["sidecar.app.root"]
    assert "sidecar.cli.main" in graph["sidecar.__main__"]


#: what ``protocol/`` may import beyond ``sidecar.domain`` and its own modules, with the reason
PROTOCOL_EXCEPTIONS = {
    # the method table raises the JSON-RPC errors the bridge answers with (-32601, -32602)
    ("sidecar.protocol.methods", "bridge.errors"),
}
PROJECT_PACKAGES = ("sidecar", "bridge", "platform_clients", "electron_stub")


def absolute_imports(name: str, path: Path) -> set[str]:
    """Every module ``name`` imports (relative ones made absolute), as written."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    pkg = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            found.add(base)
    return found


def test_the_protocol_stands_on_the_domain_only():
    files = {m: p for m, p in module_files().items() if in_room(m, "sidecar.protocol")}
    assert {"sidecar.protocol.inbound", "sidecar.protocol.methods", "sidecar.protocol.paging"} <= set(files)
    bad = set()
    for mod, path in files.items():
        for dep in absolute_imports(mod, path):
            if dep.split(".")[0] not in PROJECT_PACKAGES or (mod, dep) in PROTOCOL_EXCEPTIONS:
                continue
            if not (in_room(dep, "sidecar.protocol") or in_room(dep, "sidecar.domain")):
                bad.add((mod, dep))
    assert bad == set()
