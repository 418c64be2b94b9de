"""``./run`` checks before it installs (issue 7 item 5): an unknown task and a too-old Python are
one line and exit 2, and neither leaves a ``.venv`` behind.  Run on a copy of the script in an
empty folder, so the checkout's own .venv is never touched."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _copy(tmp_path: Path) -> Path:
    shutil.copy(ROOT / "run", tmp_path / "run")
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    return tmp_path / "run"


def test_unknown_task_is_refused_before_installing(tmp_path):
    r = subprocess.run([sys.executable, str(_copy(tmp_path)), "deploy"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "unknown task 'deploy'" in r.stderr
    assert not (tmp_path / ".venv").exists()


def _old_python() -> str | None:
    found = [shutil.which(n) for n in ("python3.10", "python3.9")]
    found += [str(p) for p in sorted(Path.home().glob(".pyenv/versions/3.*/bin/python3.1[0]"))]
    found += [str(p) for p in sorted(Path.home().glob(".pyenv/versions/3.*/bin/python3.9"))]
    for exe in filter(None, found):
        if subprocess.run([exe, "-c", "pass"], capture_output=True).returncode == 0:
            return exe
    return None


def test_python_older_than_3_11_is_refused_before_making_a_venv(tmp_path):
    exe = _old_python()
    if exe is None:
        pytest.skip("no Python 3.10/3.9 on this machine to try ./run with")
    r = subprocess.run([exe, str(_copy(tmp_path)), "test"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "needs Python 3.11" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / ".venv").exists()


def _parallel_args():
    import runpy
    return runpy.run_path(str(ROOT / "run"), run_name="run_script")["parallel_args"]


@pytest.mark.parametrize("args, workers", [
    ([], "4"), (["-q", "-rsx", "-m", "not slow"], "4"), (["-p", "no:cacheprovider", "tests/x.py"], "4"),
])
def test_run_test_is_parallel_by_default(monkeypatch, args, workers):
    monkeypatch.delenv("TEST_WORKERS", raising=False)
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    assert _parallel_args()(args) == ["-n", workers, "--dist", "loadgroup"]


@pytest.mark.parametrize("args", [["-n", "2"], ["-n2"], ["-nauto"], ["--numprocesses=3"], ["-p", "no:xdist"],
                                  ["--pdb"], ["--trace"], ["--dist", "load"]])
def test_run_test_leaves_parallelism_to_arguments_that_choose_it(monkeypatch, args):
    monkeypatch.delenv("TEST_WORKERS", raising=False)
    assert _parallel_args()(args) == []


@pytest.mark.parametrize("env, expected", [("1", []), ("0", []), ("3", ["-n", "3", "--dist", "loadgroup"]),
                                           ("many", [])])
def test_test_workers_sets_the_number_of_processes(monkeypatch, env, expected):
    monkeypatch.setenv("TEST_WORKERS", env)
    assert _parallel_args()(["-q"]) == expected


def test_run_compiles_the_checkouts_modules_even_where_bytecode_is_never_written(tmp_path, monkeypatch):
    """Where PYTHONDONTWRITEBYTECODE is set (this machine's image sets it) no process writes the
    bytecode of the checkout's modules (an editable install: pip compiles only what it copies),
    so every sidecar the suite started compiled its ~90 modules again (issue 11).  ``./run``
    compiles them once per change; the next interpreter loads them without compiling."""
    import importlib.util
    import runpy

    pkg = tmp_path / "sidecar"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "mod.py").write_text("VALUE = 42\n")
    compile_sources = runpy.run_path(str(ROOT / "run"), run_name="run_script")["compile_sources"]
    monkeypatch.setitem(compile_sources.__globals__, "ROOT", tmp_path)
    monkeypatch.setitem(compile_sources.__globals__, "PY", Path(sys.executable))
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    compile_sources()
    assert Path(importlib.util.cache_from_source(str(pkg / "mod.py"))).is_file()
    # a fresh interpreter with the variable set imports it from bytecode: no source compiled
    probe = ("import importlib._bootstrap_external as b, sys\n"
             "seen = []\n"
             "orig = b.SourceLoader.source_to_code\n"
             "b.SourceLoader.source_to_code = lambda self, data, path, *a, **k: seen.append(path) or orig(self, data, path, *a, **k)\n"
             "import sidecar.mod\n"
             "print(sidecar.mod.VALUE, seen)")
    r = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=30)
    assert r.stdout.strip() == "42 []", r.stdout + r.stderr


def test_echoed_command_is_quoted_so_it_can_be_pasted(capsys, monkeypatch):
    """``./run test -m "not slow"`` echoed ``… -m not slow``, which a shell splits into three
    words; the echo quotes each argument the way a shell reads it back."""
    import runpy
    import shlex
    calls: list[list[str]] = []
    sh = runpy.run_path(str(ROOT / "run"), run_name="run_script")["sh"]
    monkeypatch.setattr("subprocess.call", lambda cmd, **kw: calls.append(cmd) or 0)
    sh("python", "-m", "pytest", "-m", "not slow", Path("a b/c.py"))
    line = capsys.readouterr().out.strip()
    assert line == "+ python -m pytest -m 'not slow' 'a b/c.py'"
    assert shlex.split(line[2:]) == calls[0]
