from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.runtimes.helpers import Platform, agent_sdk_env, emulator


@pytest.fixture(scope="session")
def agent_sdk() -> Iterator[None]:
    with agent_sdk_env():
        yield


@pytest.fixture(scope="module")
def platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Platform]:
    with emulator(Path(tmp_path_factory.mktemp("emulator"))) as p:
        yield p


@pytest.fixture(scope="session")
def kit_image() -> str:
    """The kit image from this tree, built once per session from the local bases."""
    from bandkit.dockercli import docker_answers
    from bandkit.image import bases as image_bases
    from bandkit.image import build as image_build
    from bandkit.image.facts import host_arch

    if not docker_answers():
        pytest.fail("no Docker daemon answers: `uv run invoke ci.prepare --lane docker_tests`")
    image_bases.ensure_bases((host_arch(),))
    bundle = Path("/etc/ssl/certs/ca-certificates.crt")
    request = image_build.BuildRequest(
        tag="band-python-kit:runtimetest",
        base="local",
        build_ca=(bundle,) if bundle.is_file() else (),
    )
    return image_build.build(request, progress=lambda _line: None)[0].tag
