"""Pick a runtime by name (`auto`: sbx if installed, else docker if a daemon answers, else
local) and build the removers a manifest teardown needs for the runtimes it names."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Collection, Iterable
from pathlib import Path

from bandkit.dockercli import docker_answers
from bandkit.manifest import Kind, Manifest, Remover, Resource
from bandkit.runtimes.base import Runtime, RuntimeName, SandboxError
from bandkit.runtimes.generic import generic_removers

AUTO = "auto"
CHOICES = (AUTO, *(name.value for name in RuntimeName))
DOCKER_PROBE_TIMEOUT_S = 10.0
SWARM_HOST_ENV = "BANDKIT_SWARM_HOST"  # a swarm manager's DOCKER_HOST; unset: the local cluster


def resolve_name(
    choice: str,
    *,
    has_sbx: Callable[[], bool] = lambda: shutil.which("sbx") is not None,
    has_docker: Callable[[], bool] = docker_answers,
) -> RuntimeName:
    if choice not in CHOICES:
        raise SandboxError(f"unknown runtime {choice!r}; choose one of {', '.join(CHOICES)}")
    if choice != AUTO:
        return RuntimeName(choice)
    if has_sbx():
        return RuntimeName.SBX
    if has_docker():
        return RuntimeName.DOCKER
    return RuntimeName.LOCAL


def get_runtime(
    choice: str,
    *,
    run_dir: Path,
    manifest: Manifest | None = None,
    key_in_container: Collection[str] = (),
) -> Runtime:
    """The runtime for `choice`; local and docker keep their state in `run_dir/<name>`.

    `key_in_container` names the docker sandboxes the operator opts into the env-file
    tier (their keys inside the container); every other sandbox keeps its keys host-side.
    """
    name = resolve_name(choice)
    if key_in_container and name is not RuntimeName.DOCKER:
        raise SandboxError(f"the env-file tier option is for the docker runtime, not {name}")
    if name is RuntimeName.SBX:
        from bandkit.runtimes.sbx import SbxRuntime

        return SbxRuntime(manifest=manifest, kits_dir=run_dir / name.value / "kits")
    if name is RuntimeName.DOCKER:
        from bandkit.runtimes.docker import DockerRuntime

        return DockerRuntime(
            run_dir / name.value, manifest=manifest, key_in_container=key_in_container
        )
    if name is RuntimeName.SWARM:
        from bandkit.runtimes.swarm import SwarmRuntime

        host = os.environ.get(SWARM_HOST_ENV) or None
        return SwarmRuntime(run_dir / name.value, manifest=manifest, host=host)
    from bandkit.runtimes.local import LocalRuntime

    return LocalRuntime(run_dir / name.value, manifest=manifest)


def removers(runtimes: Iterable[Runtime]) -> dict[Kind, Remover]:
    """One remover per kind that dispatches on the entry's recorded runtime, plus the
    generic ones (temp workspaces, tagged processes) for entries without a runtime."""
    by_runtime = {rt.name.value: rt.removers() for rt in runtimes}

    def dispatch(kind: Kind) -> Remover:
        def remove(resource: Resource) -> None:
            owner = resource.details.get("runtime", "")
            table = by_runtime.get(owner)
            if table is None or kind not in table:
                raise SandboxError(f"no {owner or 'unknown'} runtime to remove {resource.ref}")
            table[kind](resource)

        return remove

    generic = generic_removers()

    def dispatch_or_generic(kind: Kind) -> Remover:
        runtime_remover = dispatch(kind)

        def remove(resource: Resource) -> None:
            if "runtime" not in resource.details and kind in generic:
                generic[kind](resource)
            else:
                runtime_remover(resource)

        return remove

    kinds = {kind for table in by_runtime.values() for kind in table} | set(generic)
    return {kind: dispatch_or_generic(kind) for kind in kinds}
