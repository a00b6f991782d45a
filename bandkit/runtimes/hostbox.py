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
import sysconfig
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import yaml

from bandkit.runtimes import processes

REPO_ROOT = Path(__file__).resolve().parents[2]
SYSTEM_PYTHON = Path("/usr/bin/python3")
AGENT_UID_DEFAULT = 1000
PROXY_START_TIMEOUT_S = 15.0
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
    return f"bandkit-box:{root}"


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


def _readable_by_all(path: Path) -> bool:
    for part in [path, *path.parents]:
        mode = part.stat().st_mode
        need = 0o005 if part.is_dir() else 0o004
        if mode & need != need:
            return False
    return True


def interpreter() -> tuple[list[str], dict[str, str]]:
    """argv prefix and extra env that run the launcher as the agent uid."""
    site = sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]})
    pythonpath = os.pathsep.join([*site, str(REPO_ROOT)])
    if os.geteuid() != 0:
        return [sys.executable], {"BAND_KIT_AGENT_UID": str(os.getuid())}
    if not SYSTEM_PYTHON.is_file():
        raise BoxError(f"running as root needs {SYSTEM_PYTHON} to run the agent as uid 1000")
    want = f"{sys.version_info.major}.{sys.version_info.minor}"
    got = subprocess.run(
        [str(SYSTEM_PYTHON), "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    ).stdout.strip()
    if got != want:
        raise BoxError(
            f"{SYSTEM_PYTHON} is {got or 'unusable'}, need {want} to share site-packages"
        )
    for path in [*map(Path, site), REPO_ROOT]:
        if not _readable_by_all(path):
            raise BoxError(f"{path} must be world-readable for the agent uid to import from it")
    uid = str(agent_uid())
    setpriv = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]
    return [*setpriv, str(SYSTEM_PYTHON)], {"PYTHONPATH": pythonpath}


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
    data["runtime"] = runtime
    config = root / "band.yaml"
    config.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    os.chmod(config, 0o644)
    uv_copy = root.parent / "bin" / "uv"
    if not uv_copy.exists():
        uv_copy.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        tmp = uv_copy.with_suffix(".tmp")
        shutil.copy2(find_uv(), tmp)
        os.chmod(tmp, 0o755)  # noqa: S103 - the agent uid runs it
        os.replace(tmp, uv_copy)
    return config


def _endpoints(workspace: Path, env: Mapping[str, str]) -> dict[str, str]:
    data = yaml.safe_load((workspace / "band.yaml").read_text(encoding="utf-8")) or {}
    band = data.get("band") or {}
    from launcher.constants import DEFAULT_REST_URL, DEFAULT_WS_URL

    return {
        "BAND_REST_URL": env.get("BAND_REST_URL") or band.get("restUrl") or DEFAULT_REST_URL,
        "BAND_WS_URL": env.get("BAND_WS_URL") or band.get("wsUrl") or DEFAULT_WS_URL,
    }


def _start_proxy(
    root: Path, workspace: Path, env: Mapping[str, str], injections: Sequence[Injection]
) -> dict[str, str]:
    """Start the credential proxy for endpoints whose host an injection targets."""
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
            routes.append({"upstream": url, "swaps": swaps})
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
        env={**os.environ, processes.TAG_ENV: box_tag(root)},
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
    return rewritten


def base_env(root: Path, workspace: Path, env: Mapping[str, str]) -> dict[str, str]:
    prefix_env = interpreter()[1]
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        **prefix_env,
        "WORKSPACE_DIR": str(workspace),
        "BAND_SDK_UV": str(root.parent / "bin" / "uv"),
        **env,
        processes.TAG_ENV: box_tag(root),
    }


def start(
    root: Path,
    *,
    workspace: Path,
    env: Mapping[str, str],
    injections: Sequence[Injection] = (),
) -> None:
    """Start the box's agent (`python -m launcher`) unless it already runs."""
    if status(root) == "running":
        return
    workspace = Path(workspace)
    config = _prepare_root(root, workspace)
    child_env = base_env(root, workspace, env)
    child_env["BAND_KIT_CONFIG_PATH"] = str(config)
    child_env.update(_start_proxy(root, workspace, env, injections))
    prefix, _ = interpreter()
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
    stdin: bytes | None = None,
    timeout: float | None = None,
) -> int:
    """Run a command in the box as the agent uid; its exit code passes through."""
    root.mkdir(mode=0o755, parents=True, exist_ok=True)
    prefix, _ = interpreter()
    child_env = base_env(root, Path(workspace), env)
    setpriv = prefix[:-1]  # drop the interpreter: run argv itself as the agent uid
    full = [*setpriv, *argv]
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
        return 0
    result = subprocess.run(
        full, input=stdin, env=child_env, cwd=cwd or str(workspace), check=False, timeout=timeout
    )
    return result.returncode
