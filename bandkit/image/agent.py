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
import time
from collections.abc import Callable
from pathlib import Path

from bandkit.dockercli import (
    BUILD_COMMAND,
    ImageError,
    docker,
    image_exists,
    image_id,
    image_size,
    output_tail,
)
from bandkit.image.built import BuiltImage
from bandkit.image.facts import LOCAL_TAG

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


def tag_for(workspace: Path, base_id: str) -> str:
    digest = hashlib.sha256(f"{RECIPE}\n{base_id}\n{workspace}\n".encode())
    for name in FILES:
        digest.update(hashlib.sha256((workspace / name).read_bytes()).digest())
    name = re.sub(r"[^a-z0-9]+", "-", workspace.name.lower()).strip("-") or "agent"
    return f"band-agent-{name[:40]}:{digest.hexdigest()[:20]}"


def _config(ref: str) -> tuple[list[str] | None, list[str] | None]:
    out = docker(["image", "inspect", "--format", "{{json .Config}}", ref], 30).stdout
    config = json.loads(out or "{}") or {}
    return config.get("Entrypoint"), config.get("Cmd")


def sync_argv(workspace: Path, bundle: Path | None) -> tuple[list[str], list[str]]:
    """The `docker create`/`run` options, and the `env` variables before the command, that
    run the sync phase for `workspace` (uv trusting `bundle` too, when given)."""
    options = ["--entrypoint", "/usr/bin/env", "--volume", f"{workspace}:{workspace}:ro"]
    variables = [f"WORKSPACE_DIR={workspace}", "UV_COMPILE_BYTECODE=1"]
    if bundle is not None:
        options += ["--volume", f"{bundle}:{BUNDLE_IN_BUILD}:ro"]
        variables += [f"SSL_CERT_FILE={BUNDLE_IN_BUILD}", f"REQUESTS_CA_BUNDLE={BUNDLE_IN_BUILD}"]
    return options, variables


def host_bundle() -> Path | None:
    """The host's CA bundle (SSL_CERT_FILE: a TLS-intercepting network's CA), if any."""
    raw = os.environ.get("SSL_CERT_FILE", "")
    return Path(raw) if raw and Path(raw).is_file() else None


def build(
    workspace: Path,
    *,
    base: str = LOCAL_TAG,
    progress: Callable[[str], None] = print,
) -> BuiltImage:
    """The agent image of `workspace` on `base`: found, or built and proved."""
    began = time.monotonic()
    workspace = _workspace(workspace)
    if not image_exists(base):
        raise ImageError(f"image {base} is missing; run `{BUILD_COMMAND}`")
    entrypoint, command = _config(base)
    if not entrypoint:
        raise ImageError(f"{base} has no entrypoint: is it the kit image?")
    tag = tag_for(workspace, image_id(base))
    if image_exists(tag):
        return BuiltImage(tag, False, time.monotonic() - began, image_size(tag))
    progress(f"build-agent: syncing {workspace.name}'s locked dependencies into {tag} ...")
    name = f"band-agent-build-{secrets.token_hex(6)}"
    options, variables = sync_argv(workspace, host_bundle())
    create = ["create", "--name", name, "--label", f"{LABEL}={workspace}", *options, base]
    docker([*create, *variables, *entrypoint, *PREBUILD], 120)
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
    _prove(tag, workspace)
    return BuiltImage(tag, True, time.monotonic() - began, image_size(tag))


def _prove(tag: str, workspace: Path) -> None:
    """The sync phase in a fresh container of `tag`, with no network: it must skip uv."""
    options, variables = sync_argv(workspace, None)
    entrypoint, _ = _config(tag)
    argv = ["run", "--rm", "--network", "none", *options, tag, *variables]
    ran = docker([*argv, *(entrypoint or []), *PREBUILD], PROOF_TIMEOUT_S, check=False)
    if ran.returncode != 0 or SKIPPED not in ran.stderr:
        docker(["image", "rm", tag], 60, check=False)
        tail = output_tail(ran)
        raise ImageError(
            f"{tag} was built but its launch would not take the fast path (removed):\n{tail}"
        )
