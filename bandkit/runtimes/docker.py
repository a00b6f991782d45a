"""The `docker` runtime: plain containers from the kit image, launched like the kit does.

The container runs the kit's own startup command (from `spec.yaml`, so it cannot drift):
`band-entrypoint.sh` as the entrypoint (proxy CA, drop to uid 1000), then
`python -m launcher`. The workspace is bind-mounted at the same absolute path and
`WORKSPACE_DIR` points at it; the container's stdout/stderr is the startup log
(`docker logs`). Containers share the host network by default, because the local
emulator listens on 127.0.0.1.

Credentials: a workspace under `proxy-managed` custody gets the placeholder, and a host
credential proxy (`keyproxy`) puts the key on the wire, as sbx would. Any other workspace
gets the real value as an environment variable (through a 0600 `--env-file`, never
argv); the key is then inside the container, and `warnings` says so.
`PROXY_CA_CERT_B64` is passed when the platform uses TLS (`SandboxSpec.ca_cert_pem`). The
host's `SSL_CERT_FILE` bundle (an egress proxy's CA) plus that CA is mounted read-only as
the container's `SSL_CERT_FILE`, and host proxy variables are passed on, so `uv sync`
inside reaches the package index the way the host does.
"""

from __future__ import annotations

import base64
import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

import yaml

from bandkit.image.facts import SPEC
from bandkit.manifest import Kind, Manifest, Remover
from bandkit.runtimes import boxnet, hostbox
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
)
from bandkit.runtimes.keychain import Keychain

KIT_SPEC = SPEC
DEFAULT_IMAGE = "band-python-kit:local"
LABEL = "bandkit.sandbox"
T_QUICK = 60.0
T_CREATE = 300.0
DEFAULT_LOG_PATH = "/home/agent/.local/share/band-kit/logs"
CONTAINER_BUNDLE = "/etc/ssl/bandkit-ca-bundle.crt"
KEY_IN_CONTAINER = (
    "docker runtime: {env} is passed to container {name} as a plain environment variable; "
    "the real key is inside the container (use proxy-managed custody or sbx to keep it out)"
)


def startup_command(spec_path: Path = KIT_SPEC) -> list[str]:
    """The kit's first startup command (entrypoint + argv), read from its spec.yaml."""
    data = yaml.safe_load(spec_path.read_text(encoding="utf-8"))
    command = data["commands"]["startup"][0]["command"]
    if not isinstance(command, list) or not command:
        raise SandboxError(f"docker: {spec_path} commands.startup[0].command must be a list")
    return [str(part) for part in command]


def proxy_managed(workspace: Path) -> bool:
    try:
        data = yaml.safe_load((workspace / "band.yaml").read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError):
        return False
    credentials = data.get("credentials") or {}
    return isinstance(credentials, dict) and credentials.get("source") == "proxy-managed"


