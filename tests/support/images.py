"""The kit images the Docker tests run, built from the working tree on the local bases,
once per test run whichever xdist worker asks first (fixtures in tests/conftest.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from filelock import FileLock

from bandkit.dockercli import docker_answers
from bandkit.image import bases as image_bases
from bandkit.image import build as image_build
from bandkit.image.facts import LOCAL_TAG, host_arch
from bandkit.runtimes.docker.identity import GID_LABEL

HOST_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
TEST_TAG = "band-python-kit:dockertest"
HOME_OVERRIDE_TAG = "band-python-kit:dockertest-sdkhome"
HOME_OVERRIDE = "/opt/custom-band"
EXTRA_TAG = "band-python-kit:dockertest-extra"
ARM64_TAG = "band-python-kit:dockertest-arm64"
BUILD_CA = (HOST_BUNDLE,) if HOST_BUNDLE.is_file() else ()  # what the per-arch tests pass


def build_once(
    shared: Path, tag: str, *extra_args: tuple[str, str], arch: str | None = None
) -> str:
    """Build `tag` from the working tree on the local bases (for this machine's arch, or
    `arch`), once for the whole run: the workers take turns (a lock in the run's shared
    directory), and a later one finds it."""
    if not docker_answers():
        pytest.fail("no Docker daemon answers: `uv run invoke ci.prepare --lane docker_tests`")
    done = shared / f"built-{tag.replace(':', '-')}"
    with FileLock(str(done) + ".lock", timeout=1800):
        if not done.exists():
            # A foreign arch is cross-built: its builder stage runs on this one's bases.
            image_bases.ensure_bases(tuple(dict.fromkeys((host_arch(), arch or host_arch()))))
            request = image_build.BuildRequest(
                platforms=(f"linux/{arch}",) if arch else (),
                tag=tag,
                base="local",
                build_ca=BUILD_CA,
                build_args=extra_args,
            )
            image_build.build(request, progress=lambda _line: None)
            done.write_text(tag)
    return tag


def current_image(ref: str) -> bool:
    """`ref` exists and its entrypoint takes the box's own gid (what the runtime demands)."""
    found = subprocess.run(
        [
            "docker",
            "image",
            "inspect",
            "--format",
            f'{{{{index .Config.Labels "{GID_LABEL}"}}}}',
            ref,
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    return found.returncode == 0 and found.stdout.strip() == "1"


def ensure_local_tag(kit_image: str) -> str:
    """`band-python-kit:local` (what the tasks run on docker): the session's build of the
    working tree tagged so when that tag is absent or built before the entrypoint took a
    gid; a current one is kept."""
    if not current_image(LOCAL_TAG):
        subprocess.run(["docker", "tag", kit_image, LOCAL_TAG], check=True, timeout=60)
    return LOCAL_TAG


def remove_agent_images(*roots: Path) -> list[str]:
    """Remove the agent images (`kit.build-agent`) made for workspaces under `roots`: what
    a test's run directory left in the daemon. The removed tags."""
    listed = subprocess.run(
        [
            "docker",
            "images",
            "--filter",
            "label=bandkit.agent.workspace",
            "--format",
            "{{.Repository}}:{{.Tag}}",
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    ).stdout.split()
    made = []
    for tag in listed:
        label = subprocess.run(
            [
                "docker",
                "image",
                "inspect",
                "--format",
                '{{index .Config.Labels "bandkit.agent.workspace"}}',
                tag,
            ],
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        ).stdout.strip()
        if any(Path(label).is_relative_to(root) for root in roots if label):
            made.append(tag)
    if made:
        subprocess.run(["docker", "image", "rm", *made], capture_output=True, timeout=300)
    return made
