"""Multi-arch build benchmark: the side buildx builder against the per-arch fallback.

Measures, for linux/amd64 + linux/arm64 from the kit Dockerfile on the local bases:
side builder setup cold (fetch + unpack trixie's .debs, start dockerd) and warm (start
only), the multi-platform local bases (copied from the main daemon), the one-command
buildx build cold (`--no-cache`) and fully cached, the push of its index to a registry on
127.0.0.1, and the per-arch classic builds on the main daemon, cold and cached, plus the
push that merges them. The side builder here is a private instance (its own home and
run dir), so a running `invoke image.builder` and its cache are left alone.
Needs a Docker daemon, root and the arm64 bases (`invoke image.bases --arch arm64`).
Quick mode runs the per-arch builds once on the cache as it is and their push; the side
builder part is skipped there (a private builder fetches trixie's Docker packages and
builds arm64 from nothing under qemu: minutes, and the network).
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TypeVar

from bandkit.bench import docker_ok, quick
from bandkit.image import bases as image_bases
from bandkit.image import build as image_build
from bandkit.image import builder as sidedocker
from bandkit.image import buildx_bases as image_buildx_bases
from bandkit.image import push as image_push
from bandkit.image.registry import local_registry

BOTH = ("linux/amd64", "linux/arm64")
TAG = "band-python-kit:bench-multi"
BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
SKIP = "image_multiarch: skipped: no Docker daemon answers or not root"
T = TypeVar("T")


def run() -> list[str]:
    if not docker_ok() or os.geteuid() != 0:
        return [SKIP]
    image_bases.ensure_bases(("amd64", "arm64"), progress=lambda _l: None)
    quiet: Callable[[str], None] = lambda _line: None  # noqa: E731
    if quick():
        with _registry() as reg:
            return [
                "image_multiarch: side builder and buildx: skipped in quick mode (fetches "
                "trixie's Docker packages, builds arm64 from nothing under qemu)",
                *_per_arch(reg, quiet),
            ]
    lines = []
    side = tempfile.TemporaryDirectory(prefix="bandkit-bench-side-", ignore_cleanup_errors=True)
    with side as tmp, _registry() as reg:
        where = sidedocker.Layout(Path(tmp) / "home", run=Path(tmp) / "run")
        try:
            _, cold_setup = _timed(lambda: sidedocker.up(where, quiet))
            _, stop = _timed(lambda: sidedocker.down(where))
            _, warm_setup = _timed(lambda: sidedocker.up(where, quiet))
            lines.append(
                f"image_multiarch: side builder setup cold {cold_setup:.1f}s (fetch + unpack "
                f"+ start), warm {warm_setup:.1f}s, stop {stop:.1f}s"
            )
            with _selected(sidedocker.env(where)):
                lines += _buildx(reg, quiet)
        finally:
            sidedocker.down(where)
    with _registry() as reg:
        lines += _per_arch(reg, quiet)
    return lines


def _buildx(registry: str, quiet: Callable[[str], None]) -> list[str]:
    _, bases = _timed(lambda: image_buildx_bases.ensure_multi_bases(["amd64", "arm64"], quiet))
    request = image_build.BuildRequest(
        platforms=BOTH, tag=TAG, base="local", build_ca=(BUNDLE,), multi="buildx"
    )
    cold = _timed(lambda: image_build.build(_no_cache(request), quiet))[1]
    cached = _timed(lambda: image_build.build(request, quiet))[1]
    _, push = _timed(lambda: image_push.push(TAG, f"{registry}/multi", ["1.0.0"], progress=quiet))
    return [
        f"image_multiarch: buildx: local multi-platform bases {bases:.1f}s (copied from the "
        "main daemon, then indexed)",
        f"image_multiarch: buildx: one-command amd64+arm64 build cold {cold:.1f}s, "
        f"cached {cached:.1f}s; push of the index {push:.1f}s",
    ]


def _per_arch(registry: str, quiet: Callable[[str], None]) -> list[str]:
    request = image_build.BuildRequest(
        platforms=BOTH, tag=TAG, base="local", build_ca=(BUNDLE,), multi="per-arch"
    )
    if quick():
        builds = f"build (quick: one, cache as it is) {_build_time(request, quiet):.1f}s"
    else:
        cold = _build_time(_no_cache(request), quiet)
        # The classic builder re-runs some steps on the first rebuild after --no-cache.
        rebuild, cached = _build_time(request, quiet), _build_time(request, quiet)
        builds = f"build cold {cold:.1f}s, first rebuild {rebuild:.1f}s, fully cached {cached:.1f}s"
    _, push = _timed(
        lambda: image_push.push(
            TAG, f"{registry}/perarch", ["1.0.0"], arches=("amd64", "arm64"), progress=quiet
        )
    )
    return [
        f"image_multiarch: per-arch (main daemon, classic builder): {builds}; push of both "
        f"+ manifest merge {push:.1f}s"
    ]


def _build_time(request: image_build.BuildRequest, quiet: Callable[[str], None]) -> float:
    return _timed(lambda: image_build.build(request, quiet))[1]


def _no_cache(request: image_build.BuildRequest) -> image_build.BuildRequest:
    return replace(request, no_cache=True)


def _timed(step: Callable[[], T]) -> tuple[T, float]:
    start = time.monotonic()
    result = step()
    return result, time.monotonic() - start


@contextmanager
def _selected(env: Mapping[str, str]) -> Iterator[None]:
    saved = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextmanager
def _registry() -> Iterator[str]:
    """A throwaway registry on 127.0.0.1 (storage in a temporary folder)."""
    with (
        tempfile.TemporaryDirectory(prefix="bandkit-bench-registry-") as tmp,
        local_registry(Path(tmp)) as addr,
    ):
        yield addr
