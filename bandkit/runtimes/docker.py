"""The `docker` runtime: kit-image containers that are sandboxes, launched like the kit.

The container runs the kit's own startup command (from `spec.yaml`, so it cannot drift):
`band-entrypoint.sh` as the entrypoint (proxy CA, drop to uid 1000 with an empty
bounding set and no-new-privs), then `python -m launcher`. The workspace is bind-mounted
at the same absolute path and `WORKSPACE_DIR` points at it; the container's stdout/stderr
is the startup log (`docker logs`).

Isolation (a sandbox is hostile):

- network: each sandbox gets its own internal bridge network (no route off the host),
  recorded in the manifest before it is made and removed at teardown. The only way out
  is the sandbox's egress proxy (`egress`): a host process listening on that network's
  gateway address, serving only that network, default deny, admitting the kit's
  allowlist (`caps.network.allow`), the spec's `egress` hosts, the platform route and
  per-sandbox grants (`allow`, `kit.allow`), logging every decision (`policy_log`).
  `HTTP(S)_PROXY` in the container name it; `NO_PROXY` is the container's loopback.
- host firewall (`hostguard`): the gateway address is the host itself, and a bridge's
  packets to any host address take the host's INPUT chain, where Docker's isolation does
  not apply. So before the container exists, a chain per network (recorded in the
  manifest and the box first, re-installed at `start`, removed at teardown) drops all
  the bridge sends to the host but TCP to the egress proxy's port on the gateway: no
  sshd, dev server or database on 0.0.0.0, no UDP/DNS, no ICMP. Fails closed (no
  iptables, not root: no sandbox); `host_firewall=False` or `BANDKIT_HOST_FIREWALL=off`
  is the operator's warned opt-out.
- privileges: `--cap-drop ALL` plus only SETUID/SETGID/SETPCAP, which the entrypoint's
  own `setpriv` needs to drop to uid 1000 with an empty bounding set;
  `no-new-privileges`; pid and memory limits.
- ownership: the container and the network carry the label `bandkit.owner=<run id>`;
  the run id is recorded in the manifest (and the box's `owner.json`). Removal checks the
  label: a same-named container or network without it is reported and kept.

Credentials, decided here and never from the workspace: by default every secret stays
on the host. The container sees the placeholder; the credential proxy (`boxnet`, bound to
the network's gateway address, which the host firewall lets no container reach directly)
swaps in the key on the way to the platform (and to host-set model APIs), and the
container reaches it through its egress proxy, which admits exactly the credential
proxy's addresses (the "platform" rules). `NO_PROXY` names the container's own loopback,
so a local server inside it (an adapter's MCP endpoint) is reached directly. A sandbox
named in `key_in_container` (an operator's explicit runtime option) gets the real values
as environment variables instead, through a 0600
`--env-file` (never argv); `warnings` says so.

`PROXY_CA_CERT_B64` is passed when the platform uses TLS (`SandboxSpec.ca_cert_pem`). The
host's `SSL_CERT_FILE` bundle plus that CA is mounted read-only as the container's
`SSL_CERT_FILE`, so TLS through an intercepting network path verifies as on the host.

Box layout (`<run_dir>/docker/<name>/`, host side, never mounted except the CA bundle):
owner.json, egress-config.json, egress.json (port), grants.json, policy.log, egress.log,
proxy.json / proxy.log (credential proxy), endpoints.json, ca-bundle.crt.

The parts, one concern each: `docker_cli` (the binary, the box, the env file),
`docker_labels` (owner records, labels, removal of only what is ours), `docker_net`
(network address, egress rules and grants, host firewall), `docker_secrets` (keychain,
credential proxy, trust bundle) and `docker_interrupt` (pause, disconnect, `Endpoint`);
`DockerRuntime` (here) adds the sandbox lifecycle and the removers. The parts' public
names are importable from here too.
"""

from __future__ import annotations

import base64
import json
import secrets as _secrets
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path

import yaml

