"""What the docker runtime owns: the box and its owner record, labels, removal only of what is ours.

A `Box` is a sandbox's host-side directory (`<run_dir>/docker/<name>/`, never mounted but
its CA bundle); its `owner.json`, written at create, records the run id, the network's
name and the agent's gid (`identity`). The container and the network carry the label
`bandkit.owner=<run id>` (and the manifest records it). Removal checks the label: a
same-named container or network without it is reported (`NOT_OURS`) and kept.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from bandkit.errors import BandkitError
from bandkit.fsio import read_regular
from bandkit.proxies import egress
from bandkit.runtimes import hostbox
from bandkit.runtimes.base import SandboxError, SandboxStatus, validate_name
from bandkit.runtimes.docker.engine import Engine, container_status
from bandkit.runtimes.docker.identity import DEFAULT_GID

LABEL = "bandkit.sandbox"  # the sandbox name; `list` filters on it
OWNER_LABEL = "bandkit.owner"  # the run id: proof that this runtime made the resource
OWNER_RECORD = "owner.json"
NOT_OURS = (
    "docker: {what} {name!r} exists but was not created by this run (its {label} label "
    "is {found!r}); kept it. Remove it yourself if it is yours, then re-run the teardown"
)


def network_name(name: str, owner: str) -> str:
    return f"bandkit-{name}-{owner[:12]}"


@dataclass(frozen=True)
class Box:
    """Sandbox `name`'s host-side directory, `path`."""

    name: str
    path: Path

    @classmethod
    def of(cls, run_dir: Path, name: str) -> Box:
        name = validate_name(name)
        return cls(name, run_dir / "docker" / name)

    def owner(self) -> dict[str, str]:
        """{"owner": run id, "network": name, "gid": ...} recorded at create, or {} when none."""
        try:
            data, _ = read_regular(self.path / OWNER_RECORD, what="owner record")
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise SandboxError(f"docker: owner record of {self.name}: {exc}") from None
        loaded = json.loads(data)
        return {str(k): str(v) for k, v in loaded.items()} if isinstance(loaded, dict) else {}

    def gid(self) -> int:
        """The agent's gid recorded at create (DEFAULT_GID for a box without one)."""
        try:
            data, _ = read_regular(self.path / OWNER_RECORD, what="owner record")
            gid = json.loads(data).get("gid", DEFAULT_GID)
        except (OSError, ValueError, AttributeError, BandkitError):
            return DEFAULT_GID
        return gid if isinstance(gid, int) and gid > 0 else DEFAULT_GID


def labels(engine: Engine, kind: str, name: str) -> dict[str, str] | None:
    """The labels of container, network (or swarm service, secret, config) `name`; None
    when it does not exist."""
    if kind == "network":
        argv = ["network", "inspect", "--format", "{{json .Labels}}", name]
    elif kind in ("service", "secret", "config"):
        argv = [kind, "inspect", "--format", "{{json .Spec.Labels}}", name]
    else:
        argv = ["inspect", "--type", "container", "--format", "{{json .Config.Labels}}", name]
    result = engine.run(*argv, what=f"{kind} inspect", check=False)
    if result.returncode != 0:
        text = (result.stderr + result.stdout).lower()
        if "no such" in text or "not found" in text:
            return None
        raise SandboxError(f"docker {kind} inspect {name}: {result.stderr.strip()[:300]}")
    found = json.loads(result.stdout or "null") or {}
    return {str(k): str(v) for k, v in found.items()}


def remove_container(engine: Engine, name: str, owner: str) -> None:
    """Remove container `name` when it carries `owner`'s label (absent: nothing to do)."""
    name = validate_name(name)
    found_labels = labels(engine, "container", name)
    if found_labels is None:
        return
    found = found_labels.get(OWNER_LABEL, "")
    if not owner or found != owner:
        raise SandboxError(
            NOT_OURS.format(what="container", name=name, label=OWNER_LABEL, found=found)
        )
    engine.run("rm", "--force", name, what="rm")
    if container_status(engine, name) is not SandboxStatus.ABSENT:
        raise SandboxError(f"docker rm --force {name} returned but the container remains")


def remove_network(engine: Engine, box: Box, network: str, owner: str) -> None:
    """Stop the box's proxies, remove `network` when it carries `owner`'s label, then
    the box."""
    hostbox.stop(box.path)  # the credential proxy
    egress.stop(box.path)
    if network:
        found_labels = labels(engine, "network", network)
        if found_labels is not None:
            found = found_labels.get(OWNER_LABEL, "")
            if not owner or found != owner:
                raise SandboxError(
                    NOT_OURS.format(what="network", name=network, label=OWNER_LABEL, found=found)
                )
            engine.run("network", "rm", network, what="network rm")
    if box.path.is_dir() and not box.path.is_symlink():
        shutil.rmtree(box.path)
