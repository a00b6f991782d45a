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
"""

from __future__ import annotations

import base64
import json
import os
import secrets as _secrets
import shutil
import tempfile
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from bandkit.dockercli import ImageError, require_image
from bandkit.fsio import read_regular, write_atomic, write_private
from bandkit.image.facts import SPEC
from bandkit.manifest import Kind, Manifest, Remover, Resource
from bandkit.runtimes import boxnet, egress, hostbox, hostguard
from bandkit.runtimes.base import (
    ExecResult,
    Logs,
    Runtime,
    RuntimeName,
    SandboxError,
    SandboxSpec,
    SandboxStatus,
    Secret,
    run_tool,
    validate_name,
)
from bandkit.runtimes.keychain import Keychain

KIT_SPEC = SPEC
DEFAULT_IMAGE = "band-python-kit:local"
LABEL = "bandkit.sandbox"  # the sandbox name; `list` filters on it
OWNER_LABEL = "bandkit.owner"  # the run id: proof that this runtime made the resource
T_QUICK = 60.0
T_CREATE = 300.0
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
PLATFORM_ENV = ("BAND_REST_URL", "BAND_WS_URL")
# Endpoints the egress proxy admits as routes: the platform and the host-set model APIs
# (boxnet proxies both, so a model key is swapped in on the wire like the platform key).
ROUTE_ENV = (*PLATFORM_ENV, *boxnet.LLM_ENVS)
CONTAINER_LOOPBACK = "localhost,127.0.0.1,::1"  # NO_PROXY: the container's own loopback
KEY_IN_CONTAINER = (
    "docker runtime: {env} is passed to container {name} as a plain environment variable "
    "(env-file tier, opted in for this sandbox); the real key is inside the container"
)
NOT_OURS = (
    "docker: {what} {name!r} exists but was not created by this run (its {label} label "
    "is {found!r}); kept it. Remove it yourself if it is yours, then re-run the teardown"
)


def startup_command(spec_path: Path = KIT_SPEC) -> list[str]:
    """The kit's first startup command (entrypoint + argv), read from its spec.yaml."""
    data = yaml.safe_load(spec_path.read_text(encoding="utf-8"))
    command = data["commands"]["startup"][0]["command"]
    if not isinstance(command, list) or not command:
        raise SandboxError(f"docker: {spec_path} commands.startup[0].command must be a list")
    return [str(part) for part in command]


def network_name(name: str, owner: str) -> str:
    return f"bandkit-{name}-{owner[:12]}"


