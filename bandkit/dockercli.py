"""Calling the docker CLI (through `tools.run`): argv lists, a timeout on every call, one
error type."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence

from bandkit import tools
from bandkit.errors import BandkitError

__all__ = [
    "ImageError",
    "docker",
    "docker_answers",
    "image_exists",
    "image_id",
    "image_size",
    "require_docker",
    "require_image",
    "server_version",
]


PROBE_TIMEOUT_S = 30.0


class ImageError(BandkitError):
    """An expected failure of a docker call; the message names the step and the fix."""


def server_version(
    timeout_s: float = PROBE_TIMEOUT_S, *, env: Mapping[str, str] | None = None
) -> str | None:
    """The daemon's version from `docker info`, or None when no daemon answers.

    The one daemon probe: a missing client, a hung daemon (timeout) and any error all
    answer None, never raise. `env` (e.g. DOCKER_HOST) selects another daemon.
    """
    try:
        proc = tools.run(
            ["docker", "info", "--format", "{{.ServerVersion}}"],
            what="docker info",
            timeout=timeout_s,
            env=env,
            check=False,
        )
    except tools.ToolError:
        return None
    version = proc.stdout.strip()
    return version if proc.returncode == 0 and version else None


def docker_answers(
    timeout_s: float = PROBE_TIMEOUT_S, *, env: Mapping[str, str] | None = None
) -> bool:
    """True when `docker info` reaches a daemon (the client alone is not enough)."""
    return server_version(timeout_s, env=env) is not None


def require_docker(step: str) -> None:
    if not docker_answers():
        raise ImageError(
            f"{step}: no Docker daemon answers; start one "
            "(`uv run invoke ci.prepare --lane docker_tests`)"
        )


def docker(
    argv: Sequence[str],
    timeout_s: float,
    *,
    env: Mapping[str, str] | None = None,
    check: bool = True,
) -> subprocess.CompletedProcess[str]:
    """Run `docker <argv>`; ImageError (`tools.run`'s line) when docker is missing, does
    not finish within `timeout_s`, or (under `check`) fails."""
    return tools.run(
        ["docker", *argv],
        what=f"docker {argv[0]}",
        timeout=timeout_s,
        env=env,
        check=check,
        error=ImageError,
    )


def output_tail(done: subprocess.CompletedProcess[str], lines: int = 8) -> str:
    """The last `lines` lines of a finished command's stderr, then stdout: for an error."""
    return "\n".join((done.stderr + done.stdout).strip().splitlines()[-lines:])


def image_exists(ref: str) -> bool:
    return docker(["image", "inspect", "--format", "{{.Id}}", ref], 30, check=False).returncode == 0


def image_id(ref: str) -> str:
    return docker(["image", "inspect", "--format", "{{.Id}}", ref], 30).stdout.strip()


def image_size(ref: str) -> int:
    return int(docker(["image", "inspect", "--format", "{{.Size}}", ref], 30).stdout.strip())


BUILD_COMMAND = "uv run invoke build"


def require_image(ref: str) -> None:
    """Raise ImageError naming the fix when `ref` is not a local image (the kit image)."""
    if not image_exists(ref):
        raise ImageError(f"image {ref} is missing; run `{BUILD_COMMAND}`")
