"""A "box": one sandbox's agent as host processes under a runtime directory.

Shared by the `local` runtime and the sbx simulator. Layout of a box root:

    band.yaml        the workspace's band.yaml with runtime paths moved into this box
    venv/ state/ logs/   the launcher's runtime paths (owned by the agent uid)
    startup.log      the agent's stdout/stderr (what `/var/log/sbx-kit-startup.log` is in a VM)
    proxy.json       ports of the credential proxy (`boxnet`), when one runs
    ../.uv-cache     the uv cache, shared by the boxes beside this one
    ../.sdk          (as root) the image-like SDK home the agent runs from, shared likewise

The launcher and the agent it execs carry the tag `box_tag(root)` in their environment,
the proxy `boxnet.proxy_tag(root)`, so `stop` finds them all even after the parent died.
As root the agent runs as the launcher's agent uid through `setpriv`, with the python of
an SDK home built like the image's /opt/band (root's pythons are mode 0700); as another
user it runs as that user with `BAND_KIT_AGENT_UID` set to its uid.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import yaml
from filelock import FileLock

from bandkit.errors import BandkitError
from bandkit.fsio import UnsafePathError, read_regular, write_atomic
from bandkit.runtimes import processes
from bandkit.runtimes.boxnet import (
    Injection,
    ProxyError,
    host_network_env,
    proxy_tag,
    start_proxy,
    trust_bundle,
)

SDK_ENV = "BANDKIT_AGENT_SDK"  # a prebuilt SDK home to share (tests); else built per run dir
SDK_BUILD_TIMEOUT_S = 900.0
RUNTIME_DIRS = {
    "environmentPath": "venv",
    "statePath": "state",
    "cachePath": "cache",
    "logPath": "logs",
}


class BoxError(BandkitError):
    """A box could not be started or inspected; the message names the fix."""


def box_tag(root: Path) -> str:
    """The tag of the box's agent processes (launcher, then the agent it execs)."""
    return f"bandkit-box:{root}"


def agent_uid() -> int:
    from launcher.constants import AGENT_UID

    return AGENT_UID if os.geteuid() == 0 else os.getuid()


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
    from bandkit.runtimes.sdk_home import SdkHome, SdkHomeError, build_sdk_home

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
    return [*setpriv_argv(agent_uid()), env["BAND_SDK_PYTHON"]], env


def setpriv_argv(uid: int) -> list[str]:
    """Become `uid` with no groups, no capabilities (inheritable or bounding) and
    no-new-privs, so neither the agent nor anything it execs can regain root."""
    return [
        "setpriv",
        f"--reuid={uid}",
        f"--regid={uid}",
        "--clear-groups",
        "--inh-caps=-all",
        "--bounding-set=-all",
        "--no-new-privs",
        "--",
    ]


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
        # The workspace is the sandbox's: never follow a link it planted (a symlink or a
        # hard link to a file it could not read itself) while reading as root.
        raw, _ = read_regular(source, what="workspace band.yaml")
        data = yaml.safe_load(raw.decode("utf-8"))
    except UnsafePathError as exc:
        raise BoxError(f"{exc}; refusing to start the box") from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise BoxError(f"cannot read {source}: {exc}") from None
    if not isinstance(data, dict):
        raise BoxError(f"{source} must be a YAML mapping")
    runtime = dict(data.get("runtime") or {})
    runtime.update({key: str(root / name) for key, name in RUNTIME_DIRS.items()})
    runtime["cachePath"] = str(_shared_cache(root))
    data["runtime"] = runtime
    config = root / "band.yaml"
    # Never world-readable: as root it is root's, readable by the agent's group only
    # (the agent reads it, cannot change it); otherwise it is this user's alone.
    as_root = os.geteuid() == 0
    write_atomic(config, yaml.safe_dump(data, sort_keys=False), mode=0o640 if as_root else 0o600)
    if as_root:
        os.chown(config, 0, uid, follow_symlinks=False)
    return config


def _shared_cache(root: Path) -> Path:
    """One uv cache per run directory, owned by the agent uid (warm syncs across boxes)."""
    cache = root.parent / ".uv-cache"
    cache.mkdir(mode=0o755, exist_ok=True)
    if os.geteuid() == 0 and cache.stat().st_uid != agent_uid():
        os.chown(cache, agent_uid(), agent_uid())
    return cache


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
    try:
        child_env.update(start_proxy(root, workspace, env, injections, ca_pem=ca_pem))
    except ProxyError as exc:
        raise BoxError(str(exc)) from None
    prefix, _ = interpreter(root)
    # 0600 and never through a planted link: the agent's output may name its endpoints.
    log_fd = os.open(
        root / "startup.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600
    )
    if os.geteuid() == 0:  # the agent (and `sbx exec cat` in the simulator) reads it back
        os.fchown(log_fd, agent_uid(), agent_uid())
    log = os.fdopen(log_fd, "ab")
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
