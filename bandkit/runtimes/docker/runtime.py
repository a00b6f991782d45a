"""`DockerRuntime`: the docker box's lifecycle (create, start, stop, exec, remove), its
verbs (egress grants, secrets, interruptions) and its removers.

It implements `base.Runtime` and holds its parts: the `Engine` it drives, the keychain
(`keychain.Secrets`) and the firewall tools; a sandbox's host-side state is its `Box`.
The container runs the kit's own launch command (`startup_command`, read from
`spec.yaml`, so it cannot drift).
"""

from __future__ import annotations

import base64
import json
import secrets as _secrets
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from bandkit.dockercli import BUILD_COMMAND
from bandkit.fsio import write_private
from bandkit.image.facts import SPEC
from bandkit.manifest import Kind, Manifest, Remover, Resource
from bandkit.proxies import egress
from bandkit.runtimes import hostguard
from bandkit.runtimes.base import (
    ExecResult,
    Logs,
    Part,
    Runtime,
    RuntimeName,
    SandboxError,
    SandboxSpec,
    SandboxStatus,
    Secret,
    env_file,
    run_tool,
    validate_name,
)
from bandkit.runtimes.docker import credentials, interruptions, network, ownership
from bandkit.runtimes.docker.credentials import KEY_IN_CONTAINER
from bandkit.runtimes.docker.engine import T_CREATE, T_QUICK, Engine, container_status
from bandkit.runtimes.docker.identity import DEFAULT_GID, GID_ENV, agent_gid, image_labels
from bandkit.runtimes.docker.interruptions import Endpoint
from bandkit.runtimes.docker.network import CONTAINER_LOOPBACK, ROUTE_ENV, egress_rule
from bandkit.runtimes.docker.ownership import LABEL, OWNER_LABEL, OWNER_RECORD, Box
from bandkit.runtimes.keychain import Secrets

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


