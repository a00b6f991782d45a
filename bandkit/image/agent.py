"""Agent images: the kit image with one workspace's locked dependencies already synced.

`build(workspace)` starts a container of the kit image with the workspace mounted
read-only where its sandboxes mount it (its absolute path), runs the launcher's sync
phase alone in it (`python -m launcher.prebuild`, through the image's entrypoint, so as
the agent uid into the sandbox-owned venv), and commits the container. The image then
holds the venv and the launcher's stamp, so the launcher's existing fast path starts it
with no `uv sync` and no download; the launch still runs every check it always runs.

The sync compiles the venv's bytecode (`UV_COMPILE_BYTECODE=1`): every sandbox starts
from a fresh container of the image, which would otherwise compile each module it
imports at every start. The tag is `band-agent-<workspace name>:<digest>`, the digest
over the recipe, the base image's id, uv.lock, pyproject.toml and the workspace path
(what the fast path compares): a second build with none of them changed finds the image
and builds nothing. The base is the kit
image (`band-python-kit:local`) or any image made from it (the demo's CLI image).

With `carry` (a path inside the image, such as /workspace) the image also holds the
workspace itself there, for a cluster that mounts nothing from a host (the Kubernetes
render): the sync runs for the workspace at that path, and the files are copied in first
from a read-only mount, root's and read-only for the agent, without `.venv`, `.run`,
`.git` and `__pycache__` (symbolic links are copied as links). Its tag then follows the
carry path and a digest of the files (`source_digest`), not the host path: the same
workspace from anywhere is the same image.

Nothing of the build's own environment goes into the image: the variables the sync
needs are given to `env` in the command (never `--env`, which a commit would keep), and
the base's entrypoint and command are put back. Before it reports success the image is
proved: the same sync phase run in a fresh container of it skips uv.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import stat
import time
from collections.abc import Callable, Mapping
from pathlib import Path, PurePosixPath

from bandkit.dockercli import (
    BUILD_COMMAND,
    ImageError,
    docker,
    image_exists,
    image_id,
    image_size,
    output_tail,
)
from bandkit.fsio import remove_path
from bandkit.image.built import BuiltImage
from bandkit.image.facts import LOCAL_TAG
from launcher.stamp import sync_selection

BUILD_TIMEOUT_S = 1800.0
PROOF_TIMEOUT_S = 120.0
BUNDLE_IN_BUILD = "/etc/ssl/bandkit-build-ca.crt"  # the host's CA bundle, for uv only
PREBUILD = ["/opt/band/venv/bin/python", "-m", "launcher.prebuild"]
LABEL = "bandkit.agent.workspace"  # the workspace path the image was synced for
SKIPPED = "phase sync: skipped uv"  # what the launcher logs on its fast path
FILES = ("uv.lock", "pyproject.toml")
# How the image is made, in its tag: a change here makes every agent image anew. 2: the
# venv's bytecode is compiled at build (each start of a sandbox is a fresh container, so
# it would otherwise compile every module it imports, every time).
RECIPE = "2"
LEFT_OUT = (".venv", "__pycache__", ".run", ".git")  # never carried, nor in `source_digest`
CARRY_SOURCE = "/mnt/bandkit-workspace"  # the workspace, read-only, while it is copied in
# `sh -c CARRY_SCRIPT DEST COMMAND...`: copy the workspace to DEST (links as links), drop
# what is never carried, make it read-only for all but root, then run the sync.
CARRY_SCRIPT = (
    'set -eu; mkdir -p "$0"; cp -R -P --preserve=mode,timestamps '
    + CARRY_SOURCE
    + '/. "$0"/; cd "$0"; find . \\( '
    + " -o ".join(f"-name {name}" for name in LEFT_OUT)
    + ' \\) -prune -exec rm -rf {} +; chmod -R u+rwX,go-w,go+rX "$0"; exec "$@"'
)


def _workspace(raw: Path) -> Path:
    workspace = Path(raw).resolve()  # as the runtimes mount it
    if not workspace.is_dir():
        raise ImageError(f"workspace {workspace} is not a directory")
    missing = [f for f in ("band.yaml", *FILES) if not (workspace / f).is_file()]
    if missing:
        raise ImageError(
            f"{workspace} has no {', '.join(missing)}: an agent workspace is a uv "
            "project with a committed uv.lock (`uv lock`) and a band.yaml"
        )
    return workspace


def source_digest(workspace: Path) -> str:
    """A digest of a workspace's files: each path, its kind, its executable bit, and the
    content of a file or the target of a link (`LEFT_OUT` left out)."""
    digest = hashlib.sha256()
    for root, dirs, files in os.walk(workspace):
        dirs[:] = sorted(d for d in dirs if d not in LEFT_OUT)
        for name in sorted(files):
            path = Path(root, name)
            info = path.lstat()
            rel = path.relative_to(workspace).as_posix()
            if stat.S_ISLNK(info.st_mode):
                digest.update(f"L {rel} {os.readlink(path)}\n".encode())
            elif stat.S_ISREG(info.st_mode):
                executable = "x" if info.st_mode & 0o111 else "-"
                digest.update(f"F {rel} {executable}\n".encode())
                digest.update(hashlib.sha256(path.read_bytes()).digest())
        for name in dirs:
            if Path(root, name).is_symlink():
                digest.update(f"L {Path(root, name).relative_to(workspace).as_posix()}\n".encode())
    return digest.hexdigest()[:20]


def tag_for(
    workspace: Path, base_id: str, carry: str = "", selection: Mapping[str, str] | None = None
) -> str:
    """The tag: over the recipe, the base, where the workspace is inside (the host path,
    or `carry`), its lock files and uv's selection settings; with `carry`, its files too."""
    digest = hashlib.sha256(f"{RECIPE}\n{base_id}\n{carry or workspace}\n".encode())
    for name in FILES:
        digest.update(hashlib.sha256((workspace / name).read_bytes()).digest())
    if selection:  # none: the tag an image built before selections existed still has
        digest.update(json.dumps(dict(sorted(selection.items()))).encode())
    if carry:
        digest.update(f"carried {source_digest(workspace)}\n".encode())
    name = re.sub(r"[^a-z0-9]+", "-", workspace.name.lower()).strip("-") or "agent"
    return f"band-agent-{name[:40]}:{digest.hexdigest()[:20]}"