class DockerRuntime(Runtime):
    name = RuntimeName.DOCKER

    def __init__(
        self,
        run_dir: Path,
        *,
        manifest: Manifest | None = None,
        binary: str = "docker",
        network: str = "host",
    ) -> None:
        super().__init__(manifest=manifest)
        self.run_dir = Path(run_dir)
        self.binary = binary
        self.network = network
        self.keychain = Keychain(self.run_dir / "keychain")

    def _docker(
        self, *args: str, what: str, timeout: float = T_QUICK, check: bool = True
    ) -> ExecResult:
        result = run_tool([self.binary, *args], what=f"docker {what}", timeout=timeout, check=check)
        return ExecResult(result.returncode, result.stdout, result.stderr)

    def _box(self, name: str) -> Path:
        return self.run_dir / "docker" / name

    def create(self, spec: SandboxSpec) -> None:
        if self.status(spec.name) is not SandboxStatus.ABSENT:
            raise SandboxError(f"docker: container {spec.name!r} already exists; remove it first")
        for secret in spec.secrets:
            self.set_secret(spec.name, secret)
        env = {**spec.env, "WORKSPACE_DIR": str(spec.workspace)}
        if spec.ca_cert_pem:
            env["PROXY_CA_CERT_B64"] = base64.b64encode(spec.ca_cert_pem.encode()).decode()
        mounts = [(str(path), str(path), "") for path in spec.workspaces]
        bundle = self._trust_bundle(spec.name, spec.ca_cert_pem)
        if bundle is not None:
            mounts.append((str(bundle), CONTAINER_BUNDLE, ":ro"))
            env.update({"SSL_CERT_FILE": CONTAINER_BUNDLE, "REQUESTS_CA_BUNDLE": CONTAINER_BUNDLE})
        proxies = boxnet.host_network_env()
        env.update({k: v for k, v in proxies.items() if "proxy" in k.lower()})
        secrets = self.keychain.secrets(spec.name)
        if secrets and proxy_managed(spec.workspace):
            env.update(
                self._start_proxy(spec.name, spec.workspace, spec.env, secrets, spec.ca_cert_pem)
            )
            env.update({s.env: s.placeholder for s in secrets})
        else:
            for secret in secrets:
                self.warn(KEY_IN_CONTAINER.format(env=secret.env, name=spec.name))
                env[secret.env] = secret.value
        entrypoint, *command = startup_command()
        self.record(Kind.SANDBOX, spec.name, name=spec.name)
        argv = ["create", "--name", spec.name, "--label", f"{LABEL}={spec.name}"]
        argv += ["--network", self.network, "--entrypoint", entrypoint]
        for source, target, mode in mounts:
            argv += ["--volume", f"{source}:{target}{mode}"]
        with _env_file(env) as env_file:
            argv += ["--env-file", env_file, spec.image or DEFAULT_IMAGE, *command]
            self._docker(*argv, what="create", timeout=T_CREATE)
        self.start(spec.name)

    def _trust_bundle(self, name: str, ca_pem: str | None) -> Path | None:
        """The host's CA bundle (SSL_CERT_FILE: a TLS-intercepting egress proxy's CA) plus
        the platform's CA, for uv and the agent inside; None when the host sets neither."""
        host = os.environ.get("SSL_CERT_FILE", "")
        if not (host and Path(host).is_file()) and not ca_pem:
            return None
        parts = [Path(host).read_text(encoding="utf-8")] if host and Path(host).is_file() else []
        parts += [ca_pem] if ca_pem else []
        box = self._box(name)
        box.mkdir(mode=0o755, parents=True, exist_ok=True)
        bundle = box / "ca-bundle.crt"
        bundle.write_text("\n".join(parts), encoding="utf-8")
        bundle.chmod(0o644)
        return bundle

    def _start_proxy(
        self,
        name: str,
        workspace: Path,
        env: Mapping[str, str],
        secrets: Sequence[Secret],
        ca_pem: str | None,
    ) -> dict[str, str]:
        box = self._box(name)
        box.mkdir(mode=0o755, parents=True, exist_ok=True)
        hostbox.stop(box)  # a restart gets a fresh proxy
        injections = [boxnet.Injection(s.hosts, s.placeholder, s.value) for s in secrets]
        try:
            urls = boxnet.start_proxy(box, workspace, env, injections, ca_pem=ca_pem)
        except hostbox.BoxError as exc:
            raise SandboxError(f"docker: credential proxy for {name}: {exc}") from None
        (box / "endpoints.json").write_text(json.dumps(urls), encoding="utf-8")
        return urls

    def start(self, name: str) -> None:
        self._docker("start", name, what="start")

    def stop(self, name: str) -> None:
        self._docker("stop", "--time", "20", name, what="stop", timeout=T_QUICK)

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
            "inspect", "--format", "{{.State.Running}}", name, what="inspect", check=False
        )
        if result.returncode != 0:
            return SandboxStatus.ABSENT
        running = result.stdout.strip() == "true"
        return SandboxStatus.RUNNING if running else SandboxStatus.STOPPED

    def logs(self, name: str) -> Logs:
        out = run_tool(
            [self.binary, "logs", name], what="docker logs", timeout=T_QUICK, check=False
        )
        launcher = self.exec(name, ["cat", f"{DEFAULT_LOG_PATH}/launcher.log"]).stdout
        return Logs(startup=out.stdout + out.stderr, launcher=launcher)

    def remove(self, name: str) -> None:
        hostbox.stop(self._box(name))
        if self.status(name) is not SandboxStatus.ABSENT:
            self._docker("rm", "--force", name, what="rm")
        if self.status(name) is not SandboxStatus.ABSENT:
            raise SandboxError(f"docker rm --force {name} returned but the container remains")

    def list(self) -> list[str]:
        out = self._docker(
            "ps", "--all", "--filter", f"label={LABEL}", "--format", "{{.Names}}", what="ps"
        ).stdout
        return sorted(out.split())

    def set_secret(self, sandbox: str, secret: Secret) -> None:
        self.record(Kind.SECRET, sandbox, secret.env, sandbox=sandbox, hosts=",".join(secret.hosts))
        self.keychain.put(sandbox, secret)

    def has_secret(self, sandbox: str, host: str) -> bool:
        return self.keychain.has(sandbox, host)

    def remove_secret(self, sandbox: str, host: str, placeholder: str) -> None:
        self.keychain.drop(sandbox, host=host)

    def removers(self) -> dict[Kind, Remover]:
        return {
            Kind.SANDBOX: lambda r: self.remove(r.details["name"]),
            Kind.SECRET: lambda r: self.keychain.drop(
                r.details["sandbox"], env=r.key.rsplit("/", 1)[1]
            ),
        }


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
