"""Docker fixtures: the kit image is built once per test session from the local bases.

Every test here is marked `docker` (run by `nox -s docker_tests`, which `uv run nox` and
`.ci/run` include). Containers are run with argv lists and removed by the helpers.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from bandkit.dockercli import docker_answers
from bandkit.image import bases as image_bases
from bandkit.image import build as image_build
from bandkit.image.facts import host_arch

HOST_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
TEST_TAG = "band-python-kit:dockertest"
HOME_OVERRIDE_TAG = "band-python-kit:dockertest-sdkhome"
HOME_OVERRIDE = "/opt/custom-band"
EXTRA_TAG = "band-python-kit:dockertest-extra"


def _build(tag: str, *extra_args: tuple[str, str]) -> str:
    if not docker_answers():
        pytest.fail("no Docker daemon answers: `uv run invoke ci.prepare --lane docker_tests`")
    image_bases.ensure_bases((host_arch(),))
    request = image_build.BuildRequest(
        tag=tag,
        base="local",
        build_ca=(HOST_BUNDLE,) if HOST_BUNDLE.is_file() else (),
        build_args=extra_args,
    )
    return image_build.build(request, progress=lambda _line: None)[0].tag


@pytest.fixture(scope="session")
def kit_image() -> str:
    """The kit image built from the working tree on the local bases (once per session)."""
    return _build(TEST_TAG)


@pytest.fixture(scope="session")
def sdk_home_image() -> str:
    """The same image built with `--build-arg BAND_SDK_HOME=/opt/custom-band`."""
    return _build(HOME_OVERRIDE_TAG, ("BAND_SDK_HOME", HOME_OVERRIDE))


def run(
    image: str,
    *command: str,
    env: dict[str, str] | None = None,
    docker_args: Sequence[str] = (),
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """`docker run --rm` through the real entrypoint; env values never go into argv."""
    env = env or {}
    argv = ["docker", "run", "--rm", *docker_args]
    for name in env:
        argv += ["--env", name]  # value comes from our environment, not argv
    argv += [image, *command]
    return subprocess.run(
        argv,
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
        env={**os.environ, **env},
    )


@pytest.fixture(scope="session")
def sdk_extra_image() -> str:
    """The image built with one optional band-sdk extra (`--sdk-extra logging`)."""
    return _build(EXTRA_TAG, ("SDK_EXTRA", "logging"))


@pytest.fixture
def container(kit_image: str) -> Iterator[str]:
    """A detached container running `sleep` through the entrypoint; removed afterwards."""
    name = f"bandkit-test-{uuid.uuid4().hex[:8]}"
    subprocess.run(
        ["docker", "run", "-d", "--name", name, kit_image, "sleep", "300"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    try:
        yield name
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True, check=False, timeout=60)