class DockerRuntime(Runtime):
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

    def _docker(
        self, *args: str, what: str, timeout: float = T_QUICK, check: bool = True
    ) -> ExecResult:
        result = run_tool([self.binary, *args], what=f"docker {what}", timeout=timeout, check=check)
        return ExecResult(result.returncode, result.stdout, result.stderr)

    def _box(self, name: str) -> Path:
        return self.run_dir / "docker" / validate_name(name)

    # -- ownership
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

    def _rule(self, text: str, source: str) -> egress.Rule:
        try:
            return egress.parse_rule(text, source)
        except egress.EgressError as exc:
            raise SandboxError(f"docker: {exc}") from None

    def _platform_rules(self, env: Mapping[str, str]) -> list[egress.Rule]:
        """host:port rules for the platform endpoints in `env` (URLs the runtime made or
        the operator gave, never the workspace's)."""
        rules = []
        for key in ROUTE_ENV:
            parts = urlsplit(env.get(key, ""))
            if parts.hostname and parts.scheme in ("http", "https", "ws", "wss"):
                port = parts.port or (443 if parts.scheme in ("https", "wss") else 80)
                host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
                rules.append(self._rule(f"{host}:{port}", "platform"))
        return rules

    def _address(self, network: str) -> tuple[str, str]:
        """(gateway, subnet) of our network."""
        out = self._docker(
            "network",
            "inspect",
            "--format",
            "{{json .IPAM.Config}}",
            network,
            what="network inspect",
        ).stdout
        for entry in json.loads(out or "null") or []:
            if entry.get("Gateway") and entry.get("Subnet"):
                return str(entry["Gateway"]), str(entry["Subnet"])
        raise SandboxError(f"docker: network {network} has no gateway address")

    def _guard_host(self, name: str, network: str, gateway: str, port: int) -> None:
        """Firewall the network's bridge to the host but the egress proxy (`hostguard`);
        recorded in the manifest and the box before it is installed. Fails closed."""
        if not self.host_firewall:
            self.warn(hostguard.DISABLED.format(name=name))
            return
        try:
            network_id, bridge = hostguard.network_facts(self.binary, network)
            guard = hostguard.Guard(self.run_id, network_id, bridge, gateway, port)
            facts = {"owner": self.run_id, "chain": guard.chain, "bridge": bridge}
            self.record(Kind.SANDBOX, name, "firewall", name=name, part="firewall", **facts)
            hostguard.write_record(self._box(name), guard)
            hostguard.install(guard, self.firewall)
        except hostguard.HostGuardError as exc:
            raise SandboxError(f"docker: {name}: {exc}") from None

    def _remove_firewall(self, owner: str, chain: str) -> None:
        if chain:
            try:
                hostguard.remove(owner, chain, self.firewall)
            except hostguard.HostGuardError as exc:
                raise SandboxError(f"docker: {exc}") from None

    def _trust_bundle(self, name: str, ca_pem: str | None) -> Path | None:
        """The host's CA bundle (SSL_CERT_FILE: a TLS-intercepting egress path's CA) plus
        the platform's CA, for uv and the agent inside; None when the host sets neither."""
        host = os.environ.get("SSL_CERT_FILE", "")
        if not (host and Path(host).is_file()) and not ca_pem:
            return None
        parts = [Path(host).read_text(encoding="utf-8")] if host and Path(host).is_file() else []
        parts += [ca_pem] if ca_pem else []
        bundle = self._box(name) / "ca-bundle.crt"
        write_atomic(bundle, "\n".join(parts), mode=0o644)
        return bundle

    def _start_proxy(
        self,
        name: str,
        workspace: Path,
        env: Mapping[str, str],
        secrets: Sequence[Secret],
        ca_pem: str | None,
        gateway: str,
    ) -> dict[str, str]:
        box = self._box(name)
        hostbox.stop(box)  # a restart gets a fresh proxy
        injections = [boxnet.Injection(s.hosts, s.placeholder, s.value) for s in secrets]
        try:  # on the gateway: reached through the egress proxy only (hostguard)
            urls = boxnet.start_proxy(
                box, workspace, env, injections, ca_pem=ca_pem, listen=gateway
            )
        except (hostbox.BoxError, boxnet.ProxyError) as exc:
            raise SandboxError(f"docker: credential proxy for {name}: {exc}") from None
        write_private(box / "endpoints.json", json.dumps(urls))
        return urls

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

    # -- interruptions (the smoke's drills): freeze and thaw, cut and restore the network
    def pause(self, name: str) -> None:
        """Freeze every process of the container (cgroup freezer): a host asleep."""
        self._docker("pause", validate_name(name), what="pause")

    def unpause(self, name: str) -> None:
        self._docker("unpause", validate_name(name), what="unpause")

    def endpoint(self, name: str) -> Endpoint | None:
        """The container's endpoint on its sandbox network; None when disconnected."""
        network = self._owner(name).get("network", "")
        if not network:
            raise SandboxError(f"docker: no sandbox network recorded for {name!r}")
        out = self._docker(
            "inspect",
            "--type",
            "container",
            "--format",
            "{{json .Id}} {{json .NetworkSettings.Networks}}",
            validate_name(name),
            what="inspect",
        ).stdout
        ident, _, networks = out.strip().partition(" ")
        entry = (json.loads(networks or "null") or {}).get(network)
        return None if entry is None else Endpoint.from_inspect(network, json.loads(ident), entry)

    def disconnect(self, name: str) -> Endpoint:
        """Cut the container off its network; the endpoint as it was, for `reconnect`."""
        before = self.endpoint(name)
        if before is None:
            raise SandboxError(f"docker: {name} is not connected to its sandbox network")
        self._docker("network", "disconnect", before.network, name, what="network disconnect")
        return before

    def reconnect(self, name: str, before: Endpoint) -> Endpoint:
        """Connect the container again with the same endpoint config (aliases, pinned
        addresses, links); SandboxError when it came back different."""
        argv = ["network", "connect", *before.connect_args(), before.network, validate_name(name)]
        self._docker(*argv, what="network connect")
        after = self.endpoint(name)
        if after is None or not after.same_as(before):
            raise SandboxError(
                f"docker: {name} came back on {before.network} as {after} instead of {before}"
            )
        return after

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

    # -- egress policy
    def allow(self, name: str, host: str) -> str:
        """Grant sandbox `name` egress to `host` (a rule: host[:port], *.domain, ...);
        recorded in the manifest before it takes effect. Returns the rule's text."""
        box = self._box(name)
        if not (box / "owner.json").is_file():
            raise SandboxError(f"docker: no sandbox {name!r} was created in {self.run_dir}")
        rule = self._rule(host, "grant")
        self.record(Kind.POLICY, name, "allow", rule.text, sandbox=name, host=rule.text)
        egress.add_grant(box, rule)
        return rule.text

    def policy_log(self, name: str) -> Sequence[dict[str, Any]]:
        """Every allowed and blocked request of sandbox `name`, oldest first."""
        try:
            return egress.read_log(self._box(name))
        except OSError as exc:
            raise SandboxError(f"docker: policy log of {name}: {exc}") from None

    def _remove_grant(self, resource: Resource) -> None:
        egress.remove_grant(self._box(resource.details["sandbox"]), resource.details["host"])

    # -- secrets
    def set_secret(self, sandbox: str, secret: Secret) -> None:
        sandbox = validate_name(sandbox)
        self.record(Kind.SECRET, sandbox, secret.env, sandbox=sandbox, hosts=",".join(secret.hosts))
        self.keychain.put(sandbox, secret)

    def has_secret(self, sandbox: str, host: str) -> bool:
        return self.keychain.has(validate_name(sandbox), host)

    def remove_secret(self, sandbox: str, host: str, placeholder: str) -> None:
        self.keychain.drop(validate_name(sandbox), host=host)

    def removers(self) -> dict[Kind, Remover]:
        return {
            Kind.SANDBOX: self._remove_resource,
            Kind.SECRET: lambda r: self.keychain.drop(
                validate_name(r.details["sandbox"]), env=r.key.rsplit("/", 1)[1]
            ),
            Kind.POLICY: self._remove_grant,
        }


