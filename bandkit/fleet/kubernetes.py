"""`fleet.render --target kubernetes`: the fleet as a kustomize base a platform team applies.

For each agent, one file `<name>.yaml` with:

- its workload: a kubernetes-sigs agent-sandbox `Sandbox` (`agents.x-k8s.io/v1beta1`, the
  version the project's API reference lists and stores in its current releases) or, with
  `workload="deployment"`, a `Deployment` of one replica (`Recreate`: never two at once);
- a pod that holds no credential: `automountServiceAccountToken: false`, the
  `runtimeClassName` given (gVisor or Kata), uid 1000 and `runAsNonRoot`, seccomp
  `RuntimeDefault`, and in each container `readOnlyRootFilesystem`, every capability
  dropped and `allowPrivilegeEscalation: false`; resource requests and limits from the
  fleet file;
- the credential proxy as a native sidecar (an init container with `restartPolicy:
  Always`; its image `band-credential-proxy`, from `bandkit.image.proxy`), the only
  container that mounts the key; the agent reaches the platform only through it, on the
  pod's loopback, with the kit's placeholder as its key and the sidecar's client token in
  its URLs (`$(BAND_PROXY_TOKEN)`, from a Secret of its own: the key's Secret holds the
  key alone);
- a NetworkPolicy denying all ingress, and all egress but DNS and the platform's port
  (the proxy's route; a NetworkPolicy cannot tell the pod's containers apart);

and the agent key's Secret and the token's from `secretGenerator` (`keys/<name>.key`,
written 0600 with a placeholder only when absent, so a re-render keeps a key put there;
`keys/<name>.token`, random, kept the same way; `keys/` is ignored by git). Then
`kustomization.yaml` (the namespace, the labels, every file) and the namespace itself,
with the `restricted` Pod Security level enforced.

The image is an agent image that holds its workspace at `workspace_dir` (default
/workspace), with its band.yaml (agent id set) and its venv synced in: nothing is
installed at start and the root filesystem stays read-only. The kit's entrypoint drops
from root to uid 1000; a pod that is uid 1000 from the start runs the launcher directly
(`python -m launcher`). The paths written at every start are emptyDir volumes: /tmp and
the kit's log and cache directories (`runtime.logPath`, `runtime.cachePath`).
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Any, Final, Literal
from urllib.parse import urlsplit

import yaml

from bandkit.fleet.spec import Agent, Fleet, FleetError
from bandkit.proxies.keyproxy import is_loopback
from bandkit.runtimes.base import PROXY_MANAGED_PLACEHOLDER
from launcher.constants import DEFAULT_WS_URL, INSECURE_ENDPOINTS_ENV, CredentialName, EnvVar

SANDBOX_API: Final = "agents.x-k8s.io/v1beta1"
PROXY_PORT: Final = 18080
PLACEHOLDER: Final = PROXY_MANAGED_PLACEHOLDER  # what the agent sends; the proxy swaps the key
WS_PATH: Final = urlsplit(DEFAULT_WS_URL).path
KEY_PLACEHOLDER: Final = "REPLACE-WITH-THE-AGENT-KEY\n"
TOKEN_ENV: Final = "BAND_PROXY_TOKEN"  # noqa: S105 (a variable's name: the token, in URLs)
# Written at every start, under /home/agent/.local/share/band-kit; the state path is not:
# it holds the agent image's sync stamp, which an emptyDir would hide.
KIT_PATHS: Final = ("logs", "cache")
KIT_HOME: Final = "/home/agent/.local/share/band-kit"
Workload = Literal["sandbox", "deployment"]
DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)  # libyaml's when built with it


def _hardened() -> dict[str, Any]:
    return {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "runAsUser": 1000,
        "capabilities": {"drop": ["ALL"]},
    }


def _resources(fleet: Fleet, agent: Agent) -> dict[str, Any]:
    wanted = fleet.resources(agent)
    amounts = {"cpu": wanted.cpu, "memory": wanted.memory}
    return {"requests": dict(amounts), "limits": dict(amounts)}


def pod_spec(
    fleet: Fleet, agent: Agent, *, runtime_class: str, proxy_image: str, platform: str
) -> dict[str, Any]:
    """The pod of one agent (shared by both workloads)."""
    base = f"127.0.0.1:{PROXY_PORT}/$({TOKEN_ENV})"  # the sidecar's client token first
    agent_env = [
        {
            "name": TOKEN_ENV,
            "valueFrom": {"secretKeyRef": {"name": f"{agent.name}-proxy-token", "key": "token"}},
        },
        {"name": EnvVar.REST_URL.value, "value": f"http://{base}"},
        {"name": EnvVar.WS_URL.value, "value": f"ws://{base}{WS_PATH}"},
        {"name": CredentialName.BAND_API_KEY.value, "value": PLACEHOLDER},
        {"name": INSECURE_ENDPOINTS_ENV, "value": "1"},  # plain ws/http: the pod's loopback
        {"name": "HOME", "value": "/home/agent"},
        {"name": "WORKSPACE_DIR", "value": agent.workspace_dir},
    ]
    scratch = [{"name": "tmp", "mountPath": "/tmp"}]  # noqa: S108 (the pod's own, an emptyDir)
    scratch += [{"name": f"kit-{p}", "mountPath": f"{KIT_HOME}/{p}"} for p in KIT_PATHS]
    return {
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "runtimeClassName": runtime_class,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": 1000,
            "runAsGroup": 1000,
            "fsGroup": 1000,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "initContainers": [
            {
                "name": "credential-proxy",
                "image": proxy_image,
                "restartPolicy": "Always",  # a native sidecar: up before the agent, to the end
                "args": [
                    "--listen",
                    f"127.0.0.1:{PROXY_PORT}",
                    "--upstream",
                    platform,
                    "--key-file",
                    "/run/band-key/agent-key",
                    "--token-file",
                    "/run/band-token/token",
                    "--placeholder",
                    PLACEHOLDER,
                    "--state-dir",
                    "/tmp/keyproxy",  # noqa: S108 (its own emptyDir)
                ],
                "ports": [{"name": "proxy", "containerPort": PROXY_PORT}],
                "securityContext": _hardened(),
                "resources": {
                    "requests": {"cpu": "50m", "memory": "64Mi"},
                    "limits": {"cpu": "200m", "memory": "128Mi"},
                },
                "volumeMounts": [
                    {"name": "agent-key", "mountPath": "/run/band-key", "readOnly": True},
                    {"name": "proxy-token", "mountPath": "/run/band-token", "readOnly": True},
                    {"name": "proxy-tmp", "mountPath": "/tmp"},  # noqa: S108
                ],
            }
        ],
        "containers": [
            {
                "name": "agent",
                "image": fleet.image(agent),
                "command": ["/opt/band/venv/bin/python", "-m", "launcher"],
                "env": agent_env,
                "securityContext": _hardened(),
                "resources": _resources(fleet, agent),
                "volumeMounts": scratch,
            }
        ],
        "volumes": [
            {
                "name": "agent-key",
                "secret": {"secretName": f"{agent.name}-key", "defaultMode": 0o400},
            },
            {
                "name": "proxy-token",
                "secret": {"secretName": f"{agent.name}-proxy-token", "defaultMode": 0o400},
            },
            {"name": "proxy-tmp", "emptyDir": {}},
            *({"name": m["name"], "emptyDir": {}} for m in scratch),
        ],
    }


def _keep_or_write(path: Path, text: str) -> None:
    """Write `text` to a new 0600 file; one already there is kept (a key put there)."""
    if path.exists():
        return
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)


def _labels(agent: Agent) -> dict[str, str]:
    return {"app.kubernetes.io/name": "band-agent", "app.kubernetes.io/instance": agent.name}


def workload(fleet: Fleet, agent: Agent, kind: Workload, pod: dict[str, Any]) -> dict[str, Any]:
    meta = {"name": agent.name, "annotations": {"band.ai/description": agent.description}}
    template = {"metadata": {"labels": _labels(agent)}, "spec": pod}
    if kind == "sandbox":
        return {
            "apiVersion": SANDBOX_API,
            "kind": "Sandbox",
            "metadata": meta,
            "spec": {"podTemplate": template, "operatingMode": "Running"},
        }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta,
        "spec": {
            "replicas": 1,
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": _labels(agent)},
            "template": template,
        },
    }


def network_policy(agent: Agent, platform_port: int) -> dict[str, Any]:
    dns = [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": f"{agent.name}-egress"},
        "spec": {
            "podSelector": {"matchLabels": _labels(agent)},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [],
            "egress": [{"ports": dns}, {"ports": [{"protocol": "TCP", "port": platform_port}]}],
        },
    }


def _port(platform: str) -> int:
    """The platform origin's port; FleetError unless it is one the sidecar accepts: an
    https origin (plain http only to a loopback host, where no key crosses a network)."""
    parts = urlsplit(platform)
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise FleetError(
            f"--platform must be an http(s) URL, e.g. https://app.band.ai (got {platform!r})"
        )
    if parts.path not in ("", "/") or parts.query or parts.username:
        raise FleetError(f"--platform must be an origin, scheme://host[:port] (got {platform!r})")
    if parts.scheme == "http" and not is_loopback(parts.hostname):
        raise FleetError(
            f"--platform {platform} is plain http: the key would cross the network in the "
            "clear, and the sidecar refuses it; use https"
        )
    return parts.port or (443 if parts.scheme == "https" else 80)


def render(
    fleet: Fleet,
    out: Path,
    *,
    workload_kind: Workload = "sandbox",
    runtime_class: str = "gvisor",
    namespace: str = "band-agents",
    platform: str = "https://app.band.ai",
    proxy_image: str = "band-credential-proxy:local",
) -> list[Path]:
    """Write the kustomize base for `fleet` into `out`; the files written."""
    if workload_kind not in ("sandbox", "deployment"):
        raise FleetError(f"--workload must be sandbox or deployment (got {workload_kind!r})")
    port = _port(platform)
    out.mkdir(parents=True, exist_ok=True)
    keys = out / "keys"
    keys.mkdir(mode=0o700, exist_ok=True)
    written: list[Path] = []

    def write(name: str, documents: list[dict[str, Any]]) -> None:
        path = out / name
        text = yaml.dump_all(documents, Dumper=DUMPER, sort_keys=False)
        path.write_text(text, encoding="utf-8")
        written.append(path)

    files = ["namespace.yaml"]
    write(
        "namespace.yaml",
        [
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {
                    "name": namespace,
                    "labels": {"pod-security.kubernetes.io/enforce": "restricted"},
                },
            }
        ],
    )
    for agent in fleet.spec.agents:
        pod = pod_spec(
            fleet, agent, runtime_class=runtime_class, proxy_image=proxy_image, platform=platform
        )
        write(
            f"{agent.name}.yaml",
            [workload(fleet, agent, workload_kind, pod), network_policy(agent, port)],
        )
        files.append(f"{agent.name}.yaml")
        _keep_or_write(keys / f"{agent.name}.key", KEY_PLACEHOLDER)
        _keep_or_write(keys / f"{agent.name}.token", secrets.token_urlsafe(24) + "\n")
    kustomization = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "namespace": namespace,
        "labels": [
            {
                "pairs": {
                    "app.kubernetes.io/part-of": "band-fleet",
                    "app.kubernetes.io/managed-by": "bandkit",
                }
            }
        ],
        "resources": files,
        "generatorOptions": {"disableNameSuffixHash": True},
        "secretGenerator": [
            secret
            for a in fleet.spec.agents
            for secret in (
                {
                    "name": f"{a.name}-key",
                    "type": "Opaque",
                    "files": [f"agent-key=keys/{a.name}.key"],
                },
                {
                    "name": f"{a.name}-proxy-token",
                    "type": "Opaque",
                    "files": [f"token=keys/{a.name}.token"],
                },
            )
        ],
    }
    write("kustomization.yaml", [kustomization])
    (out / ".gitignore").write_text("keys/\n", encoding="utf-8")
    return written
