"""Removers for manifest kinds that belong to no sandbox backend: a temp workspace (a
directory the run created) and a process (found by its tag, see `processes`)."""

from __future__ import annotations

from pathlib import Path

from bandkit import processes
from bandkit.fsio import remove_path
from bandkit.manifest import Kind, Remover, Resource


def remove_workspace(resource: Resource) -> None:
    """Delete the recorded directory; a directory that was never made is success."""
    path = Path(resource.key)
    if not path.is_absolute():
        raise ValueError(f"workspace entry must be an absolute path, got {resource.key!r}")
    remove_path(path)


def remove_process(resource: Resource) -> None:
    """SIGTERM (then SIGKILL) every process carrying the recorded tag."""
    processes.terminate_tagged(resource.key)


def generic_removers() -> dict[Kind, Remover]:
    return {Kind.WORKSPACE: remove_workspace, Kind.PROCESS: remove_process}
