"""Images onto the nodes: `docker save` on the host's daemon once, streamed into `docker
load` on each node at once. The only thing the cluster asks of the host's daemon is that
save."""

from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
import threading
from collections.abc import Callable, Sequence
from typing import IO

from bandkit import tools
from bandkit.cluster.errors import ClusterError
from bandkit.cluster.layout import Node
from bandkit.cluster.swarm import docker

STREAM_TIMEOUT_S = 600.0  # several GB at once (a demo's three agent images)
CHUNK = 1 << 20
# Settings that would point a node's `docker load` elsewhere than its DOCKER_HOST.
NODE_UNSET = ("DOCKER_CONTEXT", "DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH")


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


def distribute(
    images: Sequence[str],
    targets: Sequence[Node],
    progress: Callable[[str], None] = print,
) -> list[str]:
    """Load `images` into every node that lacks one of them (same id: skipped): one
    `docker save` of those images on the host, streamed into a `docker load` on each of
    those nodes at once. The layers they share (the kit image's, under agent images) go
    once, nothing is written to disk on the way, and the loads run while the save does.
    What was done."""
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
    progress(
        f"cluster.up: loading {', '.join(lacking)} into {', '.join(n.name for n in loaders)} ..."
    )
    _stream(list(lacking), loaders)
    return [f"{image} -> {', '.join(n.name for n in nodes)}" for image, nodes in lacking.items()]


def _env(node: Node | None) -> dict[str, str]:
    """The host's daemon (None: as `host_id` reaches it), or `node`'s."""
    if node is None:
        return {k: v for k, v in os.environ.items() if k != "DOCKER_HOST"}
    env = {k: v for k, v in os.environ.items() if k not in NODE_UNSET}
    return {**env, "DOCKER_HOST": node.docker_host}


def _stream(images: list[str], loaders: Sequence[Node]) -> None:
    """`docker save images` (the host's daemon) piped into `docker load` on each of
    `loaders`, within STREAM_TIMEOUT_S; a failure names its side and what it printed."""
    names = ", ".join(images)
    with contextlib.ExitStack() as stack:
        sides: list[tuple[str, subprocess.Popen[bytes], IO[bytes]]] = []
        err: IO[bytes] = stack.enter_context(tempfile.TemporaryFile())
        save = subprocess.Popen(
            ["docker", "image", "save", *images],
            stdout=subprocess.PIPE,
            stderr=err,
            env=_env(None),
        )
        sides.append(("docker save on the host", save, err))
        for node in loaders:
            err = stack.enter_context(tempfile.TemporaryFile())
            load = subprocess.Popen(
                ["docker", "image", "load", "--quiet"],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=err,
                env=_env(node),
            )
            sides.append((f"docker load on {node.name}", load, err))
        expired = threading.Event()

        def kill_all() -> None:
            for _side, proc, _err in sides:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()

        def expire() -> None:
            expired.set()
            kill_all()

        watchdog = threading.Timer(STREAM_TIMEOUT_S, expire)
        watchdog.start()
        try:
            _copy(save, [proc for _side, proc, _err in sides[1:]])
            codes = [proc.wait() for _side, proc, _err in sides]
        finally:
            watchdog.cancel()
            kill_all()  # whatever an error left running
            for _side, proc, _err in sides:
                proc.wait()
        if expired.is_set():
            raise ClusterError(
                f"loading {names} into the nodes did not finish within "
                f"{STREAM_TIMEOUT_S:.0f}s; check the nodes (`uv run invoke cluster.status`)"
            )
        for (side, _proc, err), code in zip(sides, codes, strict=True):
            if code != 0:
                err.seek(0)
                tail = err.read().decode(errors="replace").strip()[-1500:]
                raise ClusterError(f"loading {names}: {side} failed (exit {code}): {tail}")


def _copy(save: subprocess.Popen[bytes], loads: list[subprocess.Popen[bytes]]) -> None:
    """Every chunk the save writes, to each load still reading; then their ends closed."""
    assert save.stdout is not None
    readers = [load for load in loads if load.stdin is not None]
    with save.stdout:
        while chunk := save.stdout.read(CHUNK):
            for load in list(readers):
                try:
                    load.stdin.write(chunk)  # type: ignore[union-attr]
                except BrokenPipeError:  # it ended; its exit code says why
                    readers.remove(load)
    for load in loads:
        if load.stdin is not None:
            with contextlib.suppress(BrokenPipeError):
                load.stdin.close()
