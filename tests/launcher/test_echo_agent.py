"""The echo-agent starter workspace: its contract, drift pins, and a real start."""

from __future__ import annotations

import re
import shutil
import tomllib

import yaml

from bandkit.image.facts import STARTER_DIR
from launcher.config import read_document, validated_spec
from launcher.constants import (
    AGENT_HOME,
    CREDENTIAL_NAMES,
    DEFAULT_SECRETS_PATH,
    PLACEHOLDER_AGENT_ID,
    CredentialSource,
)
from tests.launcher.harness import AgentBox


def test_secrets_example_lists_exactly_the_documented_names() -> None:
    names = [
        line.split("=", 1)[0]
        for line in (STARTER_DIR / "secrets.env.example").read_text().splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    assert tuple(names) == CREDENTIAL_NAMES
    assert all(
        line.endswith("=")
        for line in (STARTER_DIR / "secrets.env.example").read_text().splitlines()
        if line and not line.startswith("#")
    ), "the example must not carry values"


def test_band_yaml_defaults_to_proxy_managed_and_the_placeholder() -> None:
    spec = validated_spec(read_document(STARTER_DIR / "band.yaml"), trusted_digest=None)
    assert spec.agent_id == PLACEHOLDER_AGENT_ID
    assert spec.entrypoint == "main.py"
    assert spec.credentials is not None
    assert spec.credentials.source is CredentialSource.PROXY_MANAGED
    for value in vars(spec.runtime).values():
        assert value.startswith(f"{AGENT_HOME}/")
    assert DEFAULT_SECRETS_PATH in (STARTER_DIR / "band.yaml").read_text()


def test_gitignore_covers_the_secrets_directory() -> None:
    assert ".band/" in (STARTER_DIR / ".gitignore").read_text().splitlines()


def test_project_is_locked_on_band_sdk_from_pypi() -> None:
    pyproject = tomllib.loads((STARTER_DIR / "pyproject.toml").read_text())
    assert any(dep.startswith("band-sdk") for dep in pyproject["project"]["dependencies"])
    lock = (STARTER_DIR / "uv.lock").read_text()
    block = re.search(r'name = "band-sdk"\nversion = "([^"]+)"\nsource = \{ ([^}]+) \}', lock)
    assert block is not None
    assert "pypi.org" in block.group(2)


def test_main_uses_the_real_agent_api_and_the_launcher_env() -> None:
    source = (STARTER_DIR / "main.py").read_text()
    compile(source, "main.py", "exec")
    for needle in ("from band import Agent", "SimpleAdapter", "Agent.create", "SIGTERM"):
        assert needle in source
    for name in ("BAND_AGENT_ID", "BAND_API_KEY", "BAND_REST_URL", "BAND_WS_URL"):
        assert name in source
    assert 'f"echo: {msg.content}"' in source


def test_the_starter_launches_through_the_launcher(agent_box: AgentBox) -> None:
    """Real locked sync of band-sdk, real exec: the agent's first line, then a clean
    failure to reach a closed local port (no platform here; the emulator tests talk)."""
    shutil.rmtree(agent_box.ws)
    shutil.copytree(
        STARTER_DIR, agent_box.ws, ignore=shutil.ignore_patterns(".venv", "__pycache__")
    )
    config = yaml.safe_load((agent_box.ws / "band.yaml").read_text())
    config["agent"]["id"] = "echo-1"
    config["runtime"] = agent_box.config()["runtime"]
    agent_box.write(config)
    launch = agent_box.run(
        env=agent_box.env(
            BAND_KIT_ALLOW_INSECURE_ENDPOINTS="1",
            BAND_REST_URL="http://127.0.0.1:9",
            BAND_WS_URL="ws://127.0.0.1:9/api/v1/socket/websocket",
        )
    )
    assert "echo agent starting: agent echo-1, rest http://127.0.0.1:9" in launch.stderr, (
        launch.stderr
    )
    assert "echo agent failed: ConnectError" in launch.stderr
    assert launch.returncode == 1
    assert "Traceback" not in launch.stderr