def startup_command(spec_path: Path = SPEC) -> list[str]:
    """The kit's launch argv (entrypoint + launcher), read from its spec.yaml: the current
    shape's `sandbox.entrypoint`, or a legacy spec's first `commands.startup` command."""
    data = yaml.safe_load(spec_path.read_text(encoding="utf-8")) or {}
    command = (data.get("sandbox") or {}).get("entrypoint")
    if command is None:
        startup = (data.get("commands") or {}).get("startup") or [{}]
        command = startup[0].get("command")
    if not isinstance(command, list) or not command:
        raise SandboxError(
            f"docker: {spec_path} needs sandbox.entrypoint (or commands.startup[0].command) "
            "as a list"
        )
    return [str(part) for part in command]


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
        self.engine = Engine(binary)
        self.key_in_container = frozenset(validate_name(n) for n in key_in_container)
        self.pids_limit = pids_limit
        self.memory = memory
        self.run_id = _secrets.token_hex(8)  # labels what this run creates
        self.secrets = Secrets(self.run_dir / "keychain", self.record)

    @property
    def binary(self) -> str:
        return self.engine.binary

    def _box(self, name: str) -> Box:
        return Box.of(self.run_dir, name)

    # -- lifecycle
    def create(self, spec: SandboxSpec) -> None:
        name = validate_name(spec.name)
        if self.status(name) is not SandboxStatus.ABSENT:
            raise SandboxError(f"docker: container {name!r} already exists; remove it first")
        # Before anything is made, through this runtime's own CLI (the daemon it targets):
        # Docker's own answer to a missing image would be a registry lookup.
        image = spec.image or DEFAULT_IMAGE
        labels = image_labels(self.engine, image)
        if labels is None:
            raise SandboxError(f"docker: image {image} is missing; run `{BUILD_COMMAND}`")
        gid = agent_gid(self.engine, image, labels)  # before anything is made: a stale image fails
        try:
            kit_hosts = egress.kit_allowlist()
        except egress.EgressError as exc:
            raise SandboxError(f"docker: {exc}") from None
        rules = [egress_rule(r, "kit") for r in kit_hosts]
        rules += [egress_rule(r, "sandbox") for r in spec.egress]
        for secret in spec.secrets:
            self.set_secret(name, secret)
        box = self._box(name)
        box.path.mkdir(mode=0o700, parents=True, exist_ok=True)
        owner, net = self.run_id, ownership.network_name(name, self.run_id)
        record = {"owner": owner, "network": net, "gid": gid}
        write_private(box.path / OWNER_RECORD, json.dumps(record))
        self.record(
            Kind.SANDBOX, name, "network", name=name, part="network", network=net, owner=owner
        )
        self.engine.run(
            "network",
            "create",
            "--driver",
            "bridge",
            "--internal",
            "--label",
            f"{OWNER_LABEL}={owner}",
            "--label",
            f"{LABEL}={name}",
            net,
            what="network create",
        )
        gateway, subnet = network.address(self.engine, net)

        env = {**spec.env, "WORKSPACE_DIR": str(spec.workspace_inside)}
        env[GID_ENV] = str(gid)  # the entrypoint drops to it (identity)
        if spec.ca_cert_pem:
            env["PROXY_CA_CERT_B64"] = base64.b64encode(spec.ca_cert_pem.encode()).decode()
        mounts = [(str(path), str(inside), "") for path, inside in spec.mounts()]
        bundle = credentials.trust_bundle(box, spec.ca_cert_pem)
        if bundle is not None:
            mounts.append((str(bundle), CONTAINER_BUNDLE, ":ro"))
            env.update({"SSL_CERT_FILE": CONTAINER_BUNDLE, "REQUESTS_CA_BUNDLE": CONTAINER_BUNDLE})
        secrets = self.secrets.of(name)
        if name in self.key_in_container:
            for secret in secrets:
                self.warn(KEY_IN_CONTAINER.format(env=secret.env, name=name))
                env[secret.env] = secret.value
            rules += network.platform_rules({k: spec.env[k] for k in ROUTE_ENV if k in spec.env})
        else:
            if secrets:
                routes = credentials.start_proxy(
                    box, spec.workspace, spec.env, secrets, spec.ca_cert_pem, gateway
                )
                env.update(routes)
                rules += network.platform_rules(routes)
            env.update({s.env: s.placeholder for s in secrets})
        # The routes live on the gateway, so the container's own loopback (an adapter's
        # local MCP server, which the claude CLI calls) is its own and skips the proxy;
        # an env-file-tier sandbox may still name a host loopback endpoint: all proxied.
        loopback = name not in self.key_in_container
        try:
            port = egress.start(box.path, sandbox=name, listen=gateway, clients=subnet, rules=rules)
        except egress.EgressError as exc:
            raise SandboxError(f"docker: {name}: {exc}") from None
        env.update(egress.proxy_env(gateway, port))
        if loopback:
            env["NO_PROXY"] = env["no_proxy"] = CONTAINER_LOOPBACK
        self._guard_host(box, net, gateway, port)  # before any container exists

        entrypoint, *command = startup_command()
        self.record(Kind.SANDBOX, name, name=name, owner=owner, network=net, gid=str(gid))
        argv = ["create", "--name", name]
        argv += ["--label", f"{LABEL}={name}", "--label", f"{OWNER_LABEL}={owner}"]
        argv += ["--network", net, "--cap-drop", "ALL"]
        for cap in ENTRYPOINT_CAPS:
            argv += ["--cap-add", cap]
        argv += ["--security-opt", "no-new-privileges", "--pids-limit", str(self.pids_limit)]
        memory = str(spec.limits.memory_bytes or self.memory)
        argv += ["--memory", memory, "--memory-swap", memory]
        argv += ["--cpus", spec.limits.cpus] if spec.limits.cpus else []
        if spec.limits.constraints:
            self.warn(f"{name}: placement constraints are for a cluster; one host ignores them")
        argv += ["--entrypoint", entrypoint]
        for source, target, mode in mounts:
            argv += ["--volume", f"{source}:{target}{mode}"]
        with env_file("docker", env) as env_path:
            if env_path is not None:
                argv += ["--env-file", str(env_path)]  # values stay out of argv
            argv += [spec.image or DEFAULT_IMAGE, *command]
            self.engine.run(*argv, what="create", timeout=T_CREATE)
        self.start(name)

    def _guard_host(self, box: Box, net: str, gateway: str, port: int) -> None:
        """Firewall the network's bridge to the host but the egress proxy (`hostguard`);
        recorded in the manifest and the box before it is installed. Fails closed."""
        if not self.host_firewall:
            self.warn(hostguard.DISABLED.format(name=box.name))
            return
        try:
            network_id, bridge = hostguard.network_facts(self.binary, net)
            guard = hostguard.Guard(self.run_id, network_id, bridge, gateway, port)
            facts = {"owner": self.run_id, "chain": guard.chain, "bridge": bridge}
            self.record(Kind.SANDBOX, box.name, "firewall", name=box.name, part="firewall", **facts)
            hostguard.write_record(box.path, guard)
            hostguard.install(guard, self.firewall)
        except hostguard.HostGuardError as exc:
            raise SandboxError(f"docker: {box.name}: {exc}") from None

    def start(self, name: str) -> None:
        """Start the container, first bringing back what a reboot or a kill takes from
        the host: the firewall chain (before anything can run unguarded), the egress
        proxy and the credential proxy, each where the container looks for it. Each step
        is a no-op when its part is up, so this is also `resume`."""
        box = self._box(name)
        try:  # again: a host reboot flushes the firewall but keeps the container
            hostguard.reinstall(box.path, self.firewall)
        except hostguard.HostGuardError as exc:
            raise SandboxError(f"docker: {name}: {exc}") from None
        if (box.path / egress.CONFIG_NAME).exists():
            try:
                egress.restart(box.path)  # on the port the container's proxy variables name
            except (egress.EgressError, OSError) as exc:
                raise SandboxError(f"docker: egress proxy of {name}: {exc}") from None
        # on the address and token its env names
        credentials.restart_proxy(box, self.secrets.of(box.name))
        self.engine.run("start", box.name, what="start")

    def parts(self, name: str) -> tuple[Part, ...]:
        """The container, and the host-side parts it needs: its firewall chain, its egress
        proxy and its credential proxy (each only when the box has one)."""
        box = self._box(name)
        status = self.status(name)
        out = [Part("container", status is SandboxStatus.RUNNING, status.value)]
        guard = hostguard.read_record(box.path)
        if guard is not None:
            try:
                up = hostguard.installed(guard, self.firewall)
                out.append(Part("host firewall", up, guard.chain if up else "missing"))
            except hostguard.HostGuardError as exc:
                out.append(Part("host firewall", False, f"unknown: {exc}"))
        if (box.path / egress.CONFIG_NAME).exists():
            up = egress.running(box.path)
            out.append(Part("egress proxy", up, "running" if up else "stopped"))
        if credentials.proxy_expected(box):
            up = credentials.proxy_running(box)
            out.append(Part("credential proxy", up, "running" if up else "stopped"))
        return tuple(out)

    def stop(self, name: str) -> None:
        self.engine.run("stop", "--time", "20", validate_name(name), what="stop", timeout=T_QUICK)

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
        box = self._box(name)
        gid = box.gid()  # the box's own gid: a host uid 1000 cannot read it
        args = ["exec", "--user", "1000" if gid == DEFAULT_GID else f"1000:{gid}"]
        args += ["--detach"] if detach else []
        args += ["--interactive"] if stdin is not None else []
        for key in env or {}:
            args += ["--env", key]  # docker reads the value from its environment, not argv
        result = run_tool(
            [self.binary, *args, box.name, *argv],
            what="docker exec",
            timeout=timeout,
            input=stdin,
            check=False,
            env=env,
        )
        return ExecResult(result.returncode, result.stdout, result.stderr)

    def status(self, name: str) -> SandboxStatus:
        return container_status(self.engine, name)

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
        box = self._box(name)
        owner = box.owner()
        ownership.remove_container(self.engine, box.name, owner.get("owner", ""))
        guard = hostguard.read_record(box.path)
        if guard is not None:
            network.remove_firewall(guard.run_id, guard.chain, self.firewall)
        ownership.remove_network(self.engine, box, owner.get("network", ""), owner.get("owner", ""))

    def _remove_resource(self, resource: Resource) -> None:
        details = resource.details
        box = self._box(details["name"])
        recorded = box.owner()
        owner = details.get("owner") or recorded.get("owner", "")
        net = details.get("network") or recorded.get("network", "")
        if details.get("part") == "firewall":
            network.remove_firewall(
                details.get("owner", ""), details.get("chain", ""), self.firewall
            )
        elif details.get("part") == "network":
            ownership.remove_network(self.engine, box, net, owner)
        else:
            ownership.remove_container(self.engine, box.name, owner)

    def list(self) -> list[str]:
        out = self.engine.run(
            "ps", "--all", "--filter", f"label={LABEL}", "--format", "{{.Names}}", what="ps"
        ).stdout
        return sorted(out.split())

    def removers(self) -> dict[Kind, Remover]:
        return {
            Kind.SANDBOX: self._remove_resource,
            Kind.SECRET: self.secrets.remove_recorded,
            Kind.POLICY: self._remove_grant,
        }

    # -- secrets: the keychain's (`Secrets`)
    def set_secret(self, sandbox: str, secret: Secret) -> None:
        self.secrets.set(sandbox, secret)

    def has_secret(self, sandbox: str, host: str) -> bool:
        return self.secrets.has(sandbox, host)

    def remove_secret(self, sandbox: str, host: str, placeholder: str) -> None:
        self.secrets.remove(sandbox, host)

    # -- egress policy
    def allow(self, name: str, host: str) -> str:
        """Grant sandbox `name` egress to `host` (a rule: host[:port], *.domain, ...);
        recorded in the manifest before it takes effect. Returns the rule's text."""
        box = self._box(name)
        if not (box.path / OWNER_RECORD).is_file():
            raise SandboxError(f"docker: no sandbox {name!r} was created in {self.run_dir}")
        rule = egress_rule(host, "grant")
        self.record(Kind.POLICY, name, "allow", rule.text, sandbox=name, host=rule.text)
        egress.add_grant(box.path, rule)
        return rule.text

    def policy_log(self, name: str) -> Sequence[dict[str, Any]]:
        """Every allowed and blocked request of sandbox `name`, oldest first."""
        return network.policy_log(self._box(name))

    def _remove_grant(self, resource: Resource) -> None:
        box = self._box(resource.details["sandbox"])
        egress.remove_grant(box.path, resource.details["host"])

    # -- interruptions (the smoke's drills)
    def pause(self, name: str) -> None:
        interruptions.pause(self.engine, name)

    def unpause(self, name: str) -> None:
        interruptions.unpause(self.engine, name)

    def endpoint(self, name: str) -> Endpoint | None:
        return interruptions.endpoint(self.engine, self._box(name))

    def disconnect(self, name: str) -> Endpoint:
        return interruptions.disconnect(self.engine, self._box(name))

    def reconnect(self, name: str, before: Endpoint) -> Endpoint:
        return interruptions.reconnect(self.engine, self._box(name), before)
