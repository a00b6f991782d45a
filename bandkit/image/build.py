"""Build the kit image: `build(BuildRequest)` plans the docker argv and runs it.

Bases: `official` keeps the Dockerfile's digest-pinned defaults; `local` passes the
images `invoke image.bases` made. Several platforms take one of two paths, and the
progress output names the one taken and why (`image_buildx.decide`):

- buildx: when the selected Docker has a multi-platform builder (buildx + the containerd
  image store; `invoke image.builder` starts one here), one `docker buildx build
  --platform a,b --load` makes one multi-platform image under the tag, which
  `image.push` pushes as an index. Local bases become multi-platform ones first
  (`image_buildx_bases`). With the `docker` driver the build uses the daemon's host
  network (the side builder's bridge has no NAT).
- per-arch (otherwise, or `multi="per-arch"`): each platform is built on its own with the
  classic builder (under qemu for a foreign arch) and tagged `<tag>-<arch>`, and
  `image.push --arch ...` merges them into one manifest list.

A single platform always uses the classic builder. Build CA files are copied into the
git-ignored `build-ca/` folder for the build only, so just the builder stage trusts them.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from bandkit.dockercli import ImageError, image_exists, image_id, require_docker
from bandkit.image import buildx as image_buildx
from bandkit.image import buildx_bases as image_buildx_bases
from bandkit.image.bases import python_tag, uv_tag
from bandkit.image.facts import BUILD_CA_DIR, DOCKERFILE, LOCAL_TAG, REPO_ROOT, host_arch

BUILD_TIMEOUT_S = 1800.0
BUILDX_HINT = (
    "for one buildx command, start a builder with `uv run invoke image.builder` "
    "and export what it prints"
)
PLATFORM_ARCHES = {"linux/amd64": "amd64", "linux/arm64": "arm64"}
Base = Literal["official", "local"]
Multi = Literal["auto", "buildx", "per-arch"]
_BUILDX_STEP = re.compile(r"^#(\d+) \[")
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
    multi: Multi = "auto"  # several platforms: buildx when possible, or force one path


BASES: tuple[Base, ...] = ("official", "local")
MULTIS: tuple[Multi, ...] = ("auto", "buildx", "per-arch")


def request_from_options(
    *,
    platforms: Sequence[str],
    tag: str,
    base: str,
    sdk_extra: str,
    build_ca: Sequence[str],
    no_cache: bool,
    multi: str,
) -> BuildRequest:
    """A BuildRequest from command-line strings; a bad choice names the flag and the choices."""
    chosen_base = next((b for b in BASES if b == base), None)
    if chosen_base is None:
        raise ImageError(f"--base must be {' or '.join(BASES)}, got {base!r}")
    chosen_multi = next((m for m in MULTIS if m == multi), None)
    if chosen_multi is None:
        raise ImageError(f"--multi must be {', '.join(MULTIS)}, got {multi!r}")
    for platform in platforms:
        arch_of(platform)
    return BuildRequest(
        platforms=tuple(platforms),
        tag=tag,
        base=chosen_base,
        sdk_extra=sdk_extra,
        build_ca=tuple(Path(p) for p in build_ca),
        no_cache=no_cache,
        multi=chosen_multi,
    )


@dataclass(frozen=True)
class Built:
    tag: str
    platform: str
    image_id: str
    seconds: float


def arch_of(platform: str) -> str:
    if platform not in PLATFORM_ARCHES:
        known = ", ".join(PLATFORM_ARCHES)
        raise ImageError(f"unsupported platform {platform!r}; use one of {known}")
    return PLATFORM_ARCHES[platform]


def platforms_of(request: BuildRequest) -> tuple[str, ...]:
    return request.platforms or (f"linux/{host_arch()}",)


def tag_for(request: BuildRequest, platform: str) -> str:
    """The single-platform build keeps the tag; a multi-platform one suffixes `-<arch>`."""
    if len(platforms_of(request)) == 1:
        return request.tag
    return f"{request.tag}-{arch_of(platform)}"


def build_args(request: BuildRequest, platform: str | None) -> list[tuple[str, str]]:
    """Build args for one platform, or (None) for every platform of one buildx build."""
    args: list[tuple[str, str]] = []
    if request.base == "local" and platform is None:
        python, uv = image_buildx_bases.python_multi_tag(), image_buildx_bases.uv_multi_tag()
        args += [("PYTHON_BASE_IMAGE", python), ("UV_IMAGE", uv)]
    elif request.base == "local" and platform is not None:
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


def buildx_argv(request: BuildRequest, *, host_network: bool) -> list[str]:
    """argv (after `docker`) for one multi-platform buildx build loaded under the tag."""
    argv = ["buildx", "build", "--progress=plain", "--file", str(DOCKERFILE)]
    argv += ["--platform", ",".join(platforms_of(request)), "--tag", request.tag, "--load"]
    if host_network:
        argv.append("--network=host")
    for name, value in build_args(request, None):
        argv += ["--build-arg", f"{name}={value}"]
    if request.no_cache:
        argv.append("--no-cache")
    return [*argv, str(REPO_ROOT)]


def choose_path(request: BuildRequest, progress: Progress) -> image_buildx.BuilderFacts | None:
    """The builder facts when the buildx path is taken, else None (progress says why)."""
    platforms = platforms_of(request)
    if len(platforms) == 1:
        return None
    if request.multi == "per-arch":
        progress("image.build: per-arch path: asked for (--multi per-arch)")
        return None
    facts = image_buildx.probe()
    verdict = image_buildx.decide(facts, platforms)
    if verdict.multi:
        progress(f"image.build: buildx path: {verdict.reason}")
        return facts
    if request.multi == "buildx":
        raise ImageError(
            f"--multi buildx, but no multi-platform builder: {verdict.reason}; "
            + BUILDX_HINT
        )
    progress(f"image.build: per-arch path: {verdict.reason}")
    progress(f"image.build: {BUILDX_HINT}")
    return None


def _check_bases(request: BuildRequest) -> None:
    if request.base != "local":
        return
    for platform in platforms_of(request):
        for ref in (python_tag(arch_of(platform)), uv_tag(arch_of(platform))):
            if not image_exists(ref):
                raise ImageError(
                    f"local base {ref} is missing; run "
                    f"`uv run invoke image.bases --arch {arch_of(platform)}` first"
                )


def _stage_build_ca(files: Sequence[Path]) -> list[Path]:
    staged = []
    for index, src in enumerate(files):
        if not src.is_file():
            raise ImageError(f"build CA file not found: {src}")
        dest = BUILD_CA_DIR / f"bandkit-build-ca-{index}.crt"
        shutil.copyfile(src, dest)
        staged.append(dest)
    return staged


def _step_line(line: str, seen: set[str]) -> bool:
    """A classic `Step N/M` line, or the first header line of a BuildKit step `#N [...]`."""
    if line.startswith("Step "):
        return True
    match = _BUILDX_STEP.match(line)
    if match is None or match[1] in seen:
        return False
    seen.add(match[1])
    return True


def _run_streaming(argv: list[str], progress: Progress) -> None:
    """Run a docker build, forwarding each step line; fail with the output tail."""
    env = {**os.environ, "DOCKER_BUILDKIT": "0"}
    tail: list[str] = []
    seen: set[str] = set()
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
            if _step_line(line, seen):
                progress(f"image.build: {line.rstrip()[:120]}")
        code = proc.wait(timeout=BUILD_TIMEOUT_S)
    if code != 0:
        raise ImageError(f"docker {argv[0]} failed:\n" + "\n".join(tail))


def build(request: BuildRequest, progress: Progress = print) -> list[Built]:
    """Build the image for each requested platform; return what was built."""
    require_docker("image.build")
    for platform in platforms_of(request):
        arch_of(platform)
    facts = choose_path(request, progress)
    if facts is not None:
        return [_build_buildx(request, facts, progress)]
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


def _build_buildx(
    request: BuildRequest, facts: image_buildx.BuilderFacts, progress: Progress
) -> Built:
    """One buildx build of every platform; the tag names a multi-platform image."""
    platforms = platforms_of(request)
    if request.base == "local":
        image_buildx_bases.ensure_multi_bases([arch_of(p) for p in platforms], progress)
    staged = _stage_build_ca(request.build_ca)
    start = time.monotonic()
    progress(f"image.build: {','.join(platforms)} -> {request.tag}")
    try:
        _run_streaming(buildx_argv(request, host_network=facts.driver == "docker"), progress)
    finally:
        for path in staged:
            path.unlink(missing_ok=True)
    seconds = time.monotonic() - start
    return Built(request.tag, ",".join(platforms), image_id(request.tag), seconds)
