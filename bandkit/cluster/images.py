"""Images onto the nodes: `docker save` on the host's daemon once, `docker load` on each
node at once. The only thing the cluster asks of the host's daemon is that save."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bandkit import processes, tools
from bandkit.cluster.errors import ClusterError
from bandkit.cluster.layout import Node
from bandkit.cluster.swarm import docker

SAVE_TIMEOUT_S = 600.0  # several GB at once (a demo's three agent images)
LOAD_TIMEOUT_S = 600.0


def host_id(image: str) -> str | None:
    """The image's id on the host's daemon, or None when it has no such image."""
    result = tools.run(
        ["docker", "image", "inspect", "--format", "{{.Id}}", image],
        what="docker image inspect",
        timeout=60,
        check=False,
        unset=("DOCKER_HOST",),
        error=ClusterError,
    )
    return result.stdout.strip() if result.returncode == 0 else None


def node_id(node: Node, image: str) -> str | None:
    out = docker(node, "image", "inspect", "--format", "{{.Id}}", image, check=False)
    return out.strip() or None


def sweep(scratch: Path) -> list[Path]:
    """Remove the archives (`image-PID-*.tar`) that a process killed while loading left
    in `scratch`: each names its maker, and one whose maker is gone is stale (a live
    one is another process's load in progress, and kept). What was removed."""
    removed = []
    for archive in scratch.glob("image-*.tar"):
        maker = archive.name.split("-")[1]
        if maker.isdigit() and processes.alive(int(maker)):
            continue
        if archive.is_file() and not archive.is_symlink():
            archive.unlink(missing_ok=True)
            removed.append(archive)
    return removed


def distribute(
    images: Sequence[str],
    targets: Sequence[Node],
    scratch: Path,
    progress: Callable[[str], None] = print,
) -> list[str]:
    """Load `images` into every node that lacks one of them (same id: skipped), from one
    `docker save` of those images: the layers they share (the kit image's, under agent
    images) are written and loaded once, not once per image. What was done."""
    if scratch.is_dir():
        sweep(scratch)
    lacking: dict[str, list[Node]] = {}
    for image in images:
        wanted = host_id(image)
        if wanted is None:
            raise ClusterError(
                f"the host's Docker has no image {image}; build it first "
                "(`uv run invoke build` for the kit image)"
            )
        nodes = [n for n in targets if node_id(n, image) != wanted]
        if nodes:
            lacking[image] = nodes
    if not lacking:
        return []
    loaders = [n for n in targets if any(n in nodes for nodes in lacking.values())]
    names = ", ".join(lacking)
    progress(f"cluster.up: loading {names} into {', '.join(n.name for n in loaders)} ...")
    scratch.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd, raw = tempfile.mkstemp(dir=scratch, prefix=f"image-{os.getpid()}-", suffix=".tar")
    os.close(fd)
    archive = Path(raw)
    try:
        tools.run(
            ["docker", "image", "save", "--output", str(archive), *lacking],
            what=f"docker save {names}",
            timeout=SAVE_TIMEOUT_S,
            unset=("DOCKER_HOST",),
            error=ClusterError,
        )

        def load(node: Node) -> None:
            docker(
                node, "image", "load", "--quiet", "--input", str(archive), timeout=LOAD_TIMEOUT_S
            )

        with ThreadPoolExecutor(max_workers=len(loaders)) as pool:
            list(pool.map(load, loaders))
    finally:
        archive.unlink(missing_ok=True)
    return [f"{image} -> {', '.join(n.name for n in nodes)}" for image, nodes in lacking.items()]