def _config(ref: str) -> tuple[list[str] | None, list[str] | None]:
    out = docker(["image", "inspect", "--format", "{{json .Config}}", ref], 30).stdout
    config = json.loads(out or "{}") or {}
    return config.get("Entrypoint"), config.get("Cmd")


def sync_argv(
    workspace: Path,
    bundle: Path | None,
    *,
    carry: str = "",
    mounted: bool = True,
    entrypoint: str = "/usr/bin/env",
    selection: Mapping[str, str] | None = None,
) -> tuple[list[str], list[str]]:
    """The `docker create`/`run` options, and the `env` variables before the command, that
    run the sync phase for `workspace` (uv trusting `bundle` too, when given; with uv's
    `selection` settings, as its sandboxes will have them): mounted read-only at its own
    path; with `carry`, at the path the image holds it, and mounted (unless not
    `mounted`: the image's own copy) at CARRY_SOURCE, to be copied in (see `build`)."""
    options = ["--entrypoint", entrypoint]
    if mounted:
        options += ["--volume", f"{workspace}:{CARRY_SOURCE if carry else workspace}:ro"]
    variables = [f"WORKSPACE_DIR={carry or workspace}", "UV_COMPILE_BYTECODE=1"]
    variables += [f"{name}={value}" for name, value in sorted((selection or {}).items())]
    if bundle is not None:
        options += ["--volume", f"{bundle}:{BUNDLE_IN_BUILD}:ro"]
        variables += [f"SSL_CERT_FILE={BUNDLE_IN_BUILD}", f"REQUESTS_CA_BUNDLE={BUNDLE_IN_BUILD}"]
    return options, variables


def host_bundle() -> Path | None:
    """The host's CA bundle (SSL_CERT_FILE: a TLS-intercepting network's CA), if any."""
    raw = os.environ.get("SSL_CERT_FILE", "")
    return Path(raw) if raw and Path(raw).is_file() else None


def _carry_path(carry: str) -> str:
    path = PurePosixPath(carry)
    if not path.is_absolute() or ".." in path.parts or str(path) in ("/", CARRY_SOURCE):
        raise ImageError(
            f"--carry {carry!r}: give an absolute path inside the image for the workspace, "
            "such as /workspace"
        )
    return str(path)


