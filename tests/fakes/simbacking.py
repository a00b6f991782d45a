"""What the sbx simulator (`tests/fakes/sbx`) runs for a sandbox: a `hostbox`.

The simulator keeps each sandbox's VM as a box under `$SBX_SIM_STATE/vms/<id>`; this
module turns its plain-JSON arguments into `hostbox` calls, so the simulated sandbox runs
the real launcher and agent, with the credential proxy standing in for sbx's. Commands
run by `sbx exec` see the VM's well-known paths (the kit startup log, the launcher's log
directory) mapped into the box (`VM_PATHS`).

Real sbx's proxy forwards wherever the VM connects and swaps a secret in for the hosts
the secret names. The stand-in proxy forwards to pinned endpoints instead: the kit's
environment (BAND_REST_URL / BAND_WS_URL, as `kit.provision` stages them), else what the
workspace's band.yaml names (`vm_endpoints`: where the agent itself would connect; read
as a regular file, never through a link), else production. As root each VM runs
as a uid of its own, leased for its box root (`hostbox.box_uid`) at its first start and
given back at `rm`, as a VM is its own machine; its uv cache (`vms/.uv-cache/<name>`) is
its own and kept for the next sandbox of its name.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from bandkit.fsio import UnsafePathError, read_regular
from bandkit.runtimes import boxnet, hostbox
from bandkit.runtimes.base import validate_name


def sbx_scopes(hosts: Sequence[str], env: Mapping[str, str]) -> tuple[str, ...]:
    """sbx scopes a custom secret by host pattern only (`--host`): as key scopes, the
    whole origin of every pinned endpoint on a matching host."""
    out: list[str] = []
    for url in boxnet.pinned_endpoints(env).values():
        parts = urlsplit(url)
        host = parts.hostname or ""
        if any(boxnet.host_matches(h, host) for h in hosts):
            port = parts.port or boxnet.DEFAULT_PORTS.get(parts.scheme, 0)
            netloc = f"[{host}]" if ":" in host else host
            out.append(f"{parts.scheme}://{netloc}:{port}/")
    return tuple(dict.fromkeys(out))


def vm_endpoints(workspace: Path, env: Mapping[str, str]) -> dict[str, str]:
    """The endpoints the VM's agent connects to when the kit sets none: band.yaml's."""
    if boxnet.REST_ENV in env:
        return {}
    try:
        raw, _ = read_regular(workspace / "band.yaml", what="workspace band.yaml")
        data = yaml.safe_load(raw.decode("utf-8"))
    except (UnsafePathError, OSError, UnicodeDecodeError, yaml.YAMLError):
        return {}  # hostbox refuses the box with the reason
    band = data.get("band") if isinstance(data, dict) else None
    found = {}
    for key, name in (("restUrl", boxnet.REST_ENV), ("wsUrl", boxnet.WS_ENV)):
        value = band.get(key) if isinstance(band, dict) else None
        if isinstance(value, str) and value:
            found[name] = value
    return found


def start(
    vm: Path,
    *,
    name: str,
    workspace: str,
    env: Mapping[str, str],
    injections: Sequence[Mapping[str, Any]],
) -> None:
    vm_env = {**vm_endpoints(Path(workspace), env), **env}
    hostbox.start(
        vm,
        workspace=Path(workspace),
        env=vm_env,
        injections=[
            boxnet.Injection(sbx_scopes(i["hosts"], vm_env), str(i["placeholder"]), str(i["value"]))
            for i in injections
        ],
        uid=hostbox.box_uid(vm),
        cache=_cache(vm, name),
    )


def _cache(vm: Path, name: str) -> Path:
    """The sandbox's own uv cache, kept (parked) for the next sandbox of its name, as the
    local runtime keeps it: VMs of one simulator then sync warm, and never each other's."""
    caches = vm.parent / ".uv-cache"
    caches.mkdir(mode=0o711, exist_ok=True)
    os.chmod(caches, 0o711 if os.geteuid() == 0 else 0o700)
    return caches / validate_name(name)


def stop(vm: Path) -> None:
    hostbox.stop(vm, uid=hostbox.known_uid(vm))


def remove(vm: Path, name: str | None = None) -> None:
    cache = _cache(vm, name) if name else None
    hostbox.remove(vm, uid=hostbox.known_uid(vm), cache=cache)


def status(vm: Path) -> str:
    """`running` while the box's agent (the kit's startup or entrypoint) runs."""
    return hostbox.status(vm, uid=hostbox.known_uid(vm))


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
        uid=hostbox.box_uid(vm),
        cwd=cwd,
        detach=detach,
    ).returncode
