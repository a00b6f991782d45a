"""Build the kit image: `build(BuildRequest)` plans the docker argv and runs it per platform.

Bases: `official` keeps the Dockerfile's digest-pinned defaults; `local` passes the
images `invoke image.bases` made. Multi-arch: each platform is built on its own with the
classic builder (under qemu for a foreign arch) and tagged `<tag>-<arch>`, and
`image.push --arch ...` merges them into one manifest list. A one-command buildx
multi-platform build is not implemented: Debian's Docker here has no buildx, and the
docker-container driver needs an image that cannot be pulled offline. Build CA files are
copied into the git-ignored `build-ca/` folder for the build only, so just the builder
stage trusts them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from bandkit.image_bases import python_tag, uv_tag
from bandkit.image_facts import BUILD_CA_DIR, DOCKERFILE, LOCAL_TAG, REPO_ROOT, host_arch
from bandkit.image_run import ImageError, image_exists, image_id, require_docker

BUILD_TIMEOUT_S = 1800.0
PLATFORM_ARCHES = {"linux/amd64": "amd64", "linux/arm64": "arm64"}
Base = Literal["official", "local"]
Progress = Callable[[str], None]


@dataclass(frozen=True)
class BuildRequest:
    platforms: tuple[str, ...] = ()  # empty: this machine's platform
    tag: str = LOCAL_TAG
    base: Base = "official"
    sdk_extra: str = ""
    build_ca: tuple[Path, ...] = ()
    build_args: tuple[tuple[str, str], ...] = ()  # extra ARGs (e.g. BAND_SDK_HOME)
    no_cache: bool = False


@dataclass(frozen=True)
class Built:
    tag: str
    platform: str
    image_id: str
    seconds: float


def arch_of(platform: str) -> str:
    if platform not in PLATFORM_ARCHES:
        known = ", ".join(PLATFORM_ARCHES)
        raise ImageError(f"image.build: unsupported platform {platform!r}; use one of {known}")
    return PLATFORM_ARCHES[platform]


def platforms_of(request: BuildRequest) -> tuple[str, ...]:
    return request.platforms or (f"linux/{host_arch()}",)


def tag_for(request: BuildRequest, platform: str) -> str:
    """The single-platform build keeps the tag; a multi-platform one suffixes `-<arch>`."""
    if len(platforms_of(request)) == 1:
        return request.tag
    return f"{request.tag}-{arch_of(platform)}"


def build_args(request: BuildRequest, platform: str) -> list[tuple[str, str]]:
    args: list[tuple[str, str]] = []
    if request.base == "local":
        arch = arch_of(platform)
        args += [("PYTHON_BASE_IMAGE", python_tag(arch)), ("UV_IMAGE", uv_tag(arch))]
    if request.sdk_extra:
        args.append(("SDK_EXTRA", request.sdk_extra))
    return args + list(request.build_args)


def docker_build_argv(request: BuildRequest, platform: str) -> list[str]:
    """argv (after `docker`) for one platform with the classic builder."""
    argv = ["build", "--file", str(DOCKERFILE), "--tag", tag_for(request, platform)]
    argv += [f"--platform={platform}"]
    for name, value in build_args(request, platform):
        argv += ["--build-arg", f"{name}={value}"]
    if request.no_cache:
        argv.append("--no-cache")
    return [*argv, str(REPO_ROOT)]


def _check_bases(request: BuildRequest) -> None:
    if request.base != "local":
        return
    for platform in platforms_of(request):
        for ref in (python_tag(arch_of(platform)), uv_tag(arch_of(platform))):
            if not image_exists(ref):
                raise ImageError(
                    f"image.build: local base {ref} is missing; run "
                    f"`uv run invoke image.bases --arch {arch_of(platform)}` first"
                )


def _stage_build_ca(files: Sequence[Path]) -> list[Path]:
    staged = []
    for index, src in enumerate(files):
        if not src.is_file():
            raise ImageError(f"image.build: build CA file not found: {src}")
        dest = BUILD_CA_DIR / f"bandkit-build-ca-{index}.crt"
        shutil.copyfile(src, dest)
        staged.append(dest)
    return staged


def _run_streaming(argv: list[str], progress: Progress) -> None:
    """Run `docker build`, forwarding each `Step N/M` line; fail with the output tail."""
    env = {**os.environ, "DOCKER_BUILDKIT": "0"}
    tail: list[str] = []
    with subprocess.Popen(
        ["docker", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            tail = [*tail[-11:], line.rstrip()]
            if line.startswith("Step "):
                progress(f"image.build: {line.rstrip()[:120]}")
        code = proc.wait(timeout=BUILD_TIMEOUT_S)
    if code != 0:
        raise ImageError("image.build: docker build failed:\n" + "\n".join(tail))


def build(request: BuildRequest, progress: Progress = print) -> list[Built]:
    """Build the image for each requested platform; return what was built."""
    require_docker("image.build")
    for platform in platforms_of(request):
        arch_of(platform)
    _check_bases(request)
    staged = _stage_build_ca(request.build_ca)
    built = []
    try:
        for platform in platforms_of(request):
            start = time.monotonic()
            progress(f"image.build: {platform} -> {tag_for(request, platform)}")
            _run_streaming(docker_build_argv(request, platform), progress)
            tag = tag_for(request, platform)
            built.append(Built(tag, platform, image_id(tag), time.monotonic() - start))
    finally:
        for path in staged:
            path.unlink(missing_ok=True)
    return built
