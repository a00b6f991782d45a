"""Kit image benchmark: ours against an upstream-like image, on the same local bases.

Measures image size (and the layers that carry it), cold and fully cached build time,
`docker run` start with and without `PROXY_CA_CERT_B64`, the CA step alone, shipped
bytecode and what its absence costs, and `docker run` to the echo agent's first line.

The upstream-like image is built from `upstream_kit/`, a reconstruction of the upstream
Dockerfile and entrypoint from the feature inventory (the real files cannot be fetched
offline); it is not upstream's file. The figures measured once for the real upstream image
on another machine of the same kind (`MEASURED_UPSTREAM` below) are printed too.
Needs a Docker daemon; without one it prints a single skip line.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bandkit.bench import docker_ok, quick
from bandkit.bench import image_probe as probe
from bandkit.dockercli import docker
from bandkit.image import bases as image_bases
from bandkit.image import build as image_build
from bandkit.image.facts import SDK_PROJECT, host_arch

TAG = "band-python-kit:bench"
UPSTREAM_TAG = "band-python-kit:bench-upstream-like"
UPSTREAM_DIR = Path(__file__).parent / "upstream_kit"
SKIP = "image: skipped: no Docker daemon answers (`uv run invoke ci.prepare --lane docker_tests`)"
# The real upstream image on the same bases, measured 2026-11-30 on a machine of this kind.
MEASURED_UPSTREAM = (
    "image: upstream as measured (reference): 505 MB; cold build 15.4s (legacy builder), "
    "cached 0.26s; docker run true 0.27s, with CA 1.2s; no .pyc (about +0.3s per start); "
    "docker run -> first line 2.7 to 3.1s warm with CA"
)


def run() -> list[str]:
    if not docker_ok():
        return [SKIP]
    arch = host_arch()
    lines = [f"image: bases {', '.join(image_bases.ensure_bases((arch,)))}"]
    base = image_bases.python_tag(arch)
    for label, build in (("ours", _build_ours), ("upstream-like", _build_upstream_like)):
        if quick():  # one build on the cache as it is
            lines.append(
                f"image: {label}: build (quick: one, cache as it is) {_timed(build, False):.1f}s"
            )
            continue
        # The first rebuild after a --no-cache build re-runs some steps with the classic
        # builder; the second is the fully cached figure.
        cold, rebuild, cached = _timed(build, True), _timed(build, False), _timed(build, False)
        lines.append(
            f"image: {label}: build cold {cold:.1f}s, first rebuild {rebuild:.1f}s, "
            f"fully cached {cached:.2f}s"
        )
    lines += _sizes(base)
    bare = probe.bare_run(base)
    for label, tag in (("ours", TAG), ("upstream-like", UPSTREAM_TAG)):
        plain, with_ca = probe.start(tag, with_ca=False), probe.start(tag, with_ca=True)
        lines.append(
            f"image: {label}: docker run true {plain:.2f}s, with PROXY_CA_CERT_B64 "
            f"{with_ca:.2f}s (bare base {bare:.2f}s); CA step in-container "
            f"{probe.ca_step(tag) * 1000:.0f} ms (target <= 100 ms)"
        )
    lines += _bytecode()
    lines += _first_lines(bare)
    lines.append(MEASURED_UPSTREAM)
    return lines


def _timed(build: Callable[[bool], None], no_cache: bool) -> float:
    start = time.monotonic()
    build(no_cache)
    return time.monotonic() - start


def _build_ours(no_cache: bool) -> None:
    request = image_build.BuildRequest(
        tag=TAG,
        base="local",
        build_ca=(probe.HOST_BUNDLE,) if probe.HOST_BUNDLE.is_file() else (),
        no_cache=no_cache,
    )
    image_build.build(request, progress=lambda _line: None)


def _build_upstream_like(no_cache: bool) -> None:
    """The reconstruction, in a context of its own: its files, our SDK lock, the build CA."""
    arch = host_arch()
    with tempfile.TemporaryDirectory(prefix="bandkit-upstream-like-") as tmp:
        context = Path(tmp)
        for name in ("Dockerfile", "entrypoint.sh"):
            shutil.copy2(UPSTREAM_DIR / name, context / name)
        for name in ("pyproject.toml", "uv.lock"):
            shutil.copy2(SDK_PROJECT / name, context / name)
        (context / "build-ca").mkdir()
        if probe.HOST_BUNDLE.is_file():
            shutil.copy2(probe.HOST_BUNDLE, context / "build-ca" / "host.crt")
        argv = ["build", "--tag", UPSTREAM_TAG]
        argv += ["--build-arg", f"PYTHON_BASE_IMAGE={image_bases.python_tag(arch)}"]
        argv += ["--build-arg", f"UV_IMAGE={image_bases.uv_tag(arch)}"]
        argv += ["--no-cache"] if no_cache else []
        docker([*argv, str(context)], 1800, env={"DOCKER_BUILDKIT": "0"})


def _sizes(base_tag: str) -> list[str]:
    base = probe.size_mb(base_tag)
    lines = []
    for label, tag in (("ours", TAG), ("upstream-like", UPSTREAM_TAG)):
        total = probe.size_mb(tag)
        layers = ", ".join(f"{mb:.0f} MB {what}" for mb, what in probe.layers_mb(tag)[:4])
        lines.append(
            f"image: {label}: {total:.0f} MB = base {base:.0f} MB + {total - base:.0f} MB "
            f"(largest layers: {layers})"
        )
    lines.append(f"image: target for ours: base + 60 MB = {base + 60:.0f} MB")
    parts = probe.sdk_parts_mb(TAG)
    without_uv = probe.size_mb(TAG) - parts["uv"]
    lines.append(
        "image: ours, what the SDK home adds: "
        + ", ".join(f"{name} {mb:.1f} MB" for name, mb in parts.items())
        + f"; without the pinned uv binary the image would be {without_uv:.0f} MB"
    )
    return lines


def _bytecode() -> list[str]:
    lines = []
    for label, tag, module in (
        ("ours", TAG, "launcher"),
        ("upstream-like", UPSTREAM_TAG, "band.docker.launcher"),
    ):
        shipped = probe.import_time(tag, module)
        hidden = probe.import_time(tag, module, hide_pyc=True)
        lines.append(
            f"image: {label}: {probe.pyc_count(tag)} .pyc in the SDK venv; fresh-container "
            f"`import band, {module}` {shipped:.2f}s (with every module compiled at start: "
            f"{hidden:.2f}s)"
        )
    return lines


def _first_lines(bare: float) -> list[str]:
    lines = []
    for label, tag, module in (
        ("ours", TAG, "launcher"),
        ("upstream-like", UPSTREAM_TAG, "band.docker.launcher"),
    ):
        cold, warm = probe.first_line(tag, module)
        lines.append(
            f"image: {label}: docker run -> echo agent first line, CA set: cold {cold:.2f}s, "
            f"warm {warm:.2f}s = bare docker run {bare:.2f}s + {warm - bare:.2f}s "
            "(target for ours <= 0.8s)"
        )
    return lines
