"""`kit.build-agent` for real: an agent image built on the kit image, found again by its
inputs' digest, proved to take the launcher's fast path, carrying nothing of its build's
environment, and run by `kit.provision --runtime docker --image` with no download."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from bandkit.emulator import service
from tests import commands
from tests.kit.support import Home
from tests.runtimes.helpers import scratch_dir
from tests.support import images

pytestmark = pytest.mark.docker
PYPI_HOSTS = ("pypi.org", "files.pythonhosted.org")


@pytest.fixture
def home(kit_image: str) -> Iterator[Home]:
    root = scratch_dir("agent-image-")
    result = Home(root, root / ".run")
    try:
        yield result
    finally:
        provisioned = result.run_dir / "provision"
        for folder in sorted(provisioned.iterdir()) if provisioned.is_dir() else []:
            result.invoke("kit.unprovision", "--name", folder.name, "--forget-unreachable")
        if (result.run_dir / service.RUN_FILE).exists():
            service.down(result.run_dir)
        images.remove_agent_images(root.resolve())
        shutil.rmtree(root, ignore_errors=True)


def _inspect(ref: str) -> dict[str, object]:
    out = subprocess.run(
        ["docker", "image", "inspect", "--format", "{{json .Config}}", ref],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    config: dict[str, object] = json.loads(out)
    return config


def _hosts(node: object) -> list[str]:
    """Every `host` value anywhere in the policy log's JSON."""
    if isinstance(node, dict):
        own = [str(node["host"])] if "host" in node else []
        return own + [h for value in node.values() for h in _hosts(value)]
    if isinstance(node, list):
        return [h for item in node for h in _hosts(item)]
    return []


def _build_agent(*args: str) -> subprocess.CompletedProcess[str]:
    return commands.invoke("kit.build-agent", *args, timeout=900)


def _build(workspace: Path, base: str, *more: str) -> tuple[str, str]:
    done = _build_agent("--workspace", str(workspace), "--base", base, *more)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.strip().splitlines()
    return lines[-1], lines[-2]


def test_an_agent_image_is_built_once_per_input_and_starts_with_no_download(
    home: Home, kit_image: str
) -> None:
    workspace = home.workspace("imaged")
    tag, said = _build(workspace, kit_image)
    assert tag.startswith("band-agent-imaged:")
    assert said.startswith("kit.build-agent: built ")
    again, said = _build(workspace, kit_image)
    assert again == tag
    assert said.startswith("kit.build-agent: up to date: ")
    # nothing of the build's own environment or command stays in the image
    config, base = _inspect(tag), _inspect(kit_image)
    assert config["Env"] == base["Env"]
    assert config["Entrypoint"] == base["Entrypoint"]
    assert config["Cmd"] == base["Cmd"]
    # the venv's bytecode is in the image: a fresh container compiles nothing at start
    count = 'find "$HOME/.local/share/band-kit/venv" -name "*.pyc" | wc -l'
    run = ["docker", "run", "--rm", "--network", "none", "--entrypoint", "sh", tag, "-c"]
    compiled = subprocess.run([*run, count], capture_output=True, text=True, check=True, timeout=60)
    assert int(compiled.stdout.strip()) > 100, compiled.stdout
    # a changed lock input is another image
    pyproject = workspace / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace("echoes every", "echoes each"))
    changed, _ = _build(workspace, kit_image)
    assert changed != tag

    # provisioned from the agent image: connected, and its start fetched nothing
    home.ok("platform.up")
    done = home.ok(
        "kit.provision",
        "--name",
        "imaged",
        "--workspace",
        str(workspace),
        "--runtime",
        "docker",
        "--image",
        changed,
        "--description",
        "an echo agent from an agent image",
    )
    assert done.stdout.strip()
    logs = subprocess.run(
        ["docker", "logs", "imaged"], capture_output=True, text=True, check=True, timeout=60
    )
    assert "phase sync: skipped uv" in logs.stdout + logs.stderr
    policy = home.ok("kit.policy-log", "--name", "imaged", "--json").stdout
    hosts = set(_hosts(json.loads(policy)))
    assert hosts, policy  # the platform's route at least: the log is read
    assert not any(pypi in host for host in hosts for pypi in PYPI_HOSTS), hosts
    assert "echo: @imaged" in home.ok("kit.ping", "--name", "imaged").stdout


def test_a_carried_workspace_is_in_the_image_and_its_files_make_the_tag(
    home: Home, kit_image: str
) -> None:
    """`--carry /workspace`: the image holds the workspace there (root's, read-only for
    the agent uid, a link kept as a link, no .venv), its launch takes the fast path with
    nothing mounted (the build's proof), the same files from another directory are the
    same image, and a changed file is another one."""
    workspace = home.workspace("carried")
    (workspace / ".venv").mkdir()
    (workspace / ".venv" / "junk").write_text("never carried\n")
    (workspace / "entry").symlink_to("main.py")
    made: list[str] = []
    try:
        tag, said = _build(workspace, kit_image, "--carry", "/workspace")
        made.append(tag)
        assert said.startswith("kit.build-agent: built "), said
        probe = (
            'cd /workspace && echo $(ls -A) && stat -c "%u %a" main.py && '
            "readlink entry && if [ -w main.py ]; then echo writable; else echo read-only; fi"
        )
        argv = ["docker", "run", "--rm", "--network", "none", "--user", "1000"]
        argv += ["--entrypoint", "sh", tag, "-c", probe]
        seen = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
        assert seen.returncode == 0, seen.stderr
        listing, owner, link, access = seen.stdout.splitlines()
        assert listing.split() == sorted(p.name for p in workspace.iterdir() if p.name != ".venv")
        assert (owner, link, access) == ("0 644", "main.py", "read-only")

        elsewhere = home.root / "elsewhere" / "carried"
        shutil.copytree(workspace, elsewhere, symlinks=True)
        shutil.rmtree(elsewhere / ".venv")
        again, said = _build(elsewhere, kit_image, "--carry", "/workspace")
        assert (again, said.split()[1]) == (tag, "up"), said  # "up to date": found, not built
        with (elsewhere / "main.py").open("a") as changed_file:
            changed_file.write("# changed\n")
        changed, _ = _build(elsewhere, kit_image, "--carry", "/workspace")
        made.append(changed)
        assert changed != tag
    finally:
        for ref in made:
            subprocess.run(["docker", "image", "rm", ref], capture_output=True, timeout=60)


def test_build_agent_says_what_is_missing(home: Home, tmp_path: Path) -> None:
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "band.yaml").write_text("agent: {}\n")
    done = _build_agent("--workspace", str(bare))
    assert done.returncode == 1
    assert "has no uv.lock, pyproject.toml" in done.stderr
    assert "Traceback" not in done.stderr
    workspace = home.workspace("nobase")
    done = _build_agent("--workspace", str(workspace), "--base", "no-such:image")
    assert done.returncode == 1
    assert "image no-such:image is missing; run `uv run invoke build`" in done.stderr
