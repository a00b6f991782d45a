"""A "box": one sandbox's agent as host processes under a runtime directory.

Shared by the `local` runtime and the sbx simulator. Layout of a box root:

    band.yaml        the workspace's band.yaml with runtime paths moved into this box
    venv/ state/ cache/ logs/   the launcher's runtime paths (owned by the agent uid)
    startup.log      the agent's stdout/stderr (what `/var/log/sbx-kit-startup.log` is in a VM)
    proxy.json       ports of the credential proxy (see `keyproxy`), when one runs

Every process of a box carries the tag `box_tag(root)` in its environment, so `stop`
finds them all (launcher, agent, proxy) even after the parent died. As root the agent
runs as the launcher's agent uid through `setpriv` with Debian's /usr/bin/python3 and the
project's site-packages on PYTHONPATH (root's pythons and /tmp/pytest-of-root are 0700);
as another user it runs as that user with `BAND_KIT_AGENT_UID` set to its uid.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import yaml
from filelock import FileLock

from bandkit.runtimes import processes

SDK_ENV = "BANDKIT_AGENT_SDK"  # a prebuilt SDK home to share (tests); else built per run dir
SDK_BUILD_TIMEOUT_S = 900.0
PROXY_START_TIMEOUT_S = 15.0
INSECURE_ENV = "BAND_KIT_ALLOW_INSECURE_ENDPOINTS"  # == launcher.constants (tested)
RUNTIME_DIRS = {
    "environmentPath": "venv",
    "statePath": "state",
    "cachePath": "cache",
    "logPath": "logs",
}


class BoxError(Exception):
    """A box could not be started or inspected; the message names the fix."""


@dataclass(frozen=True)
class Injection:
    """A proxy-managed secret: the placeholder the box sees, the hosts it is swapped for."""

    hosts: tuple[str, ...]
    placeholder: str
    value: str


def box_tag(root: Path) -> str:
    """The tag of the box's agent processes (launcher, then the agent it execs)."""
    return f"bandkit-box:{root}"


def proxy_tag(root: Path) -> str:
    """The tag of the box's credential proxy (host side, not part of the agent)."""
    return f"bandkit-box-proxy:{root}"


# Host settings the agent needs to reach package indexes the way this host does (an
# egress proxy, a corporate CA); like sbx setting HTTP(S)_PROXY in the VM. Values are
# passed through unchanged, and loopback is always exempt from a proxy.
HOST_NETWORK_ENV = (
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "UV_INDEX_URL",
    "UV_DEFAULT_INDEX",
    "UV_EXTRA_INDEX_URL",
    "UV_INDEX",
    "UV_NATIVE_TLS",
    "UV_SYSTEM_CERTS",
    "UV_HTTP_TIMEOUT",
)
LOOPBACK_NO_PROXY = "127.0.0.1,localhost,::1"


def host_network_env() -> dict[str, str]:
    env = {name: os.environ[name] for name in HOST_NETWORK_ENV if os.environ.get(name)}
    for name in ("NO_PROXY", "no_proxy"):
        current = os.environ.get(name, "")
        env[name] = f"{current},{LOOPBACK_NO_PROXY}" if current else LOOPBACK_NO_PROXY
    return env


def agent_uid() -> int:
    from launcher.constants import AGENT_UID

    return AGENT_UID if os.geteuid() == 0 else os.getuid()


def host_matches(pattern: str, host: str) -> bool:
    """sbx host patterns: exact, `*.x` (one label), `**.x` (any depth), `**` (all)."""
    pattern = pattern.split(":", 1)[0] if pattern.count(":") == 1 else pattern
    if pattern == "**":
        return True
    if pattern.startswith("**."):
        return host.endswith(pattern[2:]) or host == pattern[3:]
    if pattern.startswith("*."):
        suffix = pattern[1:]
        return host.endswith(suffix) and "." not in host[: -len(suffix)]
    return pattern == host


def find_uv() -> Path:
    """A real uv binary (not a pyenv shell shim)."""
    candidates = [os.environ.get("UV", ""), shutil.which("uv") or ""]
    candidates.append(str(Path(os.path.realpath(sys.executable)).parent / "uv"))
    for candidate in candidates:
        path = Path(candidate)
        if candidate and path.is_file():
            with path.open("rb") as fh:
                if fh.read(4) == b"\x7fELF":
                    return path
    raise BoxError("no uv binary found (install uv: https://docs.astral.sh/uv/)")


def sdk_home_dir(root: Path) -> Path:
    """Where the box's image-like SDK home lives: $BANDKIT_AGENT_SDK or beside the box."""
    return Path(os.environ.get(SDK_ENV) or root.parent / ".sdk")


