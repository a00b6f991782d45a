"""build -> push to a local registry -> stamp -> pull by digest gives the same image."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from bandkit import image_push, kitspec
from bandkit.image_facts import SPEC
from bandkit.image_refs import parse_repository
from bandkit.image_run import ImageError, image_id

pytestmark = pytest.mark.docker
REGISTRY_CONFIG = """version: 0.1
storage:
  filesystem:
    rootdirectory: {root}
  delete:
    enabled: true
http:
  addr: {addr}
"""


def _free_loopback_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Debian's docker-registry (distribution 2.8) on a free 127.0.0.1 port, empty storage.

    The daemon treats all of 127.0.0.0/8 as insecure registries, so any port works, and a
    fresh port keeps concurrent runs (or a registry someone left running) out of our way.
    """
    binary = shutil.which("docker-registry")
    if binary is None:
        pytest.fail("docker-registry is missing: apt-get install docker-registry")
    registry_addr = f"127.0.0.1:{_free_loopback_port()}"
    folder = tmp_path_factory.mktemp("registry")
    config = folder / "config.yml"
    config.write_text(REGISTRY_CONFIG.format(root=folder / "data", addr=registry_addr))
    log = (folder / "registry.log").open("wb")
    proc = subprocess.Popen([binary, "serve", str(config)], stdout=log, stderr=log)
    deadline = time.monotonic() + 30
    try:
        while True:
            try:
                answered = httpx.get(f"http://{registry_addr}/v2/", timeout=2).status_code
                if answered == 200 and proc.poll() is None:
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"registry did not start: {(folder / 'registry.log').read_text()}")
            time.sleep(0.1)
        yield f"{registry_addr}/band-python-kit"
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()
        _untag(registry_addr)


def _untag(registry_addr: str) -> None:
    """Drop the local refs naming this registry (push needs them; the layers stay in use)."""
    listed = _docker("image", "ls", "--digests", "--format", "{{.Repository}} {{.Tag}} {{.Digest}}")
    refs = []
    for line in listed.stdout.splitlines():
        repo, tag, digest = line.split()
        if repo.startswith(f"{registry_addr}/"):
            refs.append(f"{repo}:{tag}" if tag != "<none>" else f"{repo}@{digest}")
    if refs:
        _docker("rmi", *refs)


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
