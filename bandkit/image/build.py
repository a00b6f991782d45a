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
  classic builder and tagged `<tag>-<arch>`, and `image.push --arch ...` merges them into
  one manifest list.

Either way a foreign platform is cross-built where it can be: the Dockerfile's builder
stage runs on this machine's platform and installs the other platform's wheels, so qemu
runs only the runtime stage's one RUN (an arm64 kit image: 166 s emulated, seconds
crossed). The classic builder cannot copy between stages of two platforms when it is
given `--platform`, so it cross-builds on local bases only (single-platform images that
set the image's platform themselves); on official bases its builder stage is emulated.

A single platform always uses the classic builder. Extra CAs (`--build-ca`, else the
host's `SSL_CERT_FILE` / `REQUESTS_CA_BUNDLE`; `image_build_ca`) are staged in the
git-ignored `build-ca/` folder for the build only, so just the builder stage trusts them;
the build says which, and a TLS failure in its output is answered with the remedy.
"""

from __future__ import annotations

import os
import re
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from bandkit.dockercli import ImageError, image_exists, image_id, require_docker
from bandkit.image import build_ca as image_build_ca
from bandkit.image import buildx as image_buildx
from bandkit.image import buildx_bases as image_buildx_bases
from bandkit.image.bases import python_tag, uv_tag
from bandkit.image.facts import DOCKERFILE, LOCAL_TAG, REPO_ROOT, host_arch

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
    build_ca: tuple[Path, ...] = ()  # given: exactly these; empty: the host's (host_ca)
    host_ca: bool = True  # no build_ca: trust SSL_CERT_FILE / REQUESTS_CA_BUNDLE's files
    target: str = ""  # stop at this Dockerfile stage (e.g. "builder", to inspect it)
    build_args: tuple[tuple[str, str], ...] = ()  # extra ARGs (e.g. BAND_SDK_HOME)
    no_cache: bool = False
    multi: Multi = "auto"  # several platforms: buildx when possible, or force one path
    attest: tuple[str, ...] = ()  # buildx only: `--sbom=true`, `--provenance=mode=max`
    dockerfile: Path = DOCKERFILE  # another Dockerfile on the same context (Dockerfile.cli)


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
    if platform is not None and request.dockerfile == DOCKERFILE:
        args += _classic_platform_args(request, arch_of(platform))
    if request.sdk_extra:
        args.append(("SDK_EXTRA", request.sdk_extra))
    return args + list(request.build_args)


def _classic_platform_args(request: BuildRequest, arch: str) -> list[tuple[str, str]]:
    """What BuildKit would set for the kit Dockerfile's builder stage, for the classic
    builder. Local bases are single-platform images: the builder stage runs on this
    machine's platform from its own local bases and installs the image platform's wheels
    (a cross-build, no emulated uv or Python). With official bases the classic builder
    cannot copy between stages of two platforms, so the builder runs on the image's
    platform (emulated for a foreign one)."""
    if not _cross(request):
        return [("BUILDER_PLATFORM", f"linux/{arch}"), ("TARGETARCH", arch)]
    host = host_arch()
    return [
        ("BUILDER_PLATFORM", f"linux/{host}"),
        ("BUILDER_PYTHON_IMAGE", python_tag(host)),
        ("BUILDER_UV_IMAGE", uv_tag(host)),
        ("TARGETARCH", arch),
    ]


def _cross(request: BuildRequest) -> bool:
    """Does a classic build of `request` run its builder stage on this machine's platform?"""
    return request.base == "local" and request.dockerfile == DOCKERFILE


def docker_build_argv(request: BuildRequest, platform: str) -> list[str]:
    """argv (after `docker`) for one platform with the classic builder. A cross-build
    names no `--platform`: the classic builder would then refuse to copy from the builder
    stage (another platform's), and the single-platform local bases already set the
    image's."""
    argv = ["build", "--file", str(request.dockerfile), "--tag", tag_for(request, platform)]
    argv += [] if _cross(request) else [f"--platform={platform}"]
    argv += ["--force-rm"]  # a failed step leaves no container
    for name, value in build_args(request, platform):
        argv += ["--build-arg", f"{name}={value}"]
    return [*argv, *_common_flags(request), str(REPO_ROOT)]


def _common_flags(request: BuildRequest) -> list[str]:
    return (["--target", request.target] if request.target else []) + (
        ["--no-cache"] if request.no_cache else []
    )


def buildx_argv(request: BuildRequest, *, host_network: bool) -> list[str]:
    """argv (after `docker`) for one multi-platform buildx build loaded under the tag."""
    argv = ["buildx", "build", "--progress=plain", "--file", str(request.dockerfile)]
    argv += ["--platform", ",".join(platforms_of(request)), "--tag", request.tag, "--load"]
    if host_network:
        argv.append("--network=host")
    argv += list(request.attest)
    for name, value in build_args(request, None):
        argv += ["--build-arg", f"{name}={value}"]
    return [*argv, *_common_flags(request), str(REPO_ROOT)]


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
            f"--multi buildx, but no multi-platform builder: {verdict.reason}; " + BUILDX_HINT
        )
    progress(f"image.build: per-arch path: {verdict.reason}")
    progress(f"image.build: {BUILDX_HINT}")
    return None


def _check_bases(request: BuildRequest) -> None:
    if request.base != "local":
        return
    arches = {arch_of(platform) for platform in platforms_of(request)}
    if _cross(request):
        arches.add(host_arch())  # the builder stage's
    for arch in sorted(arches):
        for ref in (python_tag(arch), uv_tag(arch)):
            if not image_exists(ref):
                raise ImageError(
                    f"local base {ref} is missing; run "
                    f"`uv run invoke image.bases --arch {arch}` first"
                )


def builder_cas(request: BuildRequest, progress: Progress) -> list[image_build_ca.CaFile]:
    """The CA files the builder stage gets; progress says which (and what was ignored)."""
    environ = os.environ if request.host_ca else {}
    cas, notes = image_build_ca.resolve(request.build_ca, environ)
    for note in notes:
        progress(f"image.build: {note}")
    progress(f"image.build: {image_build_ca.trust_line(cas)}")
    return cas


def _step_line(line: str, seen: set[str]) -> bool:
    """A classic `Step N/M` line, or the first header line of a BuildKit step `#N [...]`."""
    if line.startswith("Step "):
        return True
    match = _BUILDX_STEP.match(line)
    if match is None or match[1] in seen:
        return False
    seen.add(match[1])
    return True


def _run_streaming(
    argv: list[str],
    progress: Progress,
    cas: Sequence[image_build_ca.CaFile] = (),
    *,
    timeout_s: float = BUILD_TIMEOUT_S,
) -> None:
    """Run a docker build, forwarding each step line; fail with the output tail, or with
    the remedy when the output shows a certificate the builder could not verify."""
    env = {**os.environ, "DOCKER_BUILDKIT": "0"}
    tail: list[str] = []
    seen: set[str] = set()
    tls: str | None = None
    with subprocess.Popen(
        ["docker", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    ) as proc:
        # The deadline holds while output streams: a hung build is killed, which closes
        # its output and ends the loop below (a wait after EOF alone would never come).
        fired = threading.Event()

        def expire() -> None:
            fired.set()
            proc.kill()

        watchdog = threading.Timer(timeout_s, expire)
        watchdog.start()
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                tail = [*tail[-11:], line.rstrip()]
                tls = tls or image_build_ca.tls_failure([line])
                if _step_line(line, seen):
                    progress(f"image.build: {line.rstrip()[:120]}")
            code = proc.wait()
        finally:
            watchdog.cancel()
    if fired.is_set():
        raise ImageError(
            f"docker {argv[0]} did not finish within {timeout_s:.0f}s and was stopped; "
            "check the daemon (`docker info`) and re-run"
        )
    if code != 0 and tls is not None:
        bundle = image_build_ca.system_bundle()
        raise image_build_ca.BuildTlsError(image_build_ca.tls_remedy(tls, cas, bundle))
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
    cas = builder_cas(request, progress)
    built = []
    with image_build_ca.staged(cas):
        for platform in platforms_of(request):
            start = time.monotonic()
            progress(f"image.build: {platform} -> {tag_for(request, platform)}")
            _run_streaming(docker_build_argv(request, platform), progress, cas)
            tag = tag_for(request, platform)
            built.append(Built(tag, platform, image_id(tag), time.monotonic() - start))
    return built


def _build_buildx(
    request: BuildRequest, facts: image_buildx.BuilderFacts, progress: Progress
) -> Built:
    """One buildx build of every platform; the tag names a multi-platform image."""
    platforms = platforms_of(request)
    if request.base == "local":
        image_buildx_bases.ensure_multi_bases([arch_of(p) for p in platforms], progress)
    cas = builder_cas(request, progress)
    start = time.monotonic()
    progress(f"image.build: {','.join(platforms)} -> {request.tag}")
    with image_build_ca.staged(cas):
        argv = buildx_argv(request, host_network=facts.driver == "docker")
        _run_streaming(argv, progress, cas)
    seconds = time.monotonic() - start
    return Built(request.tag, ",".join(platforms), image_id(request.tag), seconds)