def ensure_sdk_home(path: Path) -> dict[str, str]:
    """Build (once, under a lock) a world-readable SDK home like the image's /opt/band."""
    from bandkit.bench.launcher_sdk import SdkHome, SdkHomeError, build_sdk_home

    done = path / ".complete"
    if not done.exists():
        path.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        with FileLock(str(path) + ".lock", timeout=SDK_BUILD_TIMEOUT_S):
            if not done.exists():
                if path.exists():
                    shutil.rmtree(path)
                try:
                    build_sdk_home(path, with_band_sdk=False)
                except SdkHomeError as exc:
                    raise BoxError(f"cannot build the agent SDK home in {path}: {exc}") from None
                done.write_text("ok\n", encoding="utf-8")
    home = SdkHome(root=path, python=path / "venv" / "bin" / "python", uv=path / "bin" / "uv")
    return home.environment()


def interpreter(root: Path) -> tuple[list[str], dict[str, str]]:
    """argv prefix and env that run `python -m launcher` as the agent uid.

    As root: setpriv to the agent uid and the python of an image-like SDK home (root's
    own pythons are unreadable to uid 1000). Otherwise: this python, as this user.
    """
    if os.geteuid() != 0:
        uv = find_uv()
        return [sys.executable], {"BAND_KIT_AGENT_UID": str(os.getuid()), "BAND_SDK_UV": str(uv)}
    if shutil.which("setpriv") is None:
        raise BoxError("running sandboxes as root needs setpriv (apt-get install util-linux)")
    env = ensure_sdk_home(sdk_home_dir(root))
    uid = str(agent_uid())
    setpriv = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]
    return [*setpriv, env["BAND_SDK_PYTHON"]], env


def _prepare_root(root: Path, workspace: Path) -> Path:
    """Create the box dirs (agent-owned runtime dirs) and the box's band.yaml."""
    root.mkdir(mode=0o755, parents=True, exist_ok=True)
    os.chmod(root, 0o755)  # noqa: S103 - the agent uid must traverse it
    uid = agent_uid()
    for name in RUNTIME_DIRS.values():
        path = root / name
        path.mkdir(mode=0o755, exist_ok=True)
        if os.geteuid() == 0:
            os.chown(path, uid, uid)
    source = workspace / "band.yaml"
    try:
        data = yaml.safe_load(source.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise BoxError(f"cannot read {source}: {exc}") from None
    if not isinstance(data, dict):
        raise BoxError(f"{source} must be a YAML mapping")
    runtime = dict(data.get("runtime") or {})
    runtime.update({key: str(root / name) for key, name in RUNTIME_DIRS.items()})
    runtime["cachePath"] = str(_shared_cache(root))
    data["runtime"] = runtime
    config = root / "band.yaml"
    config.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    os.chmod(config, 0o644)
    return config


def _shared_cache(root: Path) -> Path:
    """One uv cache per run directory, owned by the agent uid (warm syncs across boxes)."""
    cache = root.parent / ".uv-cache"
    cache.mkdir(mode=0o755, exist_ok=True)
    if os.geteuid() == 0 and cache.stat().st_uid != agent_uid():
        os.chown(cache, agent_uid(), agent_uid())
    return cache


def _endpoints(workspace: Path, env: Mapping[str, str]) -> dict[str, str]:
    path = workspace / "band.yaml"
    data = (yaml.safe_load(path.read_text(encoding="utf-8")) if path.is_file() else None) or {}
    band = data.get("band") or {}
    from launcher.constants import DEFAULT_REST_URL, DEFAULT_WS_URL

    return {
        "BAND_REST_URL": env.get("BAND_REST_URL") or band.get("restUrl") or DEFAULT_REST_URL,
        "BAND_WS_URL": env.get("BAND_WS_URL") or band.get("wsUrl") or DEFAULT_WS_URL,
    }


def start_proxy(
    root: Path,
    workspace: Path,
    env: Mapping[str, str],
    injections: Sequence[Injection],
    *,
    ca_pem: str | None = None,
) -> dict[str, str]:
    """Start the credential proxy for endpoints whose host an injection targets; return
    the env that points the agent at it.

    The agent reaches the proxy over plain loopback HTTP and the proxy reaches a TLS
    platform over TLS (trusting `ca_pem` as well as the system roots), so a rewritten
    https/wss endpoint comes with the launcher's opt-in for non-TLS endpoints: the only
    plaintext hop is 127.0.0.1 on this host.
    """
    endpoints = _endpoints(workspace, env)
    routes: list[dict[str, object]] = []
    names: list[tuple[str, str]] = []
    for name, url in endpoints.items():
        parts = urlsplit(url)
        swaps = [
            [i.placeholder, i.value]
            for i in injections
            if any(host_matches(h, parts.hostname or "") for h in i.hosts)
        ]
        if swaps:
            routes.append({"upstream": url, "swaps": swaps, "ca_pem": ca_pem or ""})
            names.append((name, url))
    if not routes:
        return {}
    ports_file = root / "proxy.json"
    ports_file.unlink(missing_ok=True)
    proc = subprocess.Popen(
        [sys.executable, "-m", "bandkit.runtimes.keyproxy", str(ports_file)],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=(root / "proxy.log").open("ab"),
        env={**os.environ, processes.TAG_ENV: proxy_tag(root)},
        start_new_session=True,
    )
    assert proc.stdin is not None
    proc.stdin.write(json.dumps({"routes": routes}).encode())
    proc.stdin.close()
    deadline = time.monotonic() + PROXY_START_TIMEOUT_S
    while not ports_file.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise BoxError(f"credential proxy did not start; see {root / 'proxy.log'}")
        time.sleep(0.02)
    ports = json.loads(ports_file.read_text())["ports"]
    rewritten: dict[str, str] = {}
    for (name, url), port in zip(names, ports, strict=True):
        parts = urlsplit(url)
        scheme = {"https": "http", "wss": "ws"}.get(parts.scheme, parts.scheme)
        rewritten[name] = urlunsplit((scheme, f"127.0.0.1:{port}", parts.path, parts.query, ""))
        if scheme != parts.scheme:
            rewritten[INSECURE_ENV] = "1"
    return rewritten


def trust_bundle(path: Path, ca_pem: str | None) -> dict[str, str]:
    """Write this host's CA bundle plus `ca_pem` to `path`; the env that makes the agent
    (and uv) trust it. Empty when there is no platform CA."""
    if not ca_pem:
        return {}
    host = os.environ.get("SSL_CERT_FILE", "")
    parts = [Path(host).read_text(encoding="utf-8")] if host and Path(host).is_file() else []
    path.write_text("\n".join([*parts, ca_pem]), encoding="utf-8")
    path.chmod(0o644)
    return {"SSL_CERT_FILE": str(path), "REQUESTS_CA_BUNDLE": str(path)}


def base_env(root: Path, workspace: Path, env: Mapping[str, str]) -> dict[str, str]:
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        **host_network_env(),
        **interpreter(root)[1],
        "WORKSPACE_DIR": str(workspace),
        **env,
        processes.TAG_ENV: box_tag(root),
    }


