"""Builder detection and the two build plans, on outputs recorded from real daemons.

Recorded 2026-11-30 on this machine (tests/image/data/):
- `*_side`: the side daemon (`invoke image.builder`: Debian trixie docker.io 26.1.5 with
  the containerd image store, docker-buildx 0.13.1, qemu for arm64);
- `*_main`: bookworm's docker.io 20.10.24 daemon, inspected through the same buildx plugin;
- `version_none.txt`: `docker buildx version` of the static docker 28.2.2 CLI without
  the plugin (exit 1).
On the main daemon the plugin's own answer to a two-platform build was "Multi-platform
build is not supported for the docker driver. Switch to a different driver, or turn on
the containerd image store".
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bandkit.dockercli import ImageError
from bandkit.image import build as image_build
from bandkit.image import buildx as image_buildx
from bandkit.image import buildx_bases as image_buildx_bases
from bandkit.image.buildx import BuilderFacts, decide
from bandkit.image.facts import DOCKERFILE, REPO_ROOT, host_arch, official_suite

DATA = Path(__file__).parent / "data"
BOTH = ("linux/amd64", "linux/arm64")


def recorded(daemon: str) -> BuilderFacts:
    version = (DATA / f"version_{daemon}.txt").read_text()
    buildx = image_buildx.parse_version(1 if daemon == "none" else 0, version)
    if buildx is None:
        return BuilderFacts(None)
    driver, status, platforms = image_buildx.parse_inspect(
        (DATA / f"inspect_{daemon}.txt").read_text()
    )
    store = image_buildx.parse_driver_status((DATA / f"driver_status_{daemon}.json").read_text())
    return BuilderFacts(buildx, driver, status, platforms, store)


def test_the_side_daemon_builds_both_platforms_in_one_command() -> None:
    facts = recorded("side")
    assert facts.driver == "docker"
    assert facts.status == "running"
    assert "linux/arm64" in facts.platforms
    assert facts.containerd_store
    verdict = decide(facts, BOTH)
    assert verdict.multi
    assert "0.13.1" in verdict.reason
    assert "containerd image store" in verdict.reason


def test_bookworm_docker_with_buildx_has_no_containerd_store() -> None:
    facts = recorded("main")
    assert facts.buildx is not None
    assert not facts.containerd_store
    assert "linux/arm64" in facts.platforms
    verdict = decide(facts, BOTH)
    assert not verdict.multi
    assert "no containerd image store" in verdict.reason
    assert "docker driver builds one platform at a time" in verdict.reason


def test_no_buildx_plugin() -> None:
    assert "unknown command" in (DATA / "version_none.txt").read_text()
    verdict = decide(recorded("none"), BOTH)
    assert not verdict.multi
    assert verdict.reason.startswith("no buildx plugin")


def test_a_missing_platform_names_qemu() -> None:
    facts = recorded("side")
    amd64_only = BuilderFacts(facts.buildx, facts.driver, facts.status, ("linux/amd64",), True)
    verdict = decide(amd64_only, BOTH)
    assert not verdict.multi
    assert "lacks linux/arm64" in verdict.reason
    assert "qemu-user-static" in verdict.reason


def test_platform_variants_count_and_other_drivers_need_the_store() -> None:
    container = BuilderFacts("github.com/docker/buildx v0.20.0 abc", "docker-container", "running",
                             ("linux/amd64", "linux/arm64/v8"), False)  # fmt: skip
    verdict = decide(container, BOTH)
    assert not verdict.multi
    assert "docker-container driver could not --load" in verdict.reason
    with_store = BuilderFacts(*[getattr(container, f) for f in ("buildx", "driver", "status",
                                                                  "platforms")], True)  # fmt: skip
    assert decide(with_store, BOTH).multi


def test_an_unusable_builder_is_reported() -> None:
    broken = BuilderFacts("github.com/docker/buildx 0.13.1", inspect_error="no builder found")
    verdict = decide(broken, BOTH)
    assert not verdict.multi
    assert "no builder found" in verdict.reason


@pytest.mark.parametrize(
    ("text", "expected"),
    [("", False), ("not json", False), ("null", False), ('[["driver-type","x"]]', False)],
)
def test_driver_status_parsing_fails_safe(text: str, expected: bool) -> None:
    assert image_buildx.parse_driver_status(text) is expected


def test_buildx_plan_is_one_command_for_every_platform() -> None:
    request = image_build.BuildRequest(
        platforms=BOTH, tag="kit:multi", base="local", sdk_extra="logging"
    )
    argv = image_build.buildx_argv(request, host_network=True)
    assert argv[:3] == ["buildx", "build", "--progress=plain"]
    assert argv[argv.index("--platform") + 1] == "linux/amd64,linux/arm64"
    assert argv[argv.index("--tag") + 1] == "kit:multi"
    assert argv[argv.index("--file") + 1] == str(DOCKERFILE)
    assert "--load" in argv
    assert "--network=host" in argv
    build_args = [argv[i + 1] for i, a in enumerate(argv) if a == "--build-arg"]
    assert build_args == [
        f"PYTHON_BASE_IMAGE={image_buildx_bases.python_multi_tag()}",
        f"UV_IMAGE={image_buildx_bases.uv_multi_tag()}",
        "SDK_EXTRA=logging",
    ]
    assert argv[-1] == str(REPO_ROOT)
    official = image_build.BuildRequest(platforms=BOTH, no_cache=True)
    plain = image_build.buildx_argv(official, host_network=False)
    assert "--network=host" not in plain
    assert "--build-arg" not in plain
    assert "--no-cache" in plain


def test_the_per_arch_plan_keeps_per_arch_tags_and_bases() -> None:
    request = image_build.BuildRequest(platforms=BOTH, tag="kit:multi", base="local")
    argv = image_build.docker_build_argv(request, "linux/arm64")
    assert argv[argv.index("--tag") + 1] == "kit:multi-arm64"
    # A cross-build: the local base sets the platform, the builder stage runs on this one's.
    assert not any(a.startswith("--platform") for a in argv)
    assert f"BUILDER_PLATFORM=linux/{host_arch()}" in argv
    assert f"BUILDER_PYTHON_IMAGE=local/debian-python:{official_suite()}" in argv
    assert "TARGETARCH=arm64" in argv
    suffix = "" if host_arch() == "arm64" else "-arm64"
    assert f"PYTHON_BASE_IMAGE=local/debian-python:{official_suite()}{suffix}" in argv


def test_the_per_arch_plan_on_official_bases_emulates_its_builder_stage() -> None:
    """The classic builder refuses a copy between stages of two platforms once given
    `--platform` (which picks an official base's variant): the builder runs on the image's."""
    request = image_build.BuildRequest(platforms=BOTH, tag="kit:multi")
    argv = image_build.docker_build_argv(request, "linux/arm64")
    assert "--platform=linux/arm64" in argv
    assert "BUILDER_PLATFORM=linux/arm64" in argv
    assert not any(a.startswith(("BUILDER_PYTHON_IMAGE=", "BUILDER_UV_IMAGE=")) for a in argv)


def test_multi_base_dockerfile_picks_the_stage_by_targetarch() -> None:
    text = image_buildx_bases.index_dockerfile({"amd64": "b:x", "arm64": "b:x-arm64"})
    assert text.splitlines() == [
        "FROM b:x AS base-amd64",
        "FROM b:x-arm64 AS base-arm64",
        "FROM base-$TARGETARCH",
    ]


def test_path_choice_is_printed_and_forcing_buildx_fails_cleanly(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(image_buildx, "probe", lambda: recorded("main"))
    lines: list[str] = []
    request = image_build.BuildRequest(platforms=BOTH)
    assert image_build.choose_path(request, lines.append) is None
    assert lines == [
        "image.build: per-arch path: the daemon has no containerd image store "
        "(the docker driver builds one platform at a time without it)",
        f"image.build: {image_build.BUILDX_HINT}",
    ]
    forced = image_build.BuildRequest(platforms=BOTH, multi="buildx")
    with pytest.raises(ImageError, match=r"--multi buildx, but no multi-platform builder.*"
                       r"invoke image\.builder"):  # fmt: skip
        image_build.choose_path(forced, lines.append)
    monkeypatch.setattr(image_buildx, "probe", lambda: recorded("side"))
    assert image_build.choose_path(request, lines.append) == recorded("side")
    assert lines[-1] == (
        "image.build: buildx path: buildx 0.13.1+ds1 with the docker driver and the containerd "
        "image store builds linux/amd64, linux/arm64 in one command"
    )
    one = image_build.BuildRequest(platforms=("linux/amd64",), multi="buildx")
    assert image_build.choose_path(one, lines.append) is None  # one platform: classic
    per_arch = image_build.BuildRequest(platforms=BOTH, multi="per-arch")
    assert image_build.choose_path(per_arch, lines.append) is None
    assert lines[-1] == "image.build: per-arch path: asked for (--multi per-arch)"
