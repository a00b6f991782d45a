"""Multi-arch images end to end: both build paths, pushed to a registry, run as arm64.

- buildx: the side builder (`invoke image.builder`: trixie dockerd with the containerd
  image store) builds linux/amd64 + linux/arm64 from the real kit Dockerfile on the local
  bases in ONE `docker buildx build`, `image.push` pushes the index;
- per-arch: the main daemon builds `<tag>-<arch>` with the classic builder and
  `image.push --arch` merges them into one manifest list.
Either way the registry lists both platforms, and the main daemon pulls the arm64 image
by digest and runs `$BAND_SDK_PYTHON -c 'import band, launcher'` under qemu as uid 1000.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator

import httpx
import pytest

from bandkit.image import bases as image_bases
from bandkit.image import build as image_build
from bandkit.image import builder as sidedocker
from bandkit.image import push as image_push
from bandkit.image.facts import host_arch
from bandkit.image.push import MANIFEST_ACCEPT
from bandkit.image.refs import parse_repository
from bandkit.image.registry import local_registry
from tests.support.images import BUILD_CA

pytestmark = [pytest.mark.docker, pytest.mark.timeout(1800)]
BOTH = ("linux/amd64", "linux/arm64")
PROBE = "import band, launcher, os, platform; print(platform.machine(), os.getuid())"


def _docker(*argv: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["docker", *argv], capture_output=True, text=True, check=False, timeout=timeout
    )


@pytest.fixture(scope="module")
def bases() -> None:
    """Per-arch local bases on the main daemon (arm64 debootstraps under qemu once)."""
    if shutil.which("docker") is None:
        if os.environ.get("CI"):
            pytest.fail("no docker CLI: `uv run invoke ci.prepare --lane docker_tests`")
        pytest.skip("no docker CLI, so no builder can exist")
    image_bases.ensure_bases(("amd64", "arm64"), progress=lambda _line: None)


@pytest.fixture(scope="module")
def side_env(bases: None) -> Iterator[dict[str, str]]:
    """The side builder, started unless it runs; stopped afterwards only if we started it."""
    where = sidedocker.layout()
    was_running = sidedocker.answers(where)
    sidedocker.up(where, progress=lambda _line: None)
    try:
        yield sidedocker.env(where)
    finally:
        if not was_running:
            sidedocker.down(where)


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A throwaway registry on 127.0.0.1 (tests/docker/registry.py)."""
    with local_registry(tmp_path_factory.mktemp("registry")) as addr:
        yield addr


def _index_platforms(repo: str, digest: str) -> set[str]:
    """The platforms the registry's index (or manifest list) for `digest` lists."""
    parsed = parse_repository(repo)
    response = httpx.get(
        image_push.manifest_url(parsed, digest), headers={"Accept": MANIFEST_ACCEPT}, timeout=30
    )
    assert response.status_code == 200, response.text
    assert response.headers["Docker-Content-Digest"] == digest
    body = response.json()
    assert body["mediaType"] in (
        "application/vnd.oci.image.index.v1+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
    )
    return {f"{m['platform']['os']}/{m['platform']['architecture']}" for m in body["manifests"]}


def _runs_on_both(ref: str) -> None:
    """The main daemon pulls each platform by digest and runs the SDK interpreter."""
    for platform, machine in (("linux/arm64", "aarch64"), ("linux/amd64", "x86_64")):
        pulled = _docker("pull", "--quiet", "--platform", platform, ref)
        assert pulled.returncode == 0, pulled.stderr
        ran = _docker(
            "run",
            "--rm",
            "--platform",
            platform,
            ref,
            "bash",
            "-c",
            f'"$BAND_SDK_PYTHON" -c "{PROBE}"',
        )
        assert ran.returncode == 0, ran.stderr
        assert ran.stdout.split() == [machine, "1000"]
        _docker("rmi", ref)


def test_buildx_builds_both_platforms_in_one_command(
    side_env: dict[str, str], registry: str
) -> None:
    lines: list[str] = []
    request = image_build.BuildRequest(
        platforms=BOTH,
        tag="band-python-kit:multiarch-test",
        base="local",
        build_ca=BUILD_CA,
        multi="buildx",
    )
    repo = f"{registry}/kit-buildx"
    with pytest.MonkeyPatch.context() as patch:
        for name, value in side_env.items():
            patch.setenv(name, value)
        built = image_build.build(request, progress=lines.append)
        pushed = image_push.push(request.tag, repo, ["1.0.0", "latest"], progress=lines.append)
    assert [b.platform for b in built] == ["linux/amd64,linux/arm64"]
    assert any(line.startswith("image.build: buildx path: ") for line in lines)
    assert (
        lines.count("image.build: linux/amd64,linux/arm64 -> band-python-kit:multiarch-test") == 1
    )
    # Steps are forwarded, and the other platform's builder stage ran on this one's (a
    # cross-build: BuildKit names such a step `[linux/<this>-><other> builder ...]`).
    other = next(p for p in BOTH if p != f"linux/{host_arch()}").removeprefix("linux/")
    assert any(f"->{other} builder" in line for line in lines), lines
    assert {"linux/amd64", "linux/arm64"} <= _index_platforms(repo, pushed.digest)
    assert image_push.remote_digest(parse_repository(repo), "latest") == pushed.digest
    _runs_on_both(pushed.by_digest())


def test_per_arch_builds_merge_into_one_manifest_at_push(
    bases: None, arm64_kit_cache: None, registry: str
) -> None:
    lines: list[str] = []
    request = image_build.BuildRequest(
        platforms=BOTH,
        tag="band-python-kit:perarch-test",
        base="local",
        build_ca=BUILD_CA,
        multi="per-arch",
    )
    built = image_build.build(request, progress=lines.append)
    assert [b.tag for b in built] == [f"{request.tag}-amd64", f"{request.tag}-arm64"]
    assert "image.build: per-arch path: asked for (--multi per-arch)" in lines
    repo = f"{registry}/kit-perarch"
    pushed = image_push.push(
        request.tag, repo, ["1.0.0", "latest"], arches=("amd64", "arm64"), progress=lines.append
    )
    assert _index_platforms(repo, pushed.digest) == {"linux/amd64", "linux/arm64"}
    assert image_push.remote_digest(parse_repository(repo), "latest") == pushed.digest
    _runs_on_both(pushed.by_digest())
