"""CLI: a bad scenario is one clear line and exit 2; generate writes a valid file."""
from __future__ import annotations

import json

from electron_stub import cli
from electron_stub import scenario as sc


def test_bad_scenario_exit_2_names_the_line(tmp_path, capsys):
    p = tmp_path / "bad.jsonl"
    p.write_text('{"kind":"header","format":1,"start":"2026-11-30T08:00:00Z","seed":1,"duration_s":5}\n'
                 '{"t":1,"kind":"warp"}\n')
    assert cli.main(["replay", str(p)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{p}:2:" in err[0] and "unknown kind" in err[0]


def test_generate_to_file(tmp_path):
    out = tmp_path / "s.jsonl"
    assert cli.main(["generate", "--preset", "smoke", "--seed", "4", "--hours", "0.2", "--favorites", "5",
                     "-o", str(out)]) == 0
    s = sc.load(out)
    assert s.header.seed == 4 and s.header.duration_s == 720


def test_used_data_dir_is_refused(tmp_path, capsys):
    from stubhelp import HEADER

    p = tmp_path / "s.jsonl"
    p.write_text(HEADER + "\n")
    (tmp_path / "data" / "m1").mkdir(parents=True)
    (tmp_path / "data" / "m1" / "state.sqlite").write_text("x")
    assert cli.main(["replay", str(p), "--data-dir", str(tmp_path / "data")]) == 2
    assert "already holds machine data" in capsys.readouterr().err


# ---- fails early and clearly (issue 7 item 3) --------------------------------------------------

import os  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def _one_line(capsys, *words):
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert "Traceback" not in err[0]
    for w in words:
        assert w in err[0], (w, err[0])


def _scenario(tmp_path):
    from stubhelp import HEADER
    p = tmp_path / "s.jsonl"
    p.write_text(HEADER + "\n")
    return p


@pytest.mark.parametrize("flag, value, words", [
    ("--trace", "no-such-dir/t.jsonl", ["--trace", "does not exist"]),
    ("--trace", ".", ["--trace", "is a folder"]),
    ("--json", "no-such-dir/r.json", ["--json", "does not exist"]),
    ("--binary", "no-such-binary", ["--binary", "no such file"]),
])
def test_replay_checks_its_paths_before_starting(tmp_path, capsys, monkeypatch, flag, value, words):
    monkeypatch.chdir(tmp_path)
    started = []
    monkeypatch.setattr("electron_stub.replay.Replay.run", lambda self: started.append(1))
    assert cli.main(["replay", str(_scenario(tmp_path)), flag, value]) == 2
    _one_line(capsys, *words)
    assert not started


def test_binary_that_is_not_executable_is_refused(tmp_path, capsys):
    b = tmp_path / "sidecar"
    b.write_text("not a program")
    b.chmod(0o644)
    assert cli.main(["replay", str(_scenario(tmp_path)), "--binary", str(b)]) == 2
    _one_line(capsys, "not executable")


def test_keep_on_a_folder_with_other_files_says_what_to_do(tmp_path, capsys):
    keep = tmp_path / "keep"
    keep.mkdir()
    (keep / "thesis.docx").write_text("precious")
    assert cli.main(["demo", "--keep", str(keep)]) == 2
    _one_line(capsys, "--keep", "thesis.docx", "new or empty folder")
    assert (keep / "thesis.docx").read_text() == "precious"


def test_keep_on_an_earlier_demo_folder_is_reused(tmp_path, capsys, monkeypatch):
    keep = tmp_path / "keep"
    (keep / "data" / "m1").mkdir(parents=True)
    (keep / "data" / "m1" / "sidecar.db").write_text("old")
    (keep / "demo.jsonl").write_text("old")
    seen = {}

    def fake_replay(path, trace, binary, data_dir, quiet, json_out=None, temporary=False):
        seen["data_empty"] = not any(Path(data_dir).glob("m*/*"))
        seen["temporary"] = temporary
        return 0
    monkeypatch.setattr(cli, "_replay", fake_replay)
    assert cli.main(["demo", "--keep", str(keep)]) == 0
    assert seen == {"data_empty": True, "temporary": False}
    assert "reusing" in capsys.readouterr().err
    assert (keep / "demo.jsonl").read_text() != "old"


@pytest.mark.parametrize("kind", ["missing", "scenario", "garbage"])
def test_diff_of_a_missing_or_wrong_file_is_one_line_exit_2(tmp_path, capsys, kind):
    good = tmp_path / "good.trace.jsonl"
    good.write_text('{"at":1.0,"event":"login","tu":"g"}\n')
    other = tmp_path / "other"
    if kind == "scenario":
        other.write_text(_scenario(tmp_path).read_text())
    elif kind == "garbage":
        other.write_bytes(b"\xff\xfe not text")
    assert cli.main(["diff", str(good), str(other)]) == 2
    _one_line(capsys, str(other))


def test_broken_pipe_into_head_is_quiet():
    r = subprocess.run(f"'{sys.executable}' -m electron_stub generate --preset shift | head -c 10",
                       shell=True, cwd=ROOT, capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{ROOT / 'electron-stub'}"))
    assert len(r.stdout) == 10
    assert "Traceback" not in r.stderr and "BrokenPipe" not in r.stderr, r.stderr


def test_ctrl_c_during_a_replay_is_one_line_exit_130_and_stops_the_sidecars(tmp_path):
    scen = tmp_path / "shift.jsonl"
    assert cli.main(["generate", "--preset", "smoke", "--hours", "4", "-o", str(scen)]) == 0
    p = subprocess.Popen([sys.executable, "-m", "electron_stub", "replay", str(scen), "--data-dir",
                          str(tmp_path / "data")], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{ROOT / 'electron-stub'}"))
    deadline = time.monotonic() + 60
    while not list((tmp_path / "data").glob("m1/sidecar.db")) and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(0.5)
    p.send_signal(signal.SIGINT)
    try:
        out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:  # never leave the replay and its sidecars running past the test
            p.kill()
            p.communicate()
    assert p.returncode == 130, err
    assert err.strip().splitlines()[-1] == "sidecar-stub: interrupted" and "Traceback" not in err
    left = subprocess.run(["pgrep", "-f", str(tmp_path / "data")], capture_output=True, text=True).stdout.split()
    assert left == []


def _closed_pipe() -> int:
    """The write end of a pipe whose reader is already gone (``… | true``)."""
    r, w = os.pipe()
    os.close(r)
    return w


def test_replay_into_a_closed_pipe_writes_its_files_first_and_exits_141_quietly(tmp_path):
    """rich's Console.on_broken_pipe raised SystemExit(1) past the stub's BrokenPipeError
    handler, and the --json file was written after the report was printed."""
    scen = tmp_path / "s.jsonl"
    assert cli.main(["generate", "--preset", "smoke", "--hours", "1", "-o", str(scen)]) == 0
    w = _closed_pipe()
    try:
        p = subprocess.run([sys.executable, "-m", "electron_stub", "replay", str(scen), "--data-dir",
                            str(tmp_path / "data"), "--trace", str(tmp_path / "t.jsonl"),
                            "--json", str(tmp_path / "r.json")], cwd=ROOT, stdout=w, stderr=subprocess.PIPE,
                           text=True, timeout=300,
                           env=dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{ROOT / 'electron-stub'}"))
    finally:
        os.close(w)
    assert p.returncode == 141, p.stderr
    assert "Traceback" not in p.stderr and "BrokenPipe" not in p.stderr, p.stderr
    assert json.loads((tmp_path / "r.json").read_text())["verdict"]
    assert (tmp_path / "t.jsonl").stat().st_size > 0


def test_every_rich_console_of_the_stub_turns_a_broken_pipe_into_BrokenPipeError():
    """The class of the bug: no Console in electron_stub may exit 1 on a broken pipe."""
    import re
    from electron_stub.report_view import PipeConsole
    f = os.fdopen(_closed_pipe(), "w")
    with pytest.raises(BrokenPipeError):
        PipeConsole(file=f).print("x" * 100)
    with pytest.raises(BrokenPipeError):
        f.close()  # the unsent rest; the stub points stdout at devnull instead
    src = ROOT / "electron-stub" / "electron_stub"
    bare = [f"{py.name}:{n}" for py in src.glob("*.py") for n, line in enumerate(py.read_text().splitlines(), 1)
            if re.search(r"(?<![A-Za-z])Console\(", line) and "class PipeConsole" not in line]
    assert bare == [], f"use PipeConsole, not rich's Console: {bare}"


def test_demo_without_keep_calls_its_files_temporary_and_hides_log_paths(tmp_path, capsys, monkeypatch):
    """The demo's folder is deleted when it ends: the scenario and the trace say so, and a sidecar
    failure shows its stderr tail inline, never the path of a log that will be gone."""
    from electron_stub.machine import Machine

    seen = {}

    def fake_replay(path, trace, binary, data_dir, quiet, json_out=None, temporary=False):
        seen["temporary"] = temporary
        return 0
    monkeypatch.setattr(cli, "_replay", fake_replay)
    assert cli.main(["demo"]) == 0
    assert seen == {"temporary": True}
    assert "(temporary; use --keep DIR to keep it)" in capsys.readouterr().out

    def machine(kept: bool) -> Machine:
        return Machine("m1", tmp_path / "data" / "m1", stack_url="http://x", seed=1, binary=None,
                       on_notification=lambda *a: None, on_request=None, logs_kept=kept)  # type: ignore[arg-type]
    assert str(tmp_path) not in machine(False)._tail_head() and "--keep" in machine(False)._tail_head()
    assert str(tmp_path / "data" / "m1.stderr.log") in machine(True)._tail_head()


def _trace_with_tasks(path, n: int):
    path.write_text("".join(json.dumps({"at": float(i), "event": "task.created", "task_id": f"t{i}",
                                        "type": "like", "tu": "g", "ru": f"r{i}", "source": "scroll_new",
                                        "created_at": float(i), "deadline": None}) + "\n" for i in range(n)))
    return path


@pytest.mark.parametrize("flags, listed, more", [([], 50, "… 10 more"), (["--limit", "7"], 7, "… 53 more"),
                                                 (["--all"], 60, None), (["--limit", "0"], 60, None)])
def test_diff_says_how_many_it_left_out_and_can_show_all(tmp_path, capsys, flags, listed, more):
    """The list was cut at 50 tasks per side without a word (newcomer's report, item 5)."""
    a = _trace_with_tasks(tmp_path / "a.jsonl", 60)
    b = _trace_with_tasks(tmp_path / "b.jsonl", 0)
    assert cli.main(["diff", str(a), str(b), *flags]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"60 task(s) only in {a}"
    assert sum(1 for x in out if " like " in x) == listed
    assert [x.strip() for x in out if "more" in x] == ([f"{more} (--all or --limit N shows them)"] if more else [])


def test_diff_help_describes_its_arguments(capsys):
    with pytest.raises(SystemExit):
        cli.main(["diff", "--help"])
    out = capsys.readouterr().out
    assert "TRACE_A" in out and "first trace" in out and "--all" in out and "default: 50" in out


@pytest.mark.parametrize("cmd", [["generate"], ["demo"], ["senders", "simulate"]])
def test_every_flag_has_a_help_text_with_its_default(capsys, cmd):
    with pytest.raises(SystemExit):
        cli.main([*cmd, "--help"])
    out = capsys.readouterr().out
    flags = [x for x in out.split("options:")[1].split("\n  -")[1:]]
    assert flags and all(len(f.split(None, 2)) > 2 or "help" in f for f in flags), out
    assert all("default" in f for f in flags if not f.startswith(("h,", "-binary", "-json"))), out


def test_ctrl_c_stops_a_replay_even_when_sigint_was_inherited_ignored(tmp_path):
    """A shell's ``cmd &`` (and some process managers) start a job with SIGINT ignored; Python keeps
    an inherited SIG_IGN and asyncio installs its Ctrl-C handler only over the default one, so
    the replay ran on to its end (the flake of the test above under pytest-xdist, whose workers
    may start children that way).  The stub asks for Ctrl-C back: exit 130 as ever."""
    scen = tmp_path / "shift.jsonl"
    assert cli.main(["generate", "--preset", "smoke", "--hours", "4", "-o", str(scen)]) == 0
    p = subprocess.Popen([sys.executable, "-m", "electron_stub", "replay", str(scen), "--data-dir",
                          str(tmp_path / "data")], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{ROOT / 'electron-stub'}"),
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        deadline = time.monotonic() + 60
        while not list((tmp_path / "data").glob("m1/sidecar.db")) and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(0.5)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    assert p.returncode == 130, err
    assert err.strip().splitlines()[-1] == "sidecar-stub: interrupted"
