"""The three agent workspaces: complete, locked, launcher-valid, and kept in step with the
echo-agent starter and with each other (one brain, one main.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

from bandkit.demo.staging import AGENTS_DIR, MAIN_SOURCE, PROGRAM_FILES, WORKSPACE_FILES
from bandkit.image.facts import STARTER_DIR
from bandkit.kit.band_yaml import read_agent_id, validate_band_yaml
from examples.docker_demo.cast import CAST, READY_LINE, Role
from launcher.constants import PLACEHOLDER_AGENT_ID

REPO = Path(__file__).resolve().parents[2]
ROLES = [role.value for role in Role]


def locked_version(lock: Path, package: str) -> str:
    data = tomllib.loads(lock.read_text())
    return next(p["version"] for p in data["package"] if p["name"] == package)


@pytest.mark.parametrize("role", ROLES)
def test_each_workspace_is_complete(role: str) -> None:
    workspace = AGENTS_DIR / role
    for name in (*WORKSPACE_FILES, ".gitignore"):
        assert (workspace / name).is_file(), name
    for program in PROGRAM_FILES.values():
        assert program.is_file(), program
    assert "script.json" in (workspace / ".gitignore").read_text().split()


@pytest.mark.parametrize("role", ROLES)
def test_band_yaml_is_proxy_managed_and_launcher_valid(role: str) -> None:
    workspace = AGENTS_DIR / role
    assert read_agent_id(workspace) == PLACEHOLDER_AGENT_ID
    raw = (workspace / "band.yaml").read_bytes()
    assert b"source: proxy-managed" in raw
    validate_band_yaml(
        raw.replace(PLACEHOLDER_AGENT_ID.encode(), b"agent-1"),
        expected_id="agent-1",
        shown=workspace / "band.yaml",
    )


@pytest.mark.parametrize("role", ROLES)
def test_band_sdk_is_pinned_like_the_echo_agent(role: str) -> None:
    ours = tomllib.loads((AGENTS_DIR / role / "pyproject.toml").read_text())
    echo = tomllib.loads((STARTER_DIR / "pyproject.toml").read_text())
    assert ours["project"]["dependencies"] == echo["project"]["dependencies"]
    assert ours["project"]["name"] == f"band-demo-{role}"
    assert locked_version(AGENTS_DIR / role / "uv.lock", "band-sdk") == locked_version(
        STARTER_DIR / "uv.lock", "band-sdk"
    )


@pytest.mark.parametrize("role", ROLES)
def test_the_lock_is_current(role: str, tmp_path: Path) -> None:
    uv = shutil.which("uv")
    assert uv
    for name in ("pyproject.toml", "uv.lock"):
        shutil.copy2(AGENTS_DIR / role / name, tmp_path / name)
    env = {
        k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "UV_PROJECT_ENVIRONMENT")
    }
    result = subprocess.run(
        [uv, "lock", "--check", "--offline", "--project", str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr


def test_one_agent_program_for_all_three() -> None:
    # The roles differ only in their own files; the program lives once and is staged.
    for role in ROLES:
        assert not (AGENTS_DIR / role / "main.py").exists(), role
        assert not (AGENTS_DIR / role / "brain.py").exists(), role
    assert f'READY_LINE = "{READY_LINE}"' in MAIN_SOURCE.read_text()


@pytest.mark.parametrize("role", ROLES)
def test_the_persona_has_stakes_and_names_the_others(role: str) -> None:
    prompt = (AGENTS_DIR / role / "prompt.md").read_text()
    assert prompt.startswith(f"# {CAST[Role(role)].name}")
    assert "## The stakes" in prompt
    others = [m.name.split()[0] for r, m in CAST.items() if r.value != role]
    assert all(name in prompt for name in others)


def test_descriptions_carry_the_marker_and_fit_the_platform() -> None:
    for member in CAST.values():
        assert member.description.endswith("[band-demo]")
        assert 10 <= len(member.description) <= 500
        assert member.sandbox == f"band-demo-{member.role.value}"
