"""`SwarmRuntime`: a sandbox as swarm services (the agent, its credential proxy) on the
swarm manager it targets, with the custody of the docker runtime.

What one sandbox is, each piece recorded in the manifest before it is made and labelled
`bandkit.sandbox=<name>`, `bandkit.owner=<run id>` (teardown removes only what carries
this run's label):

1. `<name>-<run>-in`: an `--internal` overlay, the agent's only network (no gateway).
2. `bandkit-egress`: the overlay the proxies share, their way off their node (`egress`);
   made by the first sandbox that needs it, removed by the last one out.
3. the platform relay (local cluster, loopback platform): a host process listening on the
   hub (`relay`), the proxy's upstream, with the box's policy log.
4. `<proxy>-cfg`: the proxy's config as a swarm secret (token, routes, the real keys),
   mounted into the proxy service only, 0400 for uid 1000.
5. `<proxy>-app`: the credential proxy's code as a swarm config (`bandkit.proxies.keyproxy.zipapp`).
6. `bkp-<digest of run and name>`: the credential proxy service, on both overlays, as
   uid 1000 with no capability, restarted on any exit, placed under the sandbox's own
   placement constraints (its keys go only where the agent may run).
7. `<name>`: the agent service, one replica, on the internal overlay only, running the
   kit's own launch command with the placeholder for each key and the proxy's URLs.

Service options: `replicas 1`, restarted on any exit after a delay (not only on failure:
a node daemon's restart stops the agent gracefully, exit 0, and swarm restarts an
`on-failure` task that ended so never again; `kit.stop` scales to 0), a stop grace period,
`--init` (the launcher is not written to be PID 1), spread placement, memory and pid
limits (memory, CPUs and placement constraints as the spec's `limits` say), `--cap-drop
ALL` plus SETUID/SETGID/SETPCAP for the entrypoint's `setpriv` and KILL for the init to
pass the stop signal on (the agent holds none of them).
What `docker service create` (20.10) cannot express, and so a swarm sandbox lacks next to
a docker one: `no-new-privileges` (the entrypoint still drops to uid 1000 with an empty
bounding set, so the agent holds no capability) and the host firewall chain (a node's
containers reach the hub address; only the relay's ports listen there, and the agent has
no route to it: only the proxy does).

The target: `host` (a DOCKER_HOST value), else the manager of this machine's local
cluster (`cluster.up`, from whichever run directory). On the local cluster the workspace is
bind-mounted from this host (its nodes share this filesystem) and an image missing on
the nodes is loaded from the host's Docker; on another swarm the image must already be on
its nodes and the platform must be one the nodes reach (a loopback platform is refused).
Agent images (`kit.build-agent`) are what a swarm sandbox runs: its network has no way to
a package index, so a kit image would find nothing to sync from.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets as _secrets
import shutil
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from urllib.parse import urlsplit

from bandkit.cluster import images as cluster_images
from bandkit.cluster.layout import HUB_ADDRESS, HUB_NETNS, NET, NETNS_DIR, OWNER_FILE, PREFIX_LEN
from bandkit.cluster.layout import Node as ClusterNode
from bandkit.cluster.layout import nodes as cluster_nodes
from bandkit.cluster.swarm import SERVICE_OPTIONS
from bandkit.dockercli import BUILD_COMMAND
from bandkit.fsio import UnsafePathError, read_regular, write_private
from bandkit.manifest import Kind, Manifest, Remover, Resource
from bandkit.proxies.keyproxy import is_loopback, zipapp
from bandkit.runtimes import boxnet
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
from bandkit.runtimes.docker.engine import T_CREATE, Engine
from bandkit.runtimes.docker.identity import DEFAULT_GID, GID_ENV, agent_gid, image_labels
from bandkit.runtimes.docker.ownership import LABEL, labels
from bandkit.runtimes.docker.runtime import (
    DEFAULT_IMAGE,
    DEFAULT_LOG_PATH,
    ENTRYPOINT_CAPS,
    startup_command,
)
from bandkit.runtimes.keychain import Secrets
from bandkit.runtimes.swarm import egress, objects, relay
from bandkit.terminal import printable
from launcher.constants import EnvVar

OWNER_RECORD = "owner.json"
PROXY_PORT = 8080  # the proxy's first route listens here in its container; the next +1
PROXY_APP = "/opt/bandkit/keyproxy.pyz"
PROXY_CONFIG = "keyproxy.json"  # under /run/secrets in the proxy container
PROXY_SCRIPT = (
    "mkdir -p /tmp/keyproxy && exec python3 -P {app} /tmp/keyproxy/ports.json 0.0.0.0 "
    "< /run/secrets/{config}"
)
HISTORY_ROWS = 5  # the latest tasks of a service that a failure report shows
MEMORY_LIMIT = "2g"
PROXY_MEMORY_LIMIT = "256m"
PIDS_LIMIT = 512
STOP_GRACE = "20s"
PROXY_START_S = 60.0  # its image is on the node: starting it takes a second or two
RESTART_DELAY = "2s"
EGRESS_ATTEMPTS = 3  # another process may remove the egress overlay as we create a proxy
# A rescheduled agent may start before its proxy's name resolves on its new node (the
# overlay's name table reaches a node some seconds after the network does) or before a
# proxy moved with it listens: the launcher waits this long for the endpoints instead of
# failing its first connect and restarting, again and again, after the delay above.
ENDPOINT_WAIT_S = "60"
# `--init` runs as root; the launcher it forwards the stop signal to runs as uid 1000, and
# signalling another uid takes CAP_KILL: without it the init dies on the signal ("FATAL
# tini: Operation not permitted") and takes the agent down at once, with no graceful stop.
# The agent holds none of it: the entrypoint empties its bounding set.
INIT_CAP = "KILL"
# A task's states from its creation until it runs (`docker service ps`, CurrentState).
LIVE_STATES = frozenset(
    {"New", "Pending", "Assigned", "Accepted", "Preparing", "Ready", "Starting", "Running"}
)


# (manager, image) -> the host's image id this process found on every local node.
_STAGED: dict[tuple[str, str], str] = {}
_STAGING = threading.Lock()


def manager_host(host: str | None) -> str:
    """The DOCKER_HOST of the swarm manager to talk to: `host`, else this machine's local
    cluster's (`cluster.up`, from whichever run directory)."""
    if host:
        return host
    if not OWNER_FILE.exists():  # the local cluster of this machine, wherever its home
        raise SandboxError(
            "swarm: no swarm to run on: start the local cluster (`uv run invoke "
            "cluster.up --nodes 3 --image band-python-kit:local`) or name a swarm "
            "manager with --swarm-host (BANDKIT_SWARM_HOST)"
        )
    return ClusterNode(1).docker_host


