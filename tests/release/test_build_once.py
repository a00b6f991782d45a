"""Which attestations a release build asks for, and what the summary says it got."""

from __future__ import annotations

from dataclasses import replace

import pytest

from bandkit.dockercli import ImageError
from bandkit.image import build as image_build
from bandkit.release import build_once
from tests.release.fakes import settings

S = settings()


def fake_build(platforms: tuple[str, ...]) -> object:
    def build(request: image_build.BuildRequest, progress: object) -> list[image_build.Built]:
        assert request.platforms == ("linux/amd64", "linux/arm64")
        assert request.attest == ("--provenance=mode=max", "--sbom=true")
        return [image_build.Built(request.tag, p, "sha256:x", 1.0) for p in platforms]

    return build


def test_buildx_attaches_provenance_and_sbom(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(image_build, "build", fake_build(("linux/amd64,linux/arm64",)))
    source = build_once.build(S, print)
    assert source.arches == ()
    assert source.attestations == "buildx: provenance=mode=max, sbom=true"


def test_the_per_arch_path_says_it_cannot_attest(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(image_build, "build", fake_build(("linux/amd64", "linux/arm64")))
    source = build_once.build(S, print)
    assert source.arches == ("amd64", "arm64")
    assert source.attestations.startswith("not attached: the per-arch path's classic builder")


def test_an_sbom_generator_out_of_reach_names_the_way_out(monkeypatch: pytest.MonkeyPatch) -> None:
    def offline(request: image_build.BuildRequest, progress: object) -> list[image_build.Built]:
        raise ImageError("docker buildx failed:\npull docker/buildkit-syft-scanner:stable-1: EOF")

    monkeypatch.setattr(image_build, "build", offline)
    with pytest.raises(ImageError, match="INVOKE_RELEASE_SBOM=0"):
        build_once.build(S, print)
    assert build_once.attest_flags(replace(S, sbom=False)) == ("--provenance=mode=max",)
    assert build_once.attest_flags(replace(S, sbom=False, provenance=False)) == ()
