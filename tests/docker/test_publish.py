"""build -> push to a local registry -> stamp -> pull by digest gives the same image."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from bandkit.dockercli import ImageError, image_id
from bandkit.image import push as image_push
from bandkit.image.facts import SPEC
from bandkit.image.refs import parse_repository
from bandkit.image.registry import local_registry
from bandkit.kit import spec as kitspec

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A throwaway registry (tests/docker/registry.py) and the repository pushed to."""
    with local_registry(tmp_path_factory.mktemp("registry")) as addr:
        yield f"{addr}/band-python-kit"


def _docker(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["docker", *argv], capture_output=True, text=True, check=False, timeout=600
    )


def test_push_stamp_and_pull_by_digest_give_the_same_image(
    kit_image: str, registry: str, tmp_path: Path
) -> None:
    lines: list[str] = []
    pushed = image_push.push(kit_image, registry, ["latest", "1.2.3", "1"], progress=lines.append)
    assert pushed.tags == ("1.2.3", "latest", "1")  # immutable first, floating last
    assert lines.index(f"image.push: pushing {registry}:1.2.3") < lines.index(
        f"image.push: moving {registry}:latest"
    )
    repo = parse_repository(registry)
    assert image_push.remote_digest(repo, "1.2.3") == pushed.digest
    assert image_push.remote_digest(repo, "latest") == pushed.digest

    stamped = kitspec.stamp(SPEC.read_text(), f"{registry}:1.2.3", pushed.digest)
    (tmp_path / "spec.yaml").write_text(stamped)
    ref = yaml.safe_load(stamped)["sandbox"]["image"]
    assert ref == f"{registry}:1.2.3@{pushed.digest}"
    assert kitspec.validate_text(stamped).ok

    for tag in pushed.tags:
        _docker("rmi", f"{registry}:{tag}")
    pulled = _docker("pull", ref)
    assert pulled.returncode == 0, pulled.stderr
    assert image_id(ref) == image_id(kit_image)


def test_an_existing_version_tag_is_never_overwritten(kit_image: str, registry: str) -> None:
    registry = f"{registry}-immutable"  # a repository of its own: no `latest` yet
    image_push.push(kit_image, registry, ["2.0.0"], progress=lambda _l: None)
    before = image_push.remote_digest(parse_repository(registry), "2.0.0")
    with pytest.raises(ImageError, match=r"2\.0\.0 already exists and version tags are immutable"):
        image_push.push(kit_image, registry, ["2.0.0", "latest"], progress=lambda _l: None)
    assert image_push.remote_digest(parse_repository(registry), "2.0.0") == before
    assert image_push.remote_digest(parse_repository(registry), "latest") is None


def test_push_task_prints_the_digest_and_fails_cleanly(kit_image: str, registry: str) -> None:
    def invoke(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["invoke", *args], capture_output=True, text=True, check=False, timeout=600
        )

    ok = invoke("image.push", "--registry", registry, "--tag", "3.0.0", "--source", kit_image)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.strip().splitlines()[-1].startswith(f"{registry}@sha256:")
    again = invoke("image.push", "--registry", registry, "--tag", "3.0.0", "--source", kit_image)
    assert again.returncode == 1
    assert "already exists" in again.stderr
    assert "Traceback" not in again.stderr