from bandkit.dockercli import ImageError, require_image
from bandkit.fsio import write_private
from bandkit.image.facts import SPEC
from bandkit.manifest import Kind, Manifest, Remover, Resource
from bandkit.runtimes import egress, hostguard
from bandkit.runtimes.base import (
    ExecResult,
    Logs,
    RuntimeName,
    SandboxError,
    SandboxSpec,
    SandboxStatus,
    run_tool,
    validate_name,
)
from bandkit.runtimes.docker_cli import T_CREATE, T_QUICK, DockerCli, _env_file
from bandkit.runtimes.docker_interrupt import DockerInterruptions, Endpoint
from bandkit.runtimes.docker_labels import LABEL, NOT_OURS, OWNER_LABEL, DockerLabels, network_name
from bandkit.runtimes.docker_net import CONTAINER_LOOPBACK, PLATFORM_ENV, ROUTE_ENV, DockerNet
from bandkit.runtimes.docker_secrets import KEY_IN_CONTAINER, DockerSecrets
from bandkit.runtimes.keychain import Keychain

__all__ = [
    "CONTAINER_BUNDLE",
    "CONTAINER_LOOPBACK",
    "DEFAULT_IMAGE",
    "DEFAULT_LOG_PATH",
    "ENTRYPOINT_CAPS",
    "KEY_IN_CONTAINER",
    "KIT_SPEC",
    "LABEL",
    "MEMORY_LIMIT",
    "NOT_OURS",
    "OWNER_LABEL",
    "PIDS_LIMIT",
    "PLATFORM_ENV",
    "ROUTE_ENV",
    "T_CREATE",
    "T_QUICK",
    "DockerCli",
    "DockerInterruptions",
    "DockerLabels",
    "DockerNet",
    "DockerRuntime",
    "DockerSecrets",
    "Endpoint",
    "network_name",
    "startup_command",
]

KIT_SPEC = SPEC
DEFAULT_IMAGE = "band-python-kit:local"
DEFAULT_LOG_PATH = "/home/agent/.local/share/band-kit/logs"
CONTAINER_BUNDLE = "/etc/ssl/bandkit-ca-bundle.crt"
# uv sync (a thread per CPU, a few build processes) plus one agent use well under 100
# tasks; 512 leaves headroom and stops a fork bomb long before the host's pid space.
PIDS_LIMIT = 512
# A locked uv sync of an agent project and the agent itself fit in well under 1 GiB;
# 2 GiB (no swap beyond it) leaves headroom and keeps a runaway from taking the host.
MEMORY_LIMIT = "2g"
# The entrypoint starts as root only to trust a CA and then `setpriv` to uid 1000 with
# --init-groups and --bounding-set=-all, which need exactly these; the agent process
# then holds no capability at all (and no-new-privileges keeps it that way).
ENTRYPOINT_CAPS = ("SETUID", "SETGID", "SETPCAP")


def startup_command(spec_path: Path = KIT_SPEC) -> list[str]:
    """The kit's first startup command (entrypoint + argv), read from its spec.yaml."""
    data = yaml.safe_load(spec_path.read_text(encoding="utf-8"))
    command = data["commands"]["startup"][0]["command"]
    if not isinstance(command, list) or not command:
        raise SandboxError(f"docker: {spec_path} commands.startup[0].command must be a list")
    return [str(part) for part in command]


