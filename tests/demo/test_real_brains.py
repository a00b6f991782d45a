"""`--brains real` host side, without an agent: what preflight demands of the host (the two
keys, usable base URLs), and what each sandbox is given (base URL, model, a
placeholder-only secret scoped to the API's host, egress to it). The keys are canaries:
they must appear in no env value, no message and no manifest entry."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bandkit.demo import DemoError, brains
from bandkit.demo.layout import DemoLayout
from bandkit.manifest import Manifest
from bandkit.runtimes.base import RuntimeName
from examples.docker_demo.cast import Role
from examples.docker_demo.scenario import load
from tests import commands

ANTHROPIC = "sk-ant-REALCANARY-0123456789abcdef"
OPENAI = "sk-REALCANARY-fedcba9876543210"
KEYS = {"ANTHROPIC_API_KEY": ANTHROPIC, "OPENAI_API_KEY": OPENAI}


def prepare(tmp_path: Path, env: dict[str, str]) -> tuple[brains.Brains, Manifest]:
    with Manifest.open(tmp_path / "m.json") as manifest:
        made = brains.prepare(
            "real",
            layout=DemoLayout.for_run_dir(tmp_path),
            manifest=manifest,
            scenario=load("happy"),
            topic="T",
            log=print,
            runtime=RuntimeName.DOCKER,  # the CLI image's codex: no npm install here
            env=env,
        )
    return made, manifest


@pytest.mark.parametrize(
    ("env", "named", "not_named"),
    [
        ({}, ["ANTHROPIC_API_KEY", "OPENAI_API_KEY"], []),
        ({"ANTHROPIC_API_KEY": ANTHROPIC}, ["OPENAI_API_KEY"], ["ANTHROPIC_API_KEY"]),
        ({"OPENAI_API_KEY": OPENAI, "ANTHROPIC_API_KEY": " "}, ["ANTHROPIC_API_KEY"], []),
    ],
)
def test_preflight_names_each_missing_key_and_shows_no_value(
    env: dict[str, str], named: list[str], not_named: list[str]
) -> None:
    with pytest.raises(DemoError) as caught:
        brains.check("real", RuntimeName.DOCKER, env)
    message = str(caught.value)
    assert all(name in message for name in named)
    assert not any(name in message for name in not_named)
    assert "--brains stub" in message  # the way to run without keys
    assert ANTHROPIC not in message
    assert OPENAI not in message


@pytest.mark.parametrize(
    ("name", "url", "why"),
    [
        ("OPENAI_BASE_URL", "http://gateway.example/v1", "loopback"),
        ("ANTHROPIC_BASE_URL", "https://user:pw@gateway.example", "credentials"),
        ("OPENAI_BASE_URL", "ftp://gateway.example/v1", "https or http"),
    ],
)
def test_a_base_url_the_key_may_not_go_to_is_refused_before_anything(
    name: str, url: str, why: str
) -> None:
    with pytest.raises(DemoError, match=why) as caught:
        brains.check("real", RuntimeName.DOCKER, {**KEYS, name: url})
    assert name in str(caught.value)
    assert OPENAI not in str(caught.value)


def test_real_brains_are_refused_on_sbx_like_stub() -> None:
    with pytest.raises(DemoError, match="--brains real does not run on sbx"):
        brains.check("real", RuntimeName.SBX, KEYS)


def test_each_sandbox_gets_the_provider_api_a_placeholder_and_egress_to_it(
    tmp_path: Path,
) -> None:
    made, manifest = prepare(tmp_path, KEYS)
    assert not manifest.resources  # nothing started: no stub, no process
    assert made.journal is None
    assert made.env[Role.PM]["ANTHROPIC_BASE_URL"] == "https://api.anthropic.com"
    assert made.env[Role.PM]["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1"
    for role in (Role.DEV, Role.ARCHITECT):
        assert made.env[role]["OPENAI_BASE_URL"] == "https://api.openai.com/v1"
        assert made.egress[role] == ("api.openai.com:443",)
    assert made.egress[Role.PM] == ("api.anthropic.com:443",)
    assert made.env[Role.DEV]["DEV_MODEL"] == brains.REAL_DEV_MODEL
    assert "CODEX_COMMAND" not in made.env[Role.DEV]  # docker: the image's codex on PATH
    (pm,) = made.secrets[Role.PM]
    assert (pm.env, pm.hosts, pm.value) == (
        "ANTHROPIC_PROXY_KEY",
        ("api.anthropic.com",),
        ANTHROPIC,
    )
    assert pm.placeholder.startswith("sk-ant-placeholder-")
    for role in (Role.DEV, Role.ARCHITECT):
        (secret,) = made.secrets[role]
        assert (secret.env, secret.hosts, secret.value) == (
            "OPENAI_PROXY_KEY",
            ("api.openai.com",),
            OPENAI,
        )
    placeholders = {s.placeholder for held in made.secrets.values() for s in held}
    assert len(placeholders) == 3  # fresh per sandbox
    assert set(made.hidden) == {ANTHROPIC, OPENAI}
    shown = repr(made) + repr(made.env)
    assert ANTHROPIC not in shown
    assert OPENAI not in shown


def test_host_overrides_reach_the_sandboxes_unchanged(tmp_path: Path) -> None:
    env = {
        **KEYS,
        "ANTHROPIC_BASE_URL": "http://127.0.0.1:8123/",
        "OPENAI_BASE_URL": "https://llm-gateway.example:8443/openai/v1",
        "PM_MODEL": "claude-x",
        "DEV_MODEL": "codex-y",
        "ARCHITECT_MODEL": "gpt-z",
    }
    made, _ = prepare(tmp_path, env)
    assert made.env[Role.PM]["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:8123"
    assert made.egress[Role.PM] == ("127.0.0.1:8123",)
    assert made.env[Role.DEV]["OPENAI_BASE_URL"] == "https://llm-gateway.example:8443/openai/v1"
    assert made.egress[Role.ARCHITECT] == ("llm-gateway.example:8443",)
    assert made.secrets[Role.ARCHITECT][0].hosts == ("llm-gateway.example",)
    models = {role: made.env[role][brains.MODEL_ENV[role]] for role in Role}
    assert models == {Role.PM: "claude-x", Role.DEV: "codex-y", Role.ARCHITECT: "gpt-z"}


def test_stub_and_scripted_brains_need_no_key() -> None:
    brains.check("stub", RuntimeName.DOCKER, {})
    brains.check("scripted", RuntimeName.SBX, {})


def test_the_task_without_keys_says_which_and_makes_nothing(tmp_path: Path) -> None:
    """`uv run invoke demo.up --brains real` as a user without keys runs it: one clear
    error naming the variables, a non-zero exit, no traceback, nothing created."""
    env = {k: v for k, v in os.environ.items() if k not in brains.REAL_KEY_ENV.values()}
    env = {k: v for k, v in env.items() if not k.startswith(("BAND_", "DEMO_"))}
    run_dir = tmp_path / "run"
    done = commands.run(
        ["uv", "run", "invoke", "demo.up", "--brains", "real", "--run-dir", str(run_dir)],
        env=env,
        timeout=120,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "--brains real needs ANTHROPIC_API_KEY and OPENAI_API_KEY" in done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    assert not run_dir.exists() or list(run_dir.iterdir()) == []
