"""The docker runtime's ownership: labels, the owner record, removal only of what is ours.

The container and the network carry the label `bandkit.owner=<run id>`; the run id and
the network's name are recorded in the box's `owner.json` (and the manifest). Removal
checks the label: a same-named container or network without it is reported (`NOT_OURS`)
and kept.
"""

from __future__ import annotations

import json
import shutil

from bandkit.fsio import read_regular
from bandkit.runtimes import egress, hostbox
from bandkit.runtimes.base import SandboxError, SandboxStatus, validate_name
from bandkit.runtimes.docker_cli import DockerCli

LABEL = "bandkit.sandbox"  # the sandbox name; `list` filters on it
OWNER_LABEL = "bandkit.owner"  # the run id: proof that this runtime made the resource
NOT_OURS = (
    "docker: {what} {name!r} exists but was not created by this run (its {label} label "
    "is {found!r}); kept it. Remove it yourself if it is yours, then re-run the teardown"
)


def network_name(name: str, owner: str) -> str:
    return f"bandkit-{name}-{owner[:12]}"


class DockerLabels(DockerCli):
    """Owner records, labels, removal of only what is ours (a part of `DockerRuntime`)."""

    def _owner(self, name: str) -> dict[str, str]:
        """{"owner": run id, "network": name} recorded at create, or {} when none."""
        try:
            data, _ = read_regular(self._box(name) / "owner.json", what="owner record")
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise SandboxError(f"docker: owner record of {name}: {exc}") from None
        loaded = json.loads(data)
        return {str(k): str(v) for k, v in loaded.items()} if isinstance(loaded, dict) else {}

    def _labels(self, kind: str, name: str) -> dict[str, str] | None:
        """The labels of container or network `name`; None when it does not exist."""
        if kind == "network":
            argv = ["network", "inspect", "--format", "{{json .Labels}}", name]
        else:
            argv = ["inspect", "--type", "container", "--format", "{{json .Config.Labels}}", name]
        result = self._docker(*argv, what=f"{kind} inspect", check=False)
        if result.returncode != 0:
            text = (result.stderr + result.stdout).lower()
            if "no such" in text or "not found" in text:
                return None
            raise SandboxError(f"docker {kind} inspect {name}: {result.stderr.strip()[:300]}")
        labels = json.loads(result.stdout or "null") or {}
        return {str(k): str(v) for k, v in labels.items()}

    def _remove_container(self, name: str, owner: str) -> None:
        name = validate_name(name)
        labels = self._labels("container", name)
        if labels is None:
            return
        found = labels.get(OWNER_LABEL, "")
        if not owner or found != owner:
            raise SandboxError(
                NOT_OURS.format(what="container", name=name, label=OWNER_LABEL, found=found)
            )
        self._docker("rm", "--force", name, what="rm")
        if self.status(name) is not SandboxStatus.ABSENT:
            raise SandboxError(f"docker rm --force {name} returned but the container remains")

    def _remove_network(self, name: str, network: str, owner: str) -> None:
        box = self._box(name)
        hostbox.stop(box)  # the credential proxy
        egress.stop(box)
        if network:
            labels = self._labels("network", network)
            if labels is not None:
                found = labels.get(OWNER_LABEL, "")
                if not owner or found != owner:
                    raise SandboxError(
                        NOT_OURS.format(
                            what="network", name=network, label=OWNER_LABEL, found=found
                        )
                    )
                self._docker("network", "rm", network, what="network rm")
        if box.is_dir() and not box.is_symlink():
            shutil.rmtree(box)