class DockerRuntime(DockerSecrets, DockerNet, DockerInterruptions):
    name = RuntimeName.DOCKER

    def __init__(
        self,
        run_dir: Path,
        *,
        manifest: Manifest | None = None,
        binary: str = "docker",
        key_in_container: Collection[str] = (),
        pids_limit: int = PIDS_LIMIT,
        memory: str = MEMORY_LIMIT,
        host_firewall: bool | None = None,
        firewall: hostguard.Tools | None = None,
    ) -> None:
        super().__init__(manifest=manifest)
        # False: an operator's explicit, warned opt-out (the option, or BANDKIT_HOST_FIREWALL=off)
        self.host_firewall = hostguard.wanted() if host_firewall is None else host_firewall
        self.firewall = firewall or hostguard.Tools.find()
        self.run_dir = Path(run_dir)
        self.binary = binary
        self.key_in_container = frozenset(validate_name(n) for n in key_in_container)
        self.pids_limit = pids_limit
        self.memory = memory
        self.run_id = _secrets.token_hex(8)  # labels what this run creates
        self.keychain = Keychain(self.run_dir / "keychain")

    # -- lifecycle
    def create(self, spec: SandboxSpec) -> None:
        name = validate_name(spec.name)
        if self.status(name) is not SandboxStatus.ABSENT:
            raise SandboxError(f"docker: container {name!r} already exists; remove it first")
        try:  # before anything is made: Docker's own answer would be a registry lookup
            require_image(spec.image or DEFAULT_IMAGE)
        except ImageError as exc:
            raise SandboxError(f"docker: {exc}") from None
        try:
            kit_hosts = egress.kit_allowlist()
        except egress.EgressError as exc:
            raise SandboxError(f"docker: {exc}") from None
        rules = [self._rule(r, "kit") for r in kit_hosts]
        rules += [self._rule(r, "sandbox") for r in spec.egress]
        for secret in spec.secrets:
            self.set_secret(name, secret)
        box = self._box(name)
        box.mkdir(mode=0o700, parents=True, exist_ok=True)
        owner, network = self.run_id, network_name(name, self.run_id)
        write_private(box / "owner.json", json.dumps({"owner": owner, "network": network}))
        self.record(
            Kind.SANDBOX, name, "network", name=name, part="network", network=network, owner=owner
        )
        self._docker(
            "network",
            "create",
            "--driver",
            "bridge",
            "--internal",
            "--label",
            f"{OWNER_LABEL}={owner}",
            "--label",
            f"{LABEL}={name}",
            network,
            what="network create",
        )
        gateway, subnet = self._address(network)

        env = {**spec.env, "WORKSPACE_DIR": str(spec.workspace)}
        if spec.ca_cert_pem:
            env["PROXY_CA_CERT_B64"] = base64.b64encode(spec.ca_cert_pem.encode()).decode()
        mounts = [(str(path), str(path), "") for path in spec.workspaces]
        bundle = self._trust_bundle(name, spec.ca_cert_pem)
        if bundle is not None:
            mounts.append((str(bundle), CONTAINER_BUNDLE, ":ro"))
            env.update({"SSL_CERT_FILE": CONTAINER_BUNDLE, "REQUESTS_CA_BUNDLE": CONTAINER_BUNDLE})
        secrets = self.keychain.secrets(name)
        if name in self.key_in_container:
            for secret in secrets:
                self.warn(KEY_IN_CONTAINER.format(env=secret.env, name=name))
                env[secret.env] = secret.value
            rules += self._platform_rules({k: spec.env[k] for k in ROUTE_ENV if k in spec.env})
        else:
            if secrets:
                routes = self._start_proxy(
                    name, spec.workspace, spec.env, secrets, spec.ca_cert_pem, gateway
                )
                env.update(routes)
                rules += self._platform_rules(routes)
            env.update({s.env: s.placeholder for s in secrets})
        # The routes live on the gateway, so the container's own loopback (an adapter's
        # local MCP server, which the claude CLI calls) is its own and skips the proxy;
        # an env-file-tier sandbox may still name a host loopback endpoint: all proxied.
        loopback = name not in self.key_in_container
        try:
            port = egress.start(box, sandbox=name, listen=gateway, clients=subnet, rules=rules)
        except egress.EgressError as exc:
            raise SandboxError(f"docker: {name}: {exc}") from None
        env.update(egress.proxy_env(gateway, port))
        if loopback:
            env["NO_PROXY"] = env["no_proxy"] = CONTAINER_LOOPBACK
        self._guard_host(name, network, gateway, port)  # before any container exists

        entrypoint, *command = startup_command()
        self.record(Kind.SANDBOX, name, name=name, owner=owner, network=network)
        argv = ["create", "--name", name]
        argv += ["--label", f"{LABEL}={name}", "--label", f"{OWNER_LABEL}={owner}"]
        argv += ["--network", network, "--cap-drop", "ALL"]
        for cap in ENTRYPOINT_CAPS:
            argv += ["--cap-add", cap]
        argv += ["--security-opt", "no-new-privileges", "--pids-limit", str(self.pids_limit)]
        argv += ["--memory", self.memory, "--memory-swap", self.memory]
        argv += ["--entrypoint", entrypoint]
        for source, target, mode in mounts:
            argv += ["--volume", f"{source}:{target}{mode}"]
        with _env_file(env) as env_file:
            argv += ["--env-file", env_file, spec.image or DEFAULT_IMAGE, *command]
            self._docker(*argv, what="create", timeout=T_CREATE)
        self.start(name)

    def start(self, name: str) -> None:
        box = self._box(name)
        if (box / egress.CONFIG_NAME).exists():
            try:
                egress.restart(box)  # on the port the container's proxy variables name
            except (egress.EgressError, OSError) as exc:
                raise SandboxError(f"docker: egress proxy of {name}: {exc}") from None
        try:  # again: a host reboot flushes the firewall but keeps the container
            hostguard.reinstall(box, self.firewall)
        except hostguard.HostGuardError as exc:
            raise SandboxError(f"docker: {name}: {exc}") from None
        self._docker("start", name, what="start")

    def stop(self, name: str) -> None:
        self._docker("stop", "--time", "20", validate_name(name), what="stop", timeout=T_QUICK)

    def exec(
        self,
        name: str,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        stdin: str | None = None,
        detach: bool = False,
        timeout: float = 120,
    ) -> ExecResult:
        name = validate_name(name)
        args = ["exec", "--user", "1000"]
        args += ["--detach"] if detach else []
        args += ["--interactive"] if stdin is not None else []
        for key in env or {}:
            args += ["--env", key]  # docker reads the value from its environment, not argv
        result = run_tool(
            [self.binary, *args, name, *argv],
            what="docker exec",
            timeout=timeout,
            input=stdin,
            check=False,
            env=env,
        )
        return ExecResult(result.returncode, result.stdout, result.stderr)

    def status(self, name: str) -> SandboxStatus:
        result = self._docker(
            "inspect",
            "--type",
            "container",
            "--format",
            "{{.State.Running}}",
            validate_name(name),
            what="inspect",
            check=False,
        )
        if result.returncode != 0:
            return SandboxStatus.ABSENT
        running = result.stdout.strip() == "true"
        return SandboxStatus.RUNNING if running else SandboxStatus.STOPPED

    def logs(self, name: str) -> Logs:
        name = validate_name(name)
        out = run_tool(
            [self.binary, "logs", name], what="docker logs", timeout=T_QUICK, check=False
        )
        launcher = self.exec(name, ["cat", f"{DEFAULT_LOG_PATH}/launcher.log"]).stdout
        return Logs(startup=out.stdout + out.stderr, launcher=launcher)

    def remove(self, name: str) -> None:
        """Remove the container, its proxies, its network and its box, each only when
        its owner label proves this run made it (a foreign one is kept: SandboxError)."""
        owner = self._owner(name)
        self._remove_container(name, owner.get("owner", ""))
        guard = hostguard.read_record(self._box(name))
        if guard is not None:
            self._remove_firewall(guard.run_id, guard.chain)
        self._remove_network(name, owner.get("network", ""), owner.get("owner", ""))

    def _remove_resource(self, resource: Resource) -> None:
        details = resource.details
        name = validate_name(details["name"])
        recorded = self._owner(name)
        owner = details.get("owner") or recorded.get("owner", "")
        network = details.get("network") or recorded.get("network", "")
        if details.get("part") == "firewall":
            self._remove_firewall(details.get("owner", ""), details.get("chain", ""))
        elif details.get("part") == "network":
            self._remove_network(name, network, owner)
        else:
            self._remove_container(name, owner)

    def list(self) -> list[str]:
        out = self._docker(
            "ps", "--all", "--filter", f"label={LABEL}", "--format", "{{.Names}}", what="ps"
        ).stdout
        return sorted(out.split())

    def removers(self) -> dict[Kind, Remover]:
        return {
            Kind.SANDBOX: self._remove_resource,
            Kind.SECRET: lambda r: self.keychain.drop(
                validate_name(r.details["sandbox"]), env=r.key.rsplit("/", 1)[1]
            ),
            Kind.POLICY: self._remove_grant,
        }
