"""The environment a machine's sidecar gets (``electron_stub.machine.sidecar_env``, brk33).

The sidecar reads its settings case-insensitively (pydantic-settings: ``sidecar_stack_timeout_s``
sets ``stack_timeout_s`` as ``SIDECAR_STACK_TIMEOUT_S`` does; with both, the one later in the
environment wins).  The harness looked only for the upper-case name: a user's
``sidecar_stack_timeout_s=1`` got a ``SIDECAR_STACK_TIMEOUT_S=120`` appended behind it, which won,
and an inherited ``sidecar_token`` could beat the launch's own token (auth then failed)."""
from __future__ import annotations

from electron_stub.machine import HARNESS_WAIT_S, HARNESS_WAITS, sidecar_env


def _values(env: dict[str, str], name: str) -> list[str]:
    return [v for k, v in env.items() if k.upper() == name]


def test_the_harness_waits_are_set_when_the_environment_has_none():
    env = sidecar_env({"PATH": "/bin"}, {}, "tok")
    for name in HARNESS_WAITS:
        assert _values(env, name) == [str(HARNESS_WAIT_S)]
    assert _values(env, "SIDECAR_TOKEN") == ["tok"]


def test_a_wait_the_user_set_in_any_case_is_theirs_alone():
    for spelled in ("SIDECAR_STACK_TIMEOUT_S", "sidecar_stack_timeout_s", "Sidecar_Stack_Timeout_S"):
        env = sidecar_env({spelled: "1"}, {}, "tok")
        assert _values(env, "SIDECAR_STACK_TIMEOUT_S") == ["1"], env
        assert _values(env, "SIDECAR_REQUEST_TIMEOUT_S") == [str(HARNESS_WAIT_S)]


def test_the_launch_token_is_the_only_token():
    env = sidecar_env({"SIDECAR_TOKEN": "old", "sidecar_token": "older", "Sidecar_Token_File": "/x"}, {}, "tok")
    assert _values(env, "SIDECAR_TOKEN") == ["tok"]
    assert _values(env, "SIDECAR_TOKEN_FILE") == []  # a token file would win over the launch's token


def test_the_machines_own_variables_win_over_the_inherited_ones():
    env = sidecar_env({"sidecar_router_targets": "[]"}, {"SIDECAR_ROUTER_TARGETS": '[{"x":1}]'}, "tok")
    assert _values(env, "SIDECAR_ROUTER_TARGETS") == ['[{"x":1}]']


def test_a_sidecar_refusing_a_setting_is_said_to_have_exited(tmp_path, monkeypatch):
    """A bad ``SIDECAR_STACK_TIMEOUT_S`` in the harness's environment: the sidecar exits 2 with
    its one line before any ready line; the harness said "bad ready line b''" — it names the
    exit and shows the sidecar's line instead."""
    import asyncio

    from electron_stub.machine import Machine, MachineError

    async def notify(*a):
        return None

    monkeypatch.setenv("SIDECAR_STACK_TIMEOUT_S", "abc")
    m = Machine("m1", tmp_path / "m1", stack_url="http://127.0.0.1:9", seed=1, binary=None,
                on_notification=lambda *a: None, on_request=notify)
    try:
        asyncio.run(m.start())
    except MachineError as exc:
        text = str(exc)
    else:  # pragma: no cover - the sidecar must refuse
        asyncio.run(m.stop())
        raise AssertionError("the sidecar started with SIDECAR_STACK_TIMEOUT_S=abc")
    first = text.splitlines()[0]
    assert first == "m1: the sidecar exited with code 2 before its ready line", text
    assert "sidecar: bad setting SIDECAR_STACK_TIMEOUT_S: " in text, text
