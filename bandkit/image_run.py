"""Calling the docker CLI: argv lists, a timeout on every call, one error type."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence

from bandkit.ciprep import docker_answers

__all__ = [
    "ImageError",
    "docker",
    "docker_answers",
    "image_exists",
    "image_id",
    "image_size",
    "require_docker",
]


class ImageError(Exception):
    """An expected failure of an image task; the message names the step and the fix."""


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
    """Run `docker <argv>`; raise ImageError with the tail of stderr on failure."""
    proc = subprocess.run(
        ["docker", *argv],
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout_s,
        env={**os.environ, **(env or {})},
    )
    if check and proc.returncode != 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-8:])
        raise ImageError(f"`docker {argv[0]}` failed (exit {proc.returncode}):\n{tail}")
    return proc


def image_exists(ref: str) -> bool:
    return docker(["image", "inspect", "--format", "{{.Id}}", ref], 30, check=False).returncode == 0


def image_id(ref: str) -> str:
    return docker(["image", "inspect", "--format", "{{.Id}}", ref], 30).stdout.strip()


def image_size(ref: str) -> int:
    return int(docker(["image", "inspect", "--format", "{{.Size}}", ref], 30).stdout.strip())