def build(
    workspace: Path,
    *,
    base: str = LOCAL_TAG,
    carry: str = "",
    env: Mapping[str, str] | None = None,
    progress: Callable[[str], None] = print,
) -> BuiltImage:
    """The agent image of `workspace` on `base` (holding the workspace at `carry`, when
    given), synced with uv's selection settings in `env`, the sandboxes' environment (a
    demo's scripted brains leave the default groups out): found, or built and proved."""
    began = time.monotonic()
    workspace = _workspace(workspace)
    carry = _carry_path(carry) if carry else ""
    selection = sync_selection(env or {})
    if not image_exists(base):
        raise ImageError(f"image {base} is missing; run `{BUILD_COMMAND}`")
    entrypoint, command = _config(base)
    if not entrypoint:
        raise ImageError(f"{base} has no entrypoint: is it the kit image?")
    tag = tag_for(workspace, image_id(base), carry, selection)
    if image_exists(tag):
        return BuiltImage(tag, False, time.monotonic() - began, image_size(tag))
    into = f" (the workspace at {carry})" if carry else ""
    progress(f"build-agent: syncing {workspace.name}'s locked dependencies into {tag}{into} ...")
    name = f"band-agent-build-{secrets.token_hex(6)}"
    shell = "/bin/sh" if carry else "/usr/bin/env"  # carrying: copied in as root first
    options, variables = sync_argv(
        workspace, host_bundle(), carry=carry, entrypoint=shell, selection=selection
    )
    run = [*variables, *entrypoint, *PREBUILD]
    if carry:  # then the same sync through the entrypoint
        run = ["-c", CARRY_SCRIPT, carry, "/usr/bin/env", *run]
    label = f"{LABEL}={carry or workspace}"
    docker(["create", "--name", name, "--label", label, *options, base, *run], 120)
    try:
        ran = docker(["start", "--attach", name], BUILD_TIMEOUT_S, check=False)
        if ran.returncode != 0:
            tail = output_tail(ran, 12)
            raise ImageError(f"the sync in {base} failed:\n{tail}")
        changes = ["--change", f"ENTRYPOINT {json.dumps(entrypoint)}"]
        changes += ["--change", f"CMD {json.dumps(command or [])}"]
        docker(["commit", *changes, name, tag], 600)
    finally:
        docker(["rm", "--force", name], 60, check=False)
    _prove(tag, workspace, carry, selection)
    return BuiltImage(tag, True, time.monotonic() - began, image_size(tag))


def _prove(tag: str, workspace: Path, carry: str, selection: Mapping[str, str]) -> None:
    """The sync phase in a fresh container of `tag`, with no network (and, carrying, no
    mount: the image's own copy): it must skip uv."""
    options, variables = sync_argv(
        workspace, None, carry=carry, mounted=not carry, selection=selection
    )
    entrypoint, _ = _config(tag)
    argv = ["run", "--rm", "--network", "none", *options, tag, *variables]
    ran = docker([*argv, *(entrypoint or []), *PREBUILD], PROOF_TIMEOUT_S, check=False)
    if ran.returncode != 0 or SKIPPED not in ran.stderr:
        docker(["image", "rm", tag], 60, check=False)
        tail = output_tail(ran)
        raise ImageError(
            f"{tag} was built but its launch would not take the fast path (removed):\n{tail}"
        )


def carried_path(image: str) -> str:
    """Where `image` holds its workspace, as its build recorded (`LABEL`); "" for an image
    that is no agent image. (An agent image built without `carry` records the host path
    it was synced for, and holds nothing there: `extract` says so.)"""
    out = docker(["image", "inspect", "--format", "{{json .Config.Labels}}", image], 30)
    try:
        labels = json.loads(out.stdout.strip() or "null") or {}
    except ValueError:
        labels = {}
    return str(labels.get(LABEL, "")) if isinstance(labels, dict) else ""


def extract(image: str, carry: str, dest: Path) -> None:
    """Copy the workspace `image` carries at `carry` out to `dest` (made whole or not at
    all: copied beside it, then renamed; links stay links). ImageError when the image
    holds no workspace with a band.yaml there."""
    if dest.is_dir() and (dest / "band.yaml").is_file():
        return
    dest.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
    part = dest.with_name(f".{dest.name}.part-{os.getpid()}")
    name = f"band-agent-extract-{secrets.token_hex(6)}"
    docker(["create", "--name", name, image], 120)
    try:
        copied = docker(["cp", f"{name}:{carry}/.", str(part)], 300, check=False)
    finally:
        docker(["rm", "--force", name], 60, check=False)
    if copied.returncode != 0 or not (part / "band.yaml").is_file():
        why = output_tail(copied, 3) if copied.returncode != 0 else "no band.yaml"
        remove_path(part)
        raise ImageError(
            f"{image} holds no workspace at {carry} ({why}); build it with `uv run invoke "
            f"kit.build-agent --workspace W --carry {carry}`"
        )
    remove_path(dest)
    part.rename(dest)
