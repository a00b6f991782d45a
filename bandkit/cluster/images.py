"""Images onto the nodes: `docker save` on the host's daemon once, streamed into `docker
load` on each node at once, each node sent only the layers it lacks. The only thing the
cluster asks of the host's daemon is that save.

A node that has the kit image lacks only an agent image's own layers, but `docker load`
(20.10) unpacks its whole archive to disk before it looks at what it has: the kit's
layers again, on every node. So the save is read as a tar stream: each file is hashed on
the way (a layer's file is its uncompressed tar, whose digest is its diff ID), and a file
whose digest names a layer the node holds at every place the images use it (same chain
ID) is left out of that node's stream. `docker load` reads a layer's file only when it
lacks that layer, so the missing file is never asked for.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import subprocess
import tarfile
import tempfile
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import IO

from bandkit import tools
from bandkit.cluster.errors import ClusterError
from bandkit.cluster.layout import Node
from bandkit.cluster.swarm import docker

STREAM_TIMEOUT_S = 600.0  # several GB at once (a demo's three agent images)
CHUNK = 1 << 20
SPOOL_MAX = 64 << 20  # a file of the save held in memory up to this, then on disk
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
    layers = [host_layers(image) for image in lacking]
    _stream(list(lacking), loaders, [skippable(layers, node_chains(n)) for n in loaders])
    return [f"{image} -> {', '.join(n.name for n in nodes)}" for image, nodes in lacking.items()]


def chain_ids(diff_ids: Sequence[str]) -> list[str]:
    """The chain ID of each layer of an image whose layers are `diff_ids`, bottom first
    (the OCI image spec's: the first is its diff ID, each next the digest of the one
    below, a space and its diff ID)."""
    chains: list[str] = []
    for diff in diff_ids:
        if chains:
            diff = "sha256:" + hashlib.sha256(f"{chains[-1]} {diff}".encode()).hexdigest()
        chains.append(diff)
    return chains


def skippable(images: Iterable[Sequence[str]], held: frozenset[str]) -> frozenset[str]:
    """The diff IDs of `images` (each its layers' diff IDs) that a daemon holding the
    chain IDs `held` has at every place they are used: their files can be left out."""
    present: set[str] = set()
    needed: set[str] = set()
    for diff_ids in images:
        for diff, chain in zip(diff_ids, chain_ids(diff_ids), strict=True):
            (present if chain in held else needed).add(diff)
    return frozenset(present - needed)


def host_layers(image: str) -> list[str]:
    """The diff IDs of `image` on the host's daemon, bottom first."""
    result = tools.run(
        ["docker", "image", "inspect", "--format", "{{json .RootFS.Layers}}", image],
        what="docker image inspect",
        timeout=60,
        unset=("DOCKER_HOST",),
        error=ClusterError,
    )
    return [str(d) for d in json.loads(result.stdout)]


def node_chains(node: Node) -> frozenset[str]:
    """The chain IDs of every layer of every image on `node`."""
    ids = docker(node, "image", "ls", "--all", "--quiet", "--no-trunc").split()
    if not ids:
        return frozenset()
    out = docker(node, "image", "inspect", "--format", "{{json .RootFS.Layers}}", *ids)
    held: set[str] = set()
    for line in out.splitlines():
        if line.strip():
            held.update(chain_ids([str(d) for d in json.loads(line) or []]))
    return frozenset(held)


def _env(node: Node | None) -> dict[str, str]:
    """The host's daemon (None: as `host_id` reaches it), or `node`'s."""
    if node is None:
        return {k: v for k, v in os.environ.items() if k != "DOCKER_HOST"}
    env = {k: v for k, v in os.environ.items() if k not in NODE_UNSET}
    return {**env, "DOCKER_HOST": node.docker_host}


def _stream(images: list[str], loaders: Sequence[Node], skips: Sequence[frozenset[str]]) -> None:
    """`docker save images` (the host's daemon) piped into `docker load` on each of
    `loaders`, leaving out of each the files whose digest is in its `skips` entry, within
    STREAM_TIMEOUT_S; a failure names its side and what it printed."""
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
            loads = [proc for _side, proc, _err in sides[1:]]
            if any(skips):
                _filter(save, list(zip(loads, skips, strict=True)))
            else:
                _copy(save, loads)
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


def _filter(
    save: subprocess.Popen[bytes], loads: list[tuple[subprocess.Popen[bytes], frozenset[str]]]
) -> None:
    """The save's tar stream, member by member, to each load still reading, without the
    files whose digest is in that load's set; then their ends closed."""
    assert save.stdout is not None
    outs: list[tuple[tarfile.TarFile, frozenset[str]]] = []
    for load, skip in loads:
        assert load.stdin is not None
        # closed below (unless its load ended: a broken pipe)
        writer = tarfile.open(fileobj=load.stdin, mode="w|", bufsize=CHUNK)  # noqa: SIM115
        outs.append((writer, skip))

    def send(member: tarfile.TarInfo, data: IO[bytes] | None, digest: str) -> None:
        for out in list(outs):
            writer, skip = out
            if digest in skip:
                continue
            if data is not None:
                data.seek(0)
            try:
                writer.addfile(member, data)
            except BrokenPipeError:  # that load ended; its exit code says why
                outs.remove(out)
                with contextlib.suppress(BrokenPipeError):
                    writer.close()  # what it still buffers cannot go anywhere

    with save.stdout, tarfile.open(fileobj=save.stdout, mode="r|", bufsize=CHUNK) as source:
        for member in source:
            content = source.extractfile(member) if member.isfile() else None
            if content is None:
                send(member, None, "")
                continue
            with tempfile.SpooledTemporaryFile(max_size=SPOOL_MAX) as spool:
                digest = hashlib.sha256()
                while chunk := content.read(CHUNK):
                    digest.update(chunk)
                    spool.write(chunk)
                send(member, spool, "sha256:" + digest.hexdigest())
    for writer, _skip in outs:
        with contextlib.suppress(BrokenPipeError):
            writer.close()
    for load, _skip in loads:
        if load.stdin is not None:
            with contextlib.suppress(BrokenPipeError):
                load.stdin.close()
