"""The CLI's refusals read alike (newcomer's report, item 10): every usage error starts
``sidecar: bad setting --flag (SIDECAR_FLAG): …`` for a ``serve`` flag — argparse's own wording
(``sidecar serve: bad setting: argument --clock: …``) included — ``sidecar: bad argument …`` for
another command's flag, and no message says the same thing twice."""
from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sidecar.store.db import Store

ROOT = Path(__file__).resolve().parents[2]


def run(*args: str) -> subprocess.CompletedProcess:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "SIDECAR_TOKEN": "t"}
    return subprocess.run([sys.executable, "-m", "sidecar", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=30)


def one_line(r: subprocess.CompletedProcess, code: int = 2) -> str:
    assert r.returncode == code, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and r.stdout == "", r.stderr
    return lines[0]


@pytest.mark.parametrize("flags, start", [
    (["--clock", "sundial"], "sidecar: bad setting --clock (SIDECAR_CLOCK): invalid choice: 'sundial'"),
    (["--durability", "x"], "sidecar: bad setting --durability (SIDECAR_DURABILITY): invalid choice"),
    (["--port", "abc"], "sidecar: bad setting --port (SIDECAR_PORT): invalid int value: 'abc'"),
    (["--port"], "sidecar: bad setting --port (SIDECAR_PORT): expected one argument"),
    (["--port", "70000"], "sidecar: bad setting --port (SIDECAR_PORT): "),  # pydantic's check
    (["--no-such-flag"], "sidecar: bad command line: unrecognized arguments: --no-such-flag"),
])
def test_serve_usage_errors_are_worded_like_the_setting_checks(tmp_path, flags, start):
    line = one_line(run("serve", "--data-dir", str(tmp_path / "d"), *flags))
    assert line.startswith(start), line
    assert "argument --" not in line  # argparse's own prefix is reworded


def test_other_commands_name_the_bad_argument(tmp_path):
    line = one_line(run("deliveries", "--data-dir", str(tmp_path), "--after", "x"))
    assert line.startswith("sidecar: bad argument --after: ") and "'x'" in line, line
    assert line.endswith("(see sidecar deliveries --help)")


def test_unknown_log_level_names_the_value_once(tmp_path):
    line = one_line(run("serve", "--data-dir", str(tmp_path / "d"), "--log-level", "LOUD"))
    assert line.startswith("sidecar: bad setting --log-level (SIDECAR_LOG_LEVEL): unknown log level")
    assert line.count("LOUD") == 1 and "DEBUG" in line, line


def test_locked_data_dir_is_said_once_with_what_to_do(tmp_path):
    async def hold() -> subprocess.CompletedProcess:
        store = await Store.open(tmp_path / "sidecar.db")
        try:
            return await asyncio.to_thread(run, "serve", "--data-dir", str(tmp_path))
        finally:
            await store.close()

    line = one_line(asyncio.run(hold()), code=3)
    assert line.startswith("sidecar: data dir is locked by another sidecar: "), line
    assert line.count("another sidecar") == 1 and "--data-dir" in line, line


def test_version_outputs_match_what_the_readme_says():
    """README: the ready line's ``version`` is exactly what ``sidecar version`` prints and the
    second word of ``sidecar --version`` (which adds the protocol)."""
    from sidecar import PROTOCOL_VERSION, __version__

    assert run("version").stdout == f"{__version__}\n"
    assert run("--version").stdout == f"sidecar {__version__} (protocol {PROTOCOL_VERSION})\n"
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "exactly what `sidecar version` prints" in readme and "(as `sidecar --version`)" not in readme


def _help(capsys, *argv: str) -> str:
    from sidecar.cli.main import _parser

    with pytest.raises(SystemExit):
        _parser().parse_args([*argv, "--help"])
    return " ".join(capsys.readouterr().out.split())  # argparse's line wrapping undone


def test_groups_assign_and_unassign_are_described_apart(capsys):
    out = _help(capsys, "groups")
    assert "assign put a sender in groups" in out and "unassign take a sender out of groups" in out
    assert "to / from" not in out
    assert "GROUP_ID one or more group ids" in _help(capsys, "groups", "unassign")


def test_every_groups_create_flag_has_a_help_text(capsys):
    from sidecar.cli.main import _parser

    ap = _parser()
    groups = next(a for a in ap._subparsers._group_actions[0].choices["groups"]._actions
                  if isinstance(a, type(ap._subparsers._group_actions[0])))
    for op in ("get", "create", "patch", "delete", "assign", "unassign"):
        for action in groups.choices[op]._actions:
            assert action.help, (op, action.dest)


def test_why_help_says_what_happens_without_since(capsys):
    assert "Without it: every entry the data dir holds for the pair" in _help(capsys, "why")
