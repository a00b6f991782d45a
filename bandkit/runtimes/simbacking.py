"""What the sbx simulator (`tests/fakes/sbx`) runs for a sandbox: a `hostbox`.

The simulator keeps each sandbox's VM as a box under `$SBX_SIM_STATE/vms/<id>`; this
module turns its plain-JSON arguments into `hostbox` calls, so the simulated sandbox runs
the real launcher and agent, with the credential proxy standing in for sbx's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bandkit.runtimes import hostbox


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
            hostbox.Injection(tuple(i["hosts"]), str(i["placeholder"]), str(i["value"]))
            for i in injections
        ],
    )


def stop(vm: Path) -> None:
    hostbox.stop(vm)


def remove(vm: Path) -> None:
    hostbox.remove(vm)


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
        vm, command, env=env, workspace=Path(workspace), cwd=cwd, detach=detach
    )
