"""Local bases for a one-command multi-platform build: one tag, one image per platform.

A multi-platform build passes the same build args to every platform, so the local bases
must be multi-platform images too, like the official ones are. `ensure_multi_bases(arches)`
makes, on the selected daemon (it needs buildx and the containerd image store):

- `local/debian-python:<suite>-multi` and `local/uv:<version>-multi`, each an index of
  the per-arch bases `invoke image.bases [--arch ...]` makes, built with a FROM-only
  Dockerfile whose stage is picked by `$TARGETARCH` (no new layers; about a second);
- per-arch bases missing on that daemon are first copied from the main daemon
  (`docker save | docker load`), so `image.bases` only ever runs against the main one.
"""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from bandkit.dockercli import ImageError, docker, image_exists
from bandkit.image.bases import python_tag, uv_tag
from bandkit.image.facts import LOCAL_PYTHON_REPO, LOCAL_UV_REPO, official_suite, uv_version

MAIN_DOCKER_HOST = "unix:///var/run/docker.sock"
COPY_TIMEOUT_S = 900.0
Progress = Callable[[str], None]


def python_multi_tag() -> str:
    return f"{LOCAL_PYTHON_REPO}:{official_suite()}-multi"


def uv_multi_tag() -> str:
    return f"{LOCAL_UV_REPO}:{uv_version()}-multi"


def index_dockerfile(per_arch: dict[str, str]) -> str:
    """A FROM-only Dockerfile: the stage named after $TARGETARCH is the result.

    (A global `ARG TARGETARCH` in the FROM line itself expands to nothing with Docker
    26's built-in frontend; a stage name does expand.)
    """
    stages = [f"FROM {ref} AS base-{arch}" for arch, ref in per_arch.items()]
    return "\n".join([*stages, "FROM base-$TARGETARCH", ""])


def _copy_from_main(refs: Sequence[str], progress: Progress) -> None:
    progress(f"image.build: copying {', '.join(refs)} from the main daemon ({MAIN_DOCKER_HOST})")
    with subprocess.Popen(
        ["docker", "--host", MAIN_DOCKER_HOST, "save", *refs],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as save:
        load = subprocess.run(
            ["docker", "load", "--quiet"],
            stdin=save.stdout,
            capture_output=True,
            check=False,
            timeout=COPY_TIMEOUT_S,
        )
        assert save.stderr is not None
        save_error = save.stderr.read().decode(errors="replace").strip()
        saved = save.wait(timeout=COPY_TIMEOUT_S)
    if saved != 0 or load.returncode != 0:
        detail = save_error or load.stderr.decode(errors="replace").strip()
        raise ImageError(f"copying the local bases failed: {detail[-400:]}")


def _in_main(ref: str) -> bool:
    return (
        docker(["--host", MAIN_DOCKER_HOST, "image", "inspect", ref], 30, check=False).returncode
        == 0
    )


def ensure_multi_bases(arches: Sequence[str], progress: Progress) -> list[tuple[str, str]]:
    """Make the multi-platform local bases; return the build args that select them."""
    per_arch = [ref for arch in arches for ref in (python_tag(arch), uv_tag(arch))]
    missing = [ref for ref in per_arch if not image_exists(ref)]
    absent = [ref for ref in missing if not _in_main(ref)]
    if absent:
        arch_flags = " ".join(f"--arch {a}" for a in arches)
        raise ImageError(
            f"local base {absent[0]} is missing; run "
            f"`uv run invoke image.bases {arch_flags}` (against the main daemon) first"
        )
    if missing:
        _copy_from_main(missing, progress)
    platforms = ",".join(f"linux/{arch}" for arch in arches)
    for multi, tag_of in ((python_multi_tag(), python_tag), (uv_multi_tag(), uv_tag)):
        with tempfile.TemporaryDirectory(prefix="bandkit-multibase-") as tmp:
            text = index_dockerfile({arch: tag_of(arch) for arch in arches})
            (Path(tmp) / "Dockerfile").write_text(text, encoding="utf-8")
            argv = ["buildx", "build", "--quiet", "--provenance=false", "--platform", platforms]
            docker([*argv, "--tag", multi, "--load", tmp], 300)
        progress(f"image.build: {multi} = {', '.join(tag_of(a) for a in arches)}")
    return [("PYTHON_BASE_IMAGE", python_multi_tag()), ("UV_IMAGE", uv_multi_tag())]