def proxy_name(owner: str, name: str) -> str:
    """The credential proxy service of sandbox `name` made by run `owner`: a DNS label
    (the agent reaches it by this name) of its own per run and sandbox."""
    return objects.PROXY_PREFIX + hashlib.sha256(f"{owner}/{name}".encode()).hexdigest()[:16]


class SwarmRuntime(Runtime):
    name = RuntimeName.SWARM

    def __init__(
        self,
        run_dir: Path,
        *,
        manifest: Manifest | None = None,
        host: str | None = None,
        binary: str = "docker",
    ) -> None:
        super().__init__(manifest=manifest)
        self.run_dir = Path(run_dir)
        self.local = host is None
        self._host = host
        self._binary = binary
        self.run_id = _secrets.token_hex(8)
        self.secrets = Secrets(self.run_dir / "keychain", self.record)

    def record(self, kind: Kind, *parts: str, **details: str) -> None:
        """As every runtime records, plus the swarm it targets when one was named, so a
        teardown reaches that swarm again whatever the environment is then."""
        if self._host:
            details["swarm_host"] = self._host
        super().record(kind, *parts, **details)

    # -- the target
    @property
    def engine(self) -> Engine:
        return Engine(self._binary, self._manager_host())

    def _manager_host(self) -> str:
        return manager_host(self._host)

    def _local_nodes(self) -> tuple[ClusterNode, ...]:
        engine = self.engine
        out = engine.run("node", "ls", "--format", "{{.Hostname}}", what="node ls").stdout
        names = set(out.split())
        return tuple(n for n in cluster_nodes(9) if n.name in names)

    def _box(self, name: str) -> Path:
        return self.run_dir / validate_name(name)

    def _owner(self, name: str) -> dict[str, str]:
        path = self._box(name) / OWNER_RECORD
        if not path.exists():
            return {}
        try:
            data = json.loads(read_regular(path, what="swarm owner record")[0])
        except (OSError, UnsafePathError, ValueError) as exc:
            raise SandboxError(f"swarm: the record of {name} is unreadable ({exc})") from None
        return {str(k): str(v) for k, v in data.items()}

    def _image(self, image: str) -> int:
        """Make sure the nodes have `image` (the local cluster: loaded from the host's
        Docker); the agent's gid."""
        engine = self.engine
        if self.local:
            self._distribute([image])
        labels = image_labels(engine, image)
        if labels is None:
            raise SandboxError(
                f"swarm: image {image} is not on the swarm's nodes; build it (`{BUILD_COMMAND}`"
                " or `uv run invoke kit.build-agent`) and load it into every node"
            )
        return agent_gid(engine, image, labels)

    def _distribute(self, images: Sequence[str]) -> None:
        """Load `images` into the local cluster's nodes that lack them, together (their
        shared layers moved once); each once per process for as long as the host's tag
        names the same image (a fleet's agents share one)."""
        manager = self._manager_host()
        with _STAGING:
            wanted = {image: cluster_images.host_id(image) for image in images}
            todo = [
                image
                for image, found in wanted.items()
                if found is None or _STAGED.get((manager, image)) != found
            ]
            if not todo:
                return
            cluster_images.distribute(todo, self._local_nodes(), progress=lambda line: None)
            for image in todo:
                _STAGED[(manager, image)] = wanted[image] or ""

    # -- lifecycle
    def create(self, spec: SandboxSpec) -> None:
        name = validate_name(spec.name)
        if self.status(name) is not SandboxStatus.ABSENT:
            raise SandboxError(f"swarm: service {name!r} already exists; remove it first")
        image = spec.image or DEFAULT_IMAGE
        gid = self._image(image)
        for secret in spec.secrets:
            self.set_secret(name, secret)
        owner = self.run_id
        box = self._box(name)
        self.record(Kind.SANDBOX, name, "box", name=name, part="box")
        box.mkdir(mode=0o700, parents=True, exist_ok=True)
        inner = f"{name}-{owner[:8]}-in"
        proxy = proxy_name(owner, name)
        record = {"owner": owner, "inner": inner, "proxy": proxy, "gid": gid}
        write_private(box / OWNER_RECORD, json.dumps(record))
        self.record(
            Kind.SANDBOX, name, inner, name=name, part="network", network=inner, owner=owner
        )
        self.engine.run(
            "network",
            "create",
            "--driver",
            "overlay",
            "--internal",
            *objects.label_args(name, owner),
            inner,
            what="network create",
        )
        env = {
            **spec.env,
            "WORKSPACE_DIR": str(spec.workspace_inside),
            GID_ENV: str(gid),
            EnvVar.ENDPOINT_WAIT: ENDPOINT_WAIT_S,
        }
        if spec.ca_cert_pem:
            env["PROXY_CA_CERT_B64"] = base64.b64encode(spec.ca_cert_pem.encode()).decode()
        keys = self.secrets.of(name)
        if keys:
            env.update(self._start_proxy(name, spec, keys, record, image))
            env.update({s.env: s.placeholder for s in keys})
        self._create_agent(name, spec, image, env, record)

    def _start_proxy(
        self,
        name: str,
        spec: SandboxSpec,
        keys: Sequence[Secret],
        record: Mapping[str, object],
        image: str,
    ) -> dict[str, str]:
        """The relay, the proxy's secret and code, the proxy service; the agent's URLs."""
        owner, proxy = str(record["owner"]), str(record["proxy"])
        injections = [boxnet.Injection.of(s) for s in keys]
        try:
            names, routes = boxnet.proxy_routes(spec.env, injections, spec.ca_cert_pem)
        except boxnet.ProxyError as exc:
            raise SandboxError(f"swarm: {name}: {exc}") from None
        if not routes:
            return {}
        self._relay_routes(name, routes)
        token = _secrets.token_urlsafe(boxnet.TOKEN_BYTES)
        for index, route in enumerate(routes):
            route["port"] = PROXY_PORT + index
        config = json.dumps({"token": token, "routes": routes})
        engine = self.engine
        secret_name, app_name = f"{proxy}-cfg", f"{proxy}-app"
        keys_redacted = (*(s.value for s in keys), token)
        self.record(
            Kind.SANDBOX,
            name,
            secret_name,
            name=name,
            part="secret",
            object=secret_name,
            owner=owner,
        )
        engine.run(
            "secret",
            "create",
            *objects.label_args(name, owner),
            secret_name,
            "-",
            what="secret create",
            input=config,
            redact=keys_redacted,
        )
        self.record(
            Kind.SANDBOX, name, app_name, name=name, part="config", object=app_name, owner=owner
        )
        with tempfile.TemporaryDirectory(prefix="bandkit-swarm-") as scratch:
            app = Path(scratch) / "keyproxy.pyz"
            app.write_bytes(zipapp.build())
            engine.run(
                "config",
                "create",
                *objects.label_args(name, owner),
                app_name,
                str(app),
                what="config create",
            )
        self.record(Kind.SANDBOX, name, "egress", name=name, part="egress")
        self.record(Kind.SANDBOX, name, proxy, name=name, part="service", object=proxy, owner=owner)
        script = PROXY_SCRIPT.format(app=PROXY_APP, config=PROXY_CONFIG)
        options = [
            "--detach",
            "--name",
            proxy,
            *objects.label_args(name, owner),
            "--network",
            str(record["inner"]),
            "--secret",
            f"source={secret_name},target={PROXY_CONFIG},uid=1000,gid=1000,mode=0400",
            "--config",
            f"source={app_name},target={PROXY_APP},mode=0444",
            "--user",
            "1000:1000",
            "--cap-drop",
            "ALL",
            "--init",
            "--restart-condition",
            "any",
            "--restart-delay",
            "1s",
            "--limit-memory",
            PROXY_MEMORY_LIMIT,
            *_constraints(spec),
            "--entrypoint",
            "/bin/sh",
            *SERVICE_OPTIONS,
            image,
            "-c",
            script,
        ]
        self._create_proxy(options)
        self._wait_running(proxy, "the credential proxy")
        ports = [PROXY_PORT + index for index in range(len(routes))]
        return boxnet.proxied_urls(names, ports, token, proxy)

    def _create_proxy(self, options: list[str]) -> None:
        """`service create OPTIONS` (the image and command last) of a proxy, on the egress
        overlay too; made again when the last sandbox of another process removed that
        between our look and our create."""
        engine = self.engine
        for attempt in range(EGRESS_ATTEMPTS):
            network = egress.ensure(engine)
            result = engine.run(
                *("service", "create", "--network", network, *options),
                what="service create (credential proxy)",
                timeout=T_CREATE,
                check=False,
            )
            if result.returncode == 0:
                return
            text = result.stderr.strip()
            gone = network in text and "not found" in text.lower()
            if not gone or attempt + 1 == EGRESS_ATTEMPTS:
                raise SandboxError(f"swarm: service create (credential proxy): {text[:500]}")

    def _relay_routes(self, name: str, routes: list[dict[str, object]]) -> None:
        """Send each route to a loopback platform through the box's relay on the hub."""
        loopback = [r for r in routes if is_loopback(urlsplit(str(r["upstream"])).hostname or "")]
        if not loopback:
            return
        if not self.local:
            raise SandboxError(
                f"swarm: {name}: the platform is on this host's loopback, which another "
                "swarm's nodes cannot reach; give them a platform URL they can reach"
            )
        origins = sorted({str(r["upstream"]) for r in loopback})
        upstreams = []
        for origin in origins:
            parts = urlsplit(origin)
            upstreams.append(relay.Upstream(parts.hostname or "", parts.port or 80))
        box = self._box(name)
        self.record(Kind.SANDBOX, name, "relay", name=name, part="relay")
        write_private(box / "relay-inputs.json", json.dumps([[u.host, u.port] for u in upstreams]))
        ports = self._run_relay(name, upstreams)
        by_origin = dict(zip(origins, ports, strict=True))
        for route in loopback:
            route["via"] = f"{HUB_ADDRESS}:{by_origin[str(route['upstream'])]}"

    def _run_relay(self, name: str, upstreams: Sequence[relay.Upstream]) -> list[int]:
        try:
            return relay.start(
                self._box(name),
                sandbox=name,
                netns=NETNS_DIR / HUB_NETNS,
                listen=HUB_ADDRESS,
                clients=f"{NET}.0/{PREFIX_LEN}",
                upstreams=upstreams,
            )
        except (relay.RelayError, OSError) as exc:
            raise SandboxError(f"swarm: {name}: {exc}") from None

    def _create_agent(
        self,
        name: str,
        spec: SandboxSpec,
        image: str,
        env: Mapping[str, str],
        record: Mapping[str, object],
    ) -> None:
        owner = str(record["owner"])
        entrypoint, *command = startup_command()
        argv = ["service", "create", "--detach", "--name", name, *objects.label_args(name, owner)]
        argv += ["--network", str(record["inner"]), "--hostname", name]
        argv += ["--restart-condition", "any", "--restart-delay", RESTART_DELAY]
        argv += ["--stop-grace-period", STOP_GRACE, "--init", "--cap-drop", "ALL"]
        for cap in (*ENTRYPOINT_CAPS, INIT_CAP):
            argv += ["--cap-add", cap]
        limits = spec.limits
        argv += ["--limit-memory", str(limits.memory_bytes or MEMORY_LIMIT)]
        argv += ["--limit-pids", str(PIDS_LIMIT)]
        argv += ["--limit-cpu", limits.cpus] if limits.cpus else []
        argv += _constraints(spec)
        if self.local:  # the local cluster's nodes share this host's filesystem
            for path, inside in spec.mounts():
                argv += ["--mount", f"type=bind,source={path},target={inside}"]
        argv += ["--entrypoint", entrypoint, *SERVICE_OPTIONS]
        self.record(Kind.SANDBOX, name, name=name, part="service", object=name, owner=owner)
        with env_file("docker", env) as env_path:
            if env_path is not None:
                argv += ["--env-file", str(env_path)]  # values stay out of argv
            argv += [image, *command]
            self.engine.run(*argv, what="service create", timeout=T_CREATE)

    def start(self, name: str) -> None:
        """Bring back the relay (a host reboot or a kill takes it), then one replica of
        the agent; a no-op for what is up."""
        box = self._box(name)
        inputs = box / "relay-inputs.json"
        if inputs.exists() and not relay.running(box):
            recorded = json.loads(read_regular(inputs, what="relay inputs")[0])
            ports = json.loads(read_regular(box / relay.PORTS_NAME, what="relay ports")[0])["ports"]
            upstreams = [
                relay.Upstream(str(h), int(p), int(lp))
                for (h, p), lp in zip(recorded, ports, strict=True)
            ]
            self._run_relay(name, upstreams)
        self.engine.run("service", "scale", "--detach", f"{name}=1", what="service scale")

    def stop(self, name: str) -> None:
        self.engine.run(
            "service", "scale", "--detach", f"{validate_name(name)}=0", what="service scale"
        )

    def parts(self, name: str) -> tuple[Part, ...]:
        status = self.status(name)
        out = [Part("agent service", status is SandboxStatus.RUNNING, status.value)]
        record = self._owner(name)
        if record.get("proxy"):
            up = self._service_running(record["proxy"])
            out.append(Part("credential proxy", up, "running" if up else "not running"))
        box = self._box(name)
        if (box / "relay-inputs.json").exists():
            up = relay.running(box)
            out.append(Part("platform relay", up, "running" if up else "stopped"))
        return tuple(out)

    def _tasks(self, service: str) -> list[tuple[str, str, str]]:
        """(task id, node hostname, current state) of each task meant to run: also one
        waiting out its restart delay (desired state `ready` until the delay ends), or a
        sandbox restarting after an exit would look stopped. A task not yet placed has no
        node (""): the fields are tab-separated, so its state is still read as its state."""
        rows = objects.ps(self.engine, [service], ".ID", ".Node", ".CurrentState", running=True)
        return [(task, node, state.split()[0]) for task, node, state in rows if task and state]

    def stage_images(self, images: Sequence[str]) -> None:
        """Load `images` into the local cluster's nodes that lack them, in one archive;
        on another swarm, check that its manager has each."""
        if self.local:
            self._distribute(images)
        for image in images:
            self._image(image)  # the check; on the local cluster already staged

    def where(self, name: str) -> str:
        """The node the agent's task is on (`-` when it has none)."""
        nodes = [node for _id, node, _state in self._tasks(validate_name(name)) if node]
        return nodes[0] if nodes else "-"

    def _service_running(self, service: str) -> bool:
        return any(state == "Running" for _id, _node, state in self._tasks(service))

    def _wait_running(self, service: str, what: str) -> None:
        """Wait until a task of `service` runs: the agent is started only once its proxy
        runs (else its first requests find nothing listening, and it exits)."""
        deadline = time.monotonic() + PROXY_START_S
        pause = 0.2  # growing to 1 s: each look is a `service ps`, work for the manager
        while not self._service_running(service):
            if time.monotonic() > deadline:
                said = "; ".join(self._history(service)[-2:]) or "no task yet"
                raise SandboxError(
                    f"swarm: {what} ({service}) did not start within {PROXY_START_S:.0f}s "
                    f"({said}); see `docker service ps --no-trunc {service}` on the swarm"
                )
            time.sleep(pause)
            pause = min(1.0, pause * 1.5)

    def status(self, name: str) -> SandboxStatus:
        """Absent: no service. Running: a task is meant to run and on its way or up
        (swarm starts and restarts it). Stopped: scaled to 0, or its task ended and none
        replaces it."""
        name = validate_name(name)
        if labels(self.engine, "service", name) is None:
            return SandboxStatus.ABSENT
        states = {state for _id, _node, state in self._tasks(name)}
        return SandboxStatus.RUNNING if states & LIVE_STATES else SandboxStatus.STOPPED

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
        """Run `argv` in the agent's running container, through its node's daemon (the
        local cluster's; another swarm's nodes are not reachable from here)."""
        name = validate_name(name)
        running = [t for t in self._tasks(name) if t[2] == "Running"]
        if not running or not self.local:
            return ExecResult(1, "", f"swarm: no running task of {name} to exec in")
        task, node_name, _state = running[0]
        node = next((n for n in cluster_nodes(9) if n.name == node_name), None)
        if node is None:
            return ExecResult(1, "", f"swarm: {name} runs on {node_name}, not a local node")
        gid = int(self._owner(name).get("gid", DEFAULT_GID))
        container = f"{name}.1.{task}"
        args = ["exec", "--user", "1000" if gid == DEFAULT_GID else f"1000:{gid}"]
        args += ["--detach"] if detach else []
        args += ["--interactive"] if stdin is not None else []
        for key in env or {}:
            args += ["--env", key]
        result = run_tool(
            [self._binary, *args, container, *argv],
            what="docker exec",
            timeout=timeout,
            input=stdin,
            check=False,
            env={**(env or {}), "DOCKER_HOST": node.docker_host},
        )
        return ExecResult(result.returncode, result.stdout, result.stderr)

    def scheduler_report(self, name: str) -> list[str]:
        """The agent service's latest tasks (`_history`)."""
        try:
            return self._history(validate_name(name))
        except SandboxError:
            return []

    def _history(self, service: str) -> list[str]:
        """The service's latest tasks, oldest first, each as `node state (age): error`: what
        swarm says of a task that cannot run (`no suitable node (scheduling constraints not
        satisfied on 3 nodes)`, `No such image: ...`), which no container log holds."""
        rows = []
        for node, state, error in objects.ps(
            self.engine, [service], ".Node", ".CurrentState", ".Error"
        ):
            error = error.strip().strip('"')
            row = f"{node or 'no node'} {state}" + (f": {error}" if error else "")
            rows.append(printable(row))  # an error may quote a command or a path
        return rows[:HISTORY_ROWS][::-1]  # oldest first

    def logs(self, name: str) -> Logs:
        name = validate_name(name)
        out = self.engine.run("service", "logs", "--raw", name, what="service logs", check=False)
        launcher = self.exec(name, ["cat", f"{DEFAULT_LOG_PATH}/launcher.log"]).stdout
        return Logs(startup=out.stdout + out.stderr, launcher=launcher)

    def remove(self, name: str) -> None:
        """Remove the agent service, its proxy, their secret, config and network, and the
        relay, each only when its label proves this run made it; then the shared egress
        overlay if no proxy is left."""
        record = self._owner(name)
        owner = record.get("owner", "")
        engine = self.engine
        objects.remove(engine, "service", validate_name(name), owner)
        if record.get("proxy"):
            proxy = record["proxy"]
            objects.remove(engine, "service", proxy, owner)
            objects.remove(engine, "config", f"{proxy}-app", owner)
            objects.remove(engine, "secret", f"{proxy}-cfg", owner)
        # "outer": the proxy's own egress overlay of a sandbox made before they shared one
        for net in (record.get("outer", ""), record.get("inner", "")):
            if net:
                objects.remove(engine, "network", net, owner)
        if record.get("proxy"):
            egress.release(engine)
        self._remove_box(name)

    def _remove_box(self, name: str) -> None:
        box = self._box(name)
        relay.stop(box)
        if box.is_dir() and not box.is_symlink():
            shutil.rmtree(box)

    def _remove_resource(self, resource: Resource) -> None:
        details = resource.details
        name = validate_name(details["name"])
        part = details.get("part", "")
        owner = details.get("owner", "")
        if part == "box":
            self._remove_box(name)
        elif part == "relay":
            relay.stop(self._box(name))
        elif part in ("network", "service", "secret", "config", "egress"):
            host = details.get("swarm_host")
            if not host and not OWNER_FILE.exists():
                return  # made on the local cluster, which is gone and took it along
            engine = Engine(self._binary, host or self._manager_host())
            if part == "egress":
                egress.release(engine)
            else:
                objects.remove(engine, part, details.get("network") or details["object"], owner)
        else:
            raise SandboxError(f"swarm: unknown part {part!r} of {resource.ref}")

    def list(self) -> list[str]:
        out = self.engine.run(
            "service",
            "ls",
            "--filter",
            f"label={LABEL}",
            "--format",
            "{{.Name}}",
            what="service ls",
            check=False,
        ).stdout
        return sorted(n for n in out.split() if not n.startswith(objects.PROXY_PREFIX))

    def removers(self) -> dict[Kind, Remover]:
        return {Kind.SANDBOX: self._remove_resource, Kind.SECRET: self.secrets.remove_recorded}

    # -- secrets: the keychain's (`Secrets`); the proxy's swarm secret is made at create
    def set_secret(self, sandbox: str, secret: Secret) -> None:
        self.secrets.set(sandbox, secret)

    def has_secret(self, sandbox: str, host: str) -> bool:
        return self.secrets.has(sandbox, host)

    def remove_secret(self, sandbox: str, host: str, placeholder: str) -> None:
        self.secrets.remove(sandbox, host)


def _constraints(spec: SandboxSpec) -> list[str]:
    """The sandbox's placement constraints as options, for its agent and its proxy alike:
    the nodes a sandbox may run on are the only ones its keys go to."""
    return [part for c in spec.limits.constraints for part in ("--constraint", c)]
