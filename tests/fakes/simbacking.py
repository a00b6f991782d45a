"""What the sbx simulator (`tests/fakes/sbx`) runs for a sandbox: a `hostbox`.

The simulator keeps each sandbox's VM as a box under `$SBX_SIM_STATE/vms/<id>`; this
module turns its plain-JSON arguments into `hostbox` calls, so the simulated sandbox runs
the real launcher and agent, with the credential proxy standing in for sbx's. Commands
run by `sbx exec` see the VM's well-known paths (the kit startup log, the launcher's log
directory) mapped into the box (`VM_PATHS`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bandkit.runtimes import boxnet, hostbox


def start(
    vm: Path,
    *,
    name: str,
    workspace: str,
    env: Mapping[str, str],
    injections: Sequence[Mapping[str, Any]],
) -> None:
    hostbox.start(
        vm,
        workspace=Path(workspace),
        env=env,
        injections=[
            boxnet.Injection(tuple(i["hosts"]), str(i["placeholder"]), str(i["value"]))
            for i in injections
        ],
    )


def stop(vm: Path) -> None:
    hostbox.stop(vm)


def remove(vm: Path) -> None:
    hostbox.remove(vm)


def status(vm: Path) -> str:
    """`running` while the box's agent (the kit's startup or entrypoint) runs."""
    return hostbox.status(vm)


# Paths inside a real VM and where the simulator's box keeps them.
VM_PATHS = {
    "/var/log/sbx-kit-startup.log": "startup.log",
    "/home/agent/.local/share/band-kit/logs": "logs",
}


def vm_path(vm: Path, arg: str) -> str:
    for inside, local in VM_PATHS.items():
        if arg == inside or arg.startswith(inside + "/"):
            return str(vm / local) + arg[len(inside) :]
    return arg


def run_command(
    vm: Path,
    command: Sequence[str],
    *,
    env: Mapping[str, str],
    workspace: str,
    cwd: str,
    detach: bool,
) -> int:
    return hostbox.run_command(
        vm,
        [vm_path(vm, arg) for arg in command],
        env=env,
        workspace=Path(workspace),
        cwd=cwd,
        detach=detach,
    ).returncode
