"""``sidecar serve`` checks every setting before anything starts (issue 7 item 2): one line on
stderr naming the setting, exit 2, no database and no lock file made.  ``--version`` works and
``serve --help`` documents the exit codes."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from sidecar import __version__

ROOT = Path(__file__).resolve().parents[2]


def run(*args: str, token: str | None = "t", extra_env: dict | None = None) -> subprocess.CompletedProcess:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **(extra_env or {})}
    if token is not None:
        env["SIDECAR_TOKEN"] = token
    return subprocess.run([sys.executable, "-m", "sidecar", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=30)


def assert_one_line_exit_2(r: subprocess.CompletedProcess, *words: str) -> None:
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert "Traceback" not in r.stderr and r.stdout == ""
    for w in words:
        assert w in lines[0], (w, lines[0])


@pytest.fixture
def busy_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    yield s.getsockname()[1]
    s.close()


@pytest.mark.parametrize("flags, words", [
    (["--port", "70000"], ["--port", "65535"]),
    (["--port", "-1"], ["--port"]),
    (["--port", "abc"], ["--port", "abc"]),
    (["--log-level", "LOUD"], ["--log-level", "LOUD", "DEBUG"]),
    (["--time-scale", "0"], ["--time-scale", "greater than 0"]),
    (["--time-scale", "-3"], ["--time-scale"]),
    (["--time-scale", "nan"], ["--time-scale", "nan"]),
    (["--stack-url", "ftp://x"], ["--stack-url", "http"]),
    (["--clock", "sundial"], ["--clock", "sundial"]),
    (["--no-such-flag"], ["--no-such-flag"]),
])
def test_bad_flag_is_one_line_and_exit_2_before_anything_starts(tmp_path, flags, words):
    data = tmp_path / "data"
    r = run("serve", "--data-dir", str(data), *flags)
    assert_one_line_exit_2(r, *words)
    assert not (data / "sidecar.db").exists() and not (data / "sidecar.db.lock").exists()


def test_bad_environment_setting_names_the_variable(tmp_path):
    r = run("serve", "--data-dir", str(tmp_path), extra_env={"SIDECAR_PORT": "99999"})
    assert_one_line_exit_2(r, "SIDECAR_PORT")


@pytest.mark.parametrize("value, words", [
    ("x", ["--allow-origin", "SIDECAR_ALLOW_ORIGIN", "'x'"]),
    ('["app://operator"', ["--allow-origin"]),  # what a JSON list half-typed looks like
    ("app://operator/path", ["--allow-origin", "app://operator/path"]),
])
def test_bad_allowed_origin_in_the_environment_is_one_line_and_exit_2(tmp_path, value, words):
    """A newcomer's trial: ``SIDECAR_ALLOWED_ORIGINS=x`` printed pydantic-settings' traceback and
    exited 1, and ``SIDECAR_ALLOW_ORIGIN`` (the README's ``SIDECAR_<FLAG>`` rule) was ignored."""
    r = run("serve", "--data-dir", str(tmp_path / "d"), extra_env={"SIDECAR_ALLOW_ORIGIN": value})
    assert_one_line_exit_2(r, *words)


@pytest.mark.parametrize("flag", ["notanorigin", "http://", "app://op/x?y", "null"])
def test_allow_origin_flag_must_be_an_origin(tmp_path, flag):
    r = run("serve", "--data-dir", str(tmp_path / "d"), "--allow-origin", flag)
    assert_one_line_exit_2(r, "--allow-origin", repr(flag))


def test_allow_origin_from_the_environment_is_a_comma_separated_list():
    from sidecar.config import Settings
    s = Settings(_env_file=None, **{})  # the defaults: no origin allowed
    assert s.allow_origin == ()
    os.environ["SIDECAR_ALLOW_ORIGIN"] = "app://operator, http://localhost:5173"
    try:
        assert Settings().allow_origin == ("app://operator", "http://localhost:5173")
    finally:
        del os.environ["SIDECAR_ALLOW_ORIGIN"]
    assert Settings(allow_origin=("app://operator",)).allow_origin == ("app://operator",)


def test_a_complex_environment_value_that_cannot_be_parsed_is_one_line_and_exit_2(tmp_path, monkeypatch):
    """The class of the bug: pydantic-settings raises ``SettingsError`` (not a ValidationError)
    for an environment value it cannot decode; load_settings turns it into one line too."""
    import pydantic_settings

    from sidecar.cli import preflight
    def broken(**kw):
        raise pydantic_settings.SettingsError(
            'error parsing value for field "allow_origin" from source "EnvSettingsSource"')

    monkeypatch.setattr(preflight, "Settings", broken)
    with pytest.raises(preflight.BadSetting) as e:
        preflight.load_settings({})
    assert str(e.value).startswith("bad setting --allow-origin (SIDECAR_ALLOW_ORIGIN):")


def test_port_in_use_is_one_line_and_exit_2(tmp_path, busy_port):
    r = run("serve", "--data-dir", str(tmp_path), "--port", str(busy_port))
    assert_one_line_exit_2(r, "--port", str(busy_port), "not free")
    assert not (tmp_path / "sidecar.db").exists()


@pytest.mark.parametrize("kind", ["missing", "folder", "empty"])
def test_unreadable_or_empty_token_file_is_one_line_and_exit_2(tmp_path, kind):
    tf = tmp_path / "token"
    if kind == "folder":
        tf.mkdir()
    elif kind == "empty":
        tf.write_text("\n")
    r = run("serve", "--data-dir", str(tmp_path / "d"), "--token-file", str(tf), token=None)
    assert_one_line_exit_2(r, "--token-file" if kind != "empty" else "SIDECAR_TOKEN")


@pytest.mark.parametrize("kind", ["missing", "folder", "empty"])
def test_a_bad_token_file_is_refused_even_when_sidecar_token_is_set(tmp_path, kind):
    """Flags win (README): a given --token-file is checked, never silently ignored."""
    tf = tmp_path / "token"
    if kind == "folder":
        tf.mkdir()
    elif kind == "empty":
        tf.write_text("\n")
    r = run("serve", "--data-dir", str(tmp_path / "d"), "--token-file", str(tf), token="from-env")
    assert_one_line_exit_2(r, "--token-file")
    assert not (tmp_path / "d").exists()


def test_settings_flag_token_file_wins_over_the_environment(tmp_path, monkeypatch):
    from sidecar.cli.preflight import check_settings, load_settings
    tf = tmp_path / "token"
    tf.write_text("from-file\n")
    monkeypatch.setenv("SIDECAR_TOKEN", "from-env")
    settings = load_settings({"token_file": tf, "data_dir": tmp_path / "d"})
    assert check_settings(settings) == "from-file" == settings.resolved_token()


@pytest.mark.parametrize("bad", ["port", "token"])
def test_a_refused_setting_creates_no_data_dir(tmp_path, busy_port, bad):
    """Every check runs before anything is made: a port in use or a missing token leaves no
    empty data dir behind."""
    data = tmp_path / "x1" / "nested"
    if bad == "port":
        r = run("serve", "--data-dir", str(data), "--port", str(busy_port))
    else:
        r = run("serve", "--data-dir", str(data), token=None)
    assert r.returncode == 2, r.stderr
    assert not (tmp_path / "x1").exists()


def test_data_dir_that_cannot_be_written_is_one_line_and_exit_2(tmp_path):
    if os.geteuid() == 0:  # root writes anywhere it has a filesystem: use one it cannot create in
        target = Path("/proc/sidecar-test/data")
    else:
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o500)
        target = ro
    r = run("serve", "--data-dir", str(target))
    assert_one_line_exit_2(r, "--data-dir", "not writable")


