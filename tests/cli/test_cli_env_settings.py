"""Settings that ``sidecar serve`` takes from the environment only (no flag): Stack's and the
platform's waits, Stack's concurrency, the frame cap (brk33).  A bad one is still one line and
exit 2, but the line names the environment variable alone — it named a flag ``--stack-timeout-s``
that ``serve`` refuses as unrecognized — and ``sidecar serve --help`` and the README list every
one of them, so a user can find ``SIDECAR_STACK_TIMEOUT_S`` without reading the code."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sidecar.cli.serve_args import serve_flags
from sidecar.cli.preflight import flag_of
from sidecar.config import Settings

ROOT = Path(__file__).resolve().parents[2]
ENV_ONLY = sorted(set(Settings.model_fields) - serve_flags() - {"token"})


def run(*args: str, **env: str) -> subprocess.CompletedProcess:
    base = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "SIDECAR_TOKEN": "t"}
    return subprocess.run([sys.executable, "-m", "sidecar", *args], cwd=ROOT, env={**base, **env},
                          capture_output=True, text=True, timeout=30)


def test_the_environment_only_settings_are_the_expected_ones():
    assert {"stack_timeout_s", "stack_startup_timeout_s", "request_timeout_s"} <= set(ENV_ONLY)


@pytest.mark.parametrize("field", ENV_ONLY)
def test_a_setting_without_a_flag_is_named_by_its_variable_only(field):
    assert flag_of(field) == f"SIDECAR_{field.upper()}"


@pytest.mark.parametrize("field", sorted(serve_flags()))
def test_a_setting_with_a_flag_is_named_by_both(field):
    assert flag_of(field) == f"--{field.replace('_', '-')} (SIDECAR_{field.upper()})"


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "1e309", "", "abc", "   "])
def test_a_bad_stack_timeout_is_one_line_naming_the_variable(tmp_path, value):
    r = run("serve", "--data-dir", str(tmp_path / "d"), SIDECAR_STACK_TIMEOUT_S=value)
    assert r.returncode == 2 and r.stdout == "", r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("sidecar: bad setting SIDECAR_STACK_TIMEOUT_S: "), lines
    assert "--stack-timeout-s" not in lines[0]
    assert not (tmp_path / "d").exists()  # refused before anything was made


def test_serve_help_and_the_readme_list_every_environment_only_setting():
    helptext = run("serve", "--help").stdout
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for field in ENV_ONLY:
        name = f"SIDECAR_{field.upper()}"
        assert name in helptext, name
        assert name in readme, name