@dataclass(frozen=True)
class Endpoint:
    """A container's endpoint on one network: what `docker network connect` restores."""

    network: str
    ip: str
    gateway: str
    mac: str
    aliases: tuple[str, ...]  # without the container's own short id (docker adds it)
    pinned: tuple[tuple[str, str], ...] = ()  # --ip / --ip6 / --link-local-ip as set
    links: tuple[str, ...] = ()
    driver_opts: tuple[tuple[str, str], ...] = ()

    @classmethod
    def from_inspect(cls, network: str, container_id: str, entry: Mapping[str, Any]) -> Endpoint:
        ipam = entry.get("IPAMConfig") or {}
        pinned = [("--ip", str(ipam.get("IPv4Address") or ""))]
        pinned += [("--ip6", str(ipam.get("IPv6Address") or ""))]
        pinned += [("--link-local-ip", str(ip)) for ip in ipam.get("LinkLocalIPs") or []]
        short = container_id[:12]
        return cls(
            network=network,
            ip=str(entry.get("IPAddress") or ""),
            gateway=str(entry.get("Gateway") or ""),
            mac=str(entry.get("MacAddress") or ""),
            aliases=tuple(sorted(str(a) for a in entry.get("Aliases") or [] if a != short)),
            pinned=tuple((flag, value) for flag, value in pinned if value),
            links=tuple(sorted(str(link) for link in entry.get("Links") or [])),
            driver_opts=tuple(sorted((entry.get("DriverOpts") or {}).items())),
        )

    def connect_args(self) -> list[str]:
        args = [part for alias in self.aliases for part in ("--alias", alias)]
        args += [part for flag, value in self.pinned for part in (flag, value)]
        args += [part for link in self.links for part in ("--link", link)]
        args += [part for k, v in self.driver_opts for part in ("--driver-opt", f"{k}={v}")]
        return args

    def same_as(self, other: Endpoint) -> bool:
        """The same endpoint config (the endpoint id is new by design); the address and
        gateway too unless this one has none (a stopped container holds no address)."""
        config = (self.network, self.aliases, self.pinned, self.links, self.driver_opts)
        theirs = (other.network, other.aliases, other.pinned, other.links, other.driver_opts)
        addresses = not self.ip or (self.ip, self.gateway) == (other.ip, other.gateway)
        return config == theirs and addresses

    def __str__(self) -> str:
        aliases = ",".join(self.aliases) or "none"
        return f"{self.ip} via {self.gateway} (mac {self.mac}, aliases {aliases})"


class _env_file:
    """A 0600 env file that exists only while `docker create` reads it."""

    def __init__(self, env: Mapping[str, str]) -> None:
        for key, value in env.items():
            if "\n" in value or "\n" in key:
                raise SandboxError(f"docker: env {key} must be a single line")
        self.env = env
        self.path = ""

    def __enter__(self) -> str:
        fd, self.path = tempfile.mkstemp(prefix="bandkit-env-", suffix=".env")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.writelines(f"{k}={v}\n" for k, v in self.env.items())
        return self.path

    def __exit__(self, *exc: object) -> None:
        Path(self.path).unlink(missing_ok=True)
