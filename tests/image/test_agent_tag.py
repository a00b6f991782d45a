"""Agent image tags (bandkit/image/agent.py): one per set of inputs, and a clear refusal of
a workspace that is not a locked uv project (no Docker needed)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bandkit.dockercli import ImageError
from bandkit.image import agent
from bandkit.image.facts import STARTER_DIR
from tests.runtimes.helpers import REPO


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    target = tmp_path / "My Agent"
    shutil.copytree(STARTER_DIR, target, ignore=shutil.ignore_patterns(".venv", "__pycache__"))
    return target


def test_the_tag_follows_every_input_the_fast_path_compares(workspace: Path) -> None:
    first = agent.tag_for(workspace, "sha256:aaa")
    assert first.startswith("band-agent-my-agent:")
    assert agent.tag_for(workspace, "sha256:aaa") == first
    assert agent.tag_for(workspace, "sha256:bbb") != first  # another base
    moved = workspace.parent / "elsewhere"
    shutil.copytree(workspace, moved)
    assert agent.tag_for(moved, "sha256:aaa").split(":")[1] != first.split(":")[1]
    for name in agent.FILES:
        path = workspace / name
        original = path.read_bytes()
        path.write_bytes(original + b"\n")
        assert agent.tag_for(workspace, "sha256:aaa") != first, name
        path.write_bytes(original)
    assert agent.tag_for(workspace, "sha256:aaa") == first
    (workspace / "agent.py").write_text("# the code is mounted, not baked\n")
    assert agent.tag_for(workspace, "sha256:aaa") == first


def test_a_workspace_without_a_lock_is_refused_by_name(workspace: Path) -> None:
    (workspace / "uv.lock").unlink()
    with pytest.raises(ImageError, match=r"has no uv.lock: an agent workspace is a uv project"):
        agent.build(workspace)
    with pytest.raises(ImageError, match="is not a directory"):
        agent.build(workspace / "missing")


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (
            ["--runtime", "local"],
            "--agent-image runs on the docker or swarm runtime: add --runtime docker (or swarm)",
        ),
        (["--runtime", "docker", "--image", "x:y"], "give --image or --agent-image, not both"),
    ],
)
def test_provision_with_an_agent_image_refuses_what_cannot_be(
    workspace: Path, tmp_path: Path, extra: list[str], says: str
) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "invoke",
            "kit.provision",
            "--name",
            "imaged",
            "--workspace",
            str(workspace),
            "--description",
            "an echo agent from an image",
            "--agent-image",
            *extra,
            "--run-dir",
            str(tmp_path / ".run"),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=20,
        check=False,
    )
    assert done.returncode == 1
    assert says in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / ".run").exists()  # refused before anything was made
