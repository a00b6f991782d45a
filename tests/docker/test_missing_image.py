"""A docker sandbox from an image that was never built: one clear line, nothing made."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from bandkit.manifest import Manifest
from bandkit.runtimes.base import SandboxError, SandboxSpec
from bandkit.runtimes.docker import DockerRuntime

pytestmark = pytest.mark.docker


def test_a_missing_kit_image_says_to_build_it(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    with Manifest.open(tmp_path / "manifest.json") as manifest:
        runtime = DockerRuntime(tmp_path / "docker", manifest=manifest)
        spec = SandboxSpec(
            name="never-built", workspaces=(workspace,), image="band-python-kit:never-built"
        )
        with pytest.raises(SandboxError) as caught:
            runtime.create(spec)
        assert list(manifest.resources) == []  # nothing recorded, so nothing was made
    message = str(caught.value)
    assert "band-python-kit:never-built is missing; run `uv run invoke build`" in message
    assert "registry-1.docker.io" not in message
    networks = subprocess.run(
        ["docker", "network", "ls", "--format", "{{.Name}}"],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout
    assert "never-built" not in networks