def test_data_dir_that_is_a_file_is_one_line_and_exit_2(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    assert_one_line_exit_2(run("serve", "--data-dir", str(f)), "--data-dir", "not a folder")


def test_version_flag_and_command():
    for args in (["--version"], ["version"]):
        r = run(*args)
        assert r.returncode == 0 and __version__ in r.stdout, r


def test_serve_help_documents_every_exit_code():
    r = run("serve", "--help")
    assert r.returncode == 0
    text = r.stdout
    assert "exit codes:" in text
    for code in ("0", "1", "2", "3", "4", "5", "6", "128+N"):
        assert any(line.strip().startswith(code + " ") for line in text.splitlines()), code


def test_readme_documents_the_same_exit_codes():
    from sidecar.cli.main import EXIT_CODES
    readme = (ROOT / "README.md").read_text()
    for line in EXIT_CODES.splitlines()[1:]:
        code = line.split()[0]
        assert f"| {code} " in readme or f"| `{code}` " in readme, f"README lacks exit code {code}"


@pytest.mark.parametrize("args", [["schema"], ["version"], ["--version"]])
def test_printing_commands_into_a_closed_pipe_exit_141_quietly(args):
    """``sidecar schema | head -c 1`` printed a BrokenPipeError traceback."""
    r, w = os.pipe()
    os.close(r)  # the reader is gone before the first byte
    try:
        p = subprocess.run([sys.executable, "-m", "sidecar", *args], cwd=ROOT, stdout=w,
                           stderr=subprocess.PIPE, text=True, timeout=30)
    finally:
        os.close(w)
    assert p.returncode == 141, p.stderr
    assert p.stderr == ""


def test_why_console_turns_a_broken_pipe_into_BrokenPipeError():
    """rich's own on_broken_pipe exits 1; the why table must reach the 141 handler."""
    from sidecar.cli.why import pipe_console_class
    PipeConsole = pipe_console_class()
    r, w = os.pipe()
    os.close(r)
    f = os.fdopen(w, "w")
    with pytest.raises(BrokenPipeError):
        PipeConsole(file=f).print("x" * 100)
    with pytest.raises(BrokenPipeError):
        f.close()


def test_readme_describes_the_ready_line_and_a_piped_stdins_eof_stops_serve(tmp_path):
    """The README names the ``ready`` line's fields and says stdin EOF stops ``serve`` when
    stdin is a pipe: both as the code does it."""
    import json
    import re
    import subprocess
    import sys
    readme = (ROOT / "README.md").read_text()
    shown = json.loads(re.search(r'`(\{"event":"ready"[^`]*\})`', readme).group(1))
    p = subprocess.Popen([sys.executable, "-m", "sidecar", "serve", "--port", "0", "--clock", "virtual",
                          "--data-dir", str(tmp_path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, env=dict(os.environ, SIDECAR_TOKEN="t"), cwd=ROOT)
    try:
        ready = json.loads(p.stdout.readline())
        assert set(ready) == set(shown) and ready["event"] == "ready" and ready["pid"] == p.pid
        assert ready["protocol"] == shown["protocol"] and ready["version"] == __version__
        for field in ("port", "pid", "version", "protocol"):
            assert f"`{field}`" in readme
        assert "only when stdin is a pipe/FIFO or a socket" in readme
        p.stdin.close()  # EOF on a pipe: the sidecar shuts down
        assert p.wait(timeout=10) == 0
        assert p.stdout.read() == b""  # nothing but the ready line on stdout
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