def start(
    root: Path,
    *,
    workspace: Path,
    env: Mapping[str, str],
    injections: Sequence[Injection] = (),
    ca_pem: str | None = None,
) -> None:
    """Start the box's agent (`python -m launcher`) unless it already runs; `ca_pem` is the
    platform's CA when it uses TLS."""
    if status(root) == "running":
        return
    processes.terminate_tagged(proxy_tag(root))  # a proxy left by an agent that died
    workspace = Path(workspace)
    config = _prepare_root(root, workspace)
    child_env = base_env(root, workspace, env)
    child_env["BAND_KIT_CONFIG_PATH"] = str(config)
    child_env.update(trust_bundle(root / "ca-bundle.crt", ca_pem))
    child_env.update(start_proxy(root, workspace, env, injections, ca_pem=ca_pem))
    prefix, _ = interpreter(root)
    log = (root / "startup.log").open("ab")
    subprocess.Popen(
        [*prefix, "-m", "launcher"],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        env=child_env,
        cwd=str(workspace),
        start_new_session=True,
    )
    log.close()


def stop(root: Path, *, grace_s: float = 10.0) -> None:
    """SIGTERM every process of the box (launcher, agent, proxy); SIGKILL stragglers."""
    processes.terminate_tagged(box_tag(root), grace_s=grace_s)
    processes.terminate_tagged(proxy_tag(root), grace_s=grace_s)


def remove(root: Path) -> None:
    stop(root)
    if root.exists():
        shutil.rmtree(root)


def status(root: Path) -> str:
    return "running" if processes.tagged_pids(box_tag(root)) else "stopped"


def run_command(
    root: Path,
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    workspace: Path,
    cwd: str | None = None,
    detach: bool = False,
    stdin: str | None = None,
    capture: bool = False,
    timeout: float | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run a command in the box as the agent uid; its exit code passes through."""
    root.mkdir(mode=0o755, parents=True, exist_ok=True)
    prefix, _ = interpreter(root)
    child_env = base_env(root, Path(workspace), env)
    full = [*prefix[:-1], *argv]  # the setpriv part only: run argv itself as the agent uid
    if detach:
        subprocess.Popen(
            full,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=child_env,
            cwd=cwd or str(workspace),
            start_new_session=True,
        )
        return subprocess.CompletedProcess(full, 0, "", "")
    return subprocess.run(
        full,
        input=stdin,
        env=child_env,
        cwd=cwd or str(workspace),
        check=False,
        timeout=timeout,
        capture_output=capture,
        text=True,
    )
