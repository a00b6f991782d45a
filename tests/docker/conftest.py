"""Docker fixtures and helpers: a container from the kit image, `docker run` through the
entrypoint. The images themselves (`kit_image`, `sdk_home_image`, `sdk_extra_image`) are
session fixtures in tests/conftest.py, built once per run by tests/support/images.py;
`images.ensure_local_tag` (tests/support/images.py) makes that build the
`band-python-kit:local` the tasks run when that tag is absent or stale. `daemon_back` is for
the tests that restart the Docker daemon (marked `exclusive`): it answers again when each
ends, whatever the test did to it.

Every test here is marked `docker` (run by `nox -s docker_tests`, which `uv run nox` and
`.ci/run` include). Containers are run with argv lists and removed by the helpers.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator, Sequence

import pytest

from bandkit.ci import dockerd
from bandkit.dockercli import docker_answers


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


@pytest.fixture
def daemon_back() -> Iterator[None]:
    """The Docker daemon answers when the test ends, whatever the test did to it (the
    rest of the session needs it)."""
    daemon = dockerd.find()
    yield
    if not docker_answers(5.0):
        dockerd.start(daemon)
    assert docker_answers(), "the Docker daemon did not come back after the test"
