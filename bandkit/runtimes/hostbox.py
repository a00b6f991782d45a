"""A "box": one sandbox's agent as host processes under a runtime directory.

Shared by the `local` runtime and the sbx simulator. Layout of a box root:

    band.yaml        the workspace's band.yaml with runtime paths moved into this box
    venv/ state/ logs/ cache/   the launcher's runtime paths, owned by the box's uid
                     (cache/ is the box's own uv cache: no other box reads or writes it;
                     as root it starts as a copy of the machine's seed its SDK home recorded,
                     `seed_cache`)
    workspace/       (only when the box uid cannot reach the workspace) the staged copy
                     the agent sees instead, root's and read-only (`boxworkspace`)
    startup.log      the agent's stdout/stderr (what `/var/log/sbx-kit-startup.log` is in a VM)
    proxy.json       ports of the credential proxy (`boxnet`), when one runs
    ../.sdk          (as root) the image-like SDK home the agent runs from, shared by the
                     boxes beside this one (root's, world-readable, written by no box)

As root each box runs as a uid of its own (`boxuids`: leased before first use, passed in
by the caller, which records it), through `setpriv` with no groups, no capabilities and
no-new-privs, with the python of an SDK home built like the image's /opt/band (root's
pythons are mode 0700). `stop` ends every process of that uid, whatever it did to its
environment. As another user the agent runs as that user (`BAND_KIT_AGENT_UID` set to
its uid): no isolation between boxes, and `stop` can only find the agent by its tag.
The launcher and the agent it execs carry the tag `box_tag(root)` in their environment,
the proxy `boxnet.proxy_tag(root)` (the proxy runs as the caller, never as the box).
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import yaml
from filelock import FileLock

from bandkit import processes, tools
from bandkit.errors import BandkitError
from bandkit.fsio import UnsafePathError, read_regular, write_atomic
from bandkit.runtimes import boxuids, boxworkspace
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
SEED_COPY_TIMEOUT_S = 120.0
RUNTIME_DIR_MODE = 0o700  # the box's alone: uv makes some files (its cache's .lock) 0666
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


def box_uid(root: Path) -> int:
    """The uid the box at `root` runs as: as root its lease (taken now when it has none),
    else this user's uid. A caller with a manifest records it before the first use."""
    return boxuids.POOL.allocate(root) if boxuids.isolated() else os.getuid()


def known_uid(root: Path) -> int | None:
    """The uid leased to the box at `root` (None: none, or not root)."""
    return boxuids.POOL.lease_for(root) if boxuids.isolated() else None


def release_uid(root: Path, uid: int | None) -> None:
    """Give back the box's uid once its processes are gone (as root; else a no-op)."""
    if uid is not None and boxuids.isolated():
        try:
            boxuids.POOL.release(uid, root)
        except boxuids.UidError as exc:
            raise BoxError(str(exc)) from None


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
    """Build (once, under a lock) a world-readable SDK home like the image's /opt/band,
    and the uv cache seed every box's cache starts from (`sdk_home.ensure_seed`)."""
    from bandkit.runtimes.sdk_home import SdkHome, SdkHomeError, build_sdk_home, ensure_seed

    done = path / ".complete"
    if not done.exists():
        path.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        with FileLock(str(path) + ".lock", timeout=SDK_BUILD_TIMEOUT_S):
            if not done.exists():
                if path.exists():
                    shutil.rmtree(path)
                try:
                    ensure_seed(build_sdk_home(path, with_band_sdk=False))
                except SdkHomeError as exc:
                    raise BoxError(f"cannot build the agent SDK home in {path}: {exc}") from None
                done.write_text("ok\n", encoding="utf-8")
    home = SdkHome(root=path, python=path / "venv" / "bin" / "python", uv=path / "bin" / "uv")
    return home.environment()


def interpreter(root: Path, uid: int) -> tuple[list[str], dict[str, str]]:
    """argv prefix and env that run `python -m launcher` as the box's `uid`.

    As root: setpriv to `uid` and the python of an image-like SDK home (root's own
    pythons are unreadable to other uids). Otherwise: this python, as this user.
    """
    if os.geteuid() != 0:
        uv = find_uv()
        return [sys.executable], {"BAND_KIT_AGENT_UID": str(os.getuid()), "BAND_SDK_UV": str(uv)}
    if uid == 0:
        raise BoxError("a box never runs as root; pass the box's own uid")
    if shutil.which("setpriv") is None:
        raise BoxError("running sandboxes as root needs setpriv (apt-get install util-linux)")
    env = ensure_sdk_home(sdk_home_dir(root))
    return [*setpriv_argv(uid), env["BAND_SDK_PYTHON"]], {**env, "BAND_KIT_AGENT_UID": str(uid)}


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


def _prepare_root(root: Path, workspace: Path, uid: int, cache: Path | None = None) -> Path:
    """Create the box dirs (runtime dirs owned by `uid`; the uv cache, in the box or at
    `cache` when it lives outside, seeded when new and handed over to `uid`) and the
    box's band.yaml."""
    root.mkdir(mode=0o755, parents=True, exist_ok=True)
    os.chmod(root, 0o755)  # noqa: S103 - the box uid must traverse it
    paths = {key: root / name for key, name in RUNTIME_DIRS.items()}
    if cache is not None:
        paths["cachePath"] = cache
    seed_cache(paths["cachePath"], sdk_home_dir(root))
    hand_over(paths["cachePath"], uid)
    for key, path in paths.items():
        if key == "cachePath":
            continue
        if os.geteuid() == 0 and (path.is_symlink() or _owner(path) not in (None, uid)):
            # Left by another uid (a box of an older version, say): never chown what it
            # wrote (a planted hard link would be handed over too); start it afresh.
            _discard(path)
        path.mkdir(mode=RUNTIME_DIR_MODE, exist_ok=True)
        if os.geteuid() == 0:
            os.chown(path, uid, uid, follow_symlinks=False)
        os.chmod(path, RUNTIME_DIR_MODE, follow_symlinks=False)
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
    runtime.update({key: str(path) for key, path in paths.items()})
    data["runtime"] = runtime
    config = root / "band.yaml"
    # Never world-readable: as root it is root's, readable by the agent's group only
    # (the agent reads it, cannot change it); otherwise it is this user's alone.
    as_root = os.geteuid() == 0
    write_atomic(config, yaml.safe_dump(data, sort_keys=False), mode=0o640 if as_root else 0o600)
    if as_root:
        os.chown(config, 0, uid, follow_symlinks=False)
    return config


def seed_cache(cache: Path, sdk_home: Path) -> None:
    """As root, a uv cache that does not exist yet starts as root's copy of the seed the
    SDK home recorded (`sdk_home.ensure_seed`: files root made, links uv made; modes and
    times kept, so the compiled files stay valid), which `hand_over` then gives to the
    box's uid. The copy is made beside it and renamed into place, so a kill mid-copy never
    leaves a cache with half a package in it. Without a seed (an SDK home from before
    seeds, or not root) the cache starts empty."""
    from bandkit.runtimes.sdk_home import recorded_seed

    if os.geteuid() != 0 or os.path.lexists(cache):
        return
    seed = recorded_seed(sdk_home)
    if seed is None:
        return
    partial = cache.with_name(f".{cache.name}.seeding")
    if os.path.lexists(partial):
        _discard(partial)
    tools.run(
        ["cp", "-a", "--", str(seed), str(partial)],
        what="seeding a box's uv cache",
        timeout=SEED_COPY_TIMEOUT_S,
        error=BoxError,
    )
    partial.rename(cache)


def hand_over(cache: Path, uid: int) -> None:
    """Make `cache` (a uv cache kept across boxes of one name) `uid`'s own, 0700.

    Only a parked cache (root's, see `park`) or one `uid` already owns is kept: anything
    else (a cache some other uid owns, one holding a hard link or a special file) is
    deleted first, never re-owned, so no file outside it can change hands through it."""
    if os.geteuid() != 0:
        cache.mkdir(mode=RUNTIME_DIR_MODE, parents=True, exist_ok=True)
        return
    owner = _owner(cache)
    parked = owner == 0 and not cache.is_symlink() and _plain(cache)
    if owner is not None and (cache.is_symlink() or (owner != uid and not parked)):
        _discard(cache)
        owner = None
    cache.mkdir(mode=RUNTIME_DIR_MODE, parents=True, exist_ok=True)
    if owner == 0:
        _lchown_tree(cache, uid)
    os.chown(cache, uid, uid, follow_symlinks=False)
    os.chmod(cache, RUNTIME_DIR_MODE, follow_symlinks=False)


def park(cache: Path) -> None:
    """After its box is gone (its uid runs nothing): make `cache` root's, so whoever gets
    that uid next cannot reach it; `hand_over` gives it to the next box of the name."""
    if os.geteuid() != 0 or _owner(cache) is None:
        return
    if cache.is_symlink() or not _plain(cache):
        _discard(cache)
        return
    _lchown_tree(cache, 0)
    os.chmod(cache, RUNTIME_DIR_MODE, follow_symlinks=False)


def _plain(top: Path) -> bool:
    """True when the tree holds only directories, links, and files with one link each
    (the box's venv, which shared the cache's files, is deleted by then)."""
    for directory, dirs, files in os.walk(top, followlinks=False):
        for name in (*dirs, *files):
            info = os.lstat(os.path.join(directory, name))
            mode = info.st_mode
            if stat.S_ISREG(mode) and info.st_nlink > 1:
                return False
            if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISLNK(mode)):
                return False
    return True


def _lchown_tree(top: Path, uid: int) -> None:
    for directory, dirs, files in os.walk(top, followlinks=False):
        for name in (*dirs, *files):
            os.lchown(os.path.join(directory, name), uid, uid)
    os.lchown(top, uid, uid)


def _owner(path: Path) -> int | None:
    try:
        return path.lstat().st_uid
    except FileNotFoundError:
        return None


def _discard(path: Path) -> None:
    if path.is_symlink() or not path.is_dir():
        path.unlink(missing_ok=True)
    else:
        shutil.rmtree(path)


def base_env(root: Path, workspace: Path, env: Mapping[str, str], uid: int) -> dict[str, str]:
    """The box's environment: `env` over the defaults, but WORKSPACE_DIR is always where
    the box sees its workspace (`workspace`: a staged copy when the original is out of its
    uid's reach, whatever path `env` gives)."""
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        **host_network_env(),
        **interpreter(root, uid)[1],
        **env,
        "WORKSPACE_DIR": str(workspace),
        processes.TAG_ENV: box_tag(root),
    }


def agent_workspace(root: Path, workspace: Path, uid: int, *, fresh: bool = False) -> Path:
    """The workspace as the box sees it: in place, or staged when `uid` cannot reach it."""
    try:
        return boxworkspace.agent_workspace(root, Path(workspace), uid, fresh=fresh)
    except boxworkspace.StageError as exc:
        raise BoxError(str(exc)) from None


def start(
    root: Path,
    *,
    workspace: Path,
    env: Mapping[str, str],
    injections: Sequence[Injection] = (),
    ca_pem: str | None = None,
    uid: int,
    cache: Path | None = None,
) -> None:
    """Start the box's agent (`python -m launcher`) as `uid` unless it already runs;
    `ca_pem` is the platform's CA when it uses TLS; `cache`: the box's uv cache when it is
    kept outside the box root (`hand_over`), else `<root>/cache`."""
    if status(root, uid=uid) == "running":
        return
    stop(root, uid=uid)  # what a dead agent left: its proxy, its uid's stray processes
    workspace = Path(workspace)
    # First: it makes the SDK home, whose recorded seed the new box's cache is copied from.
    prefix, _ = interpreter(root, uid)
    config = _prepare_root(root, workspace, uid, cache)
    seen = agent_workspace(root, workspace, uid, fresh=True)
    child_env = base_env(root, seen, env, uid)
    child_env["BAND_KIT_CONFIG_PATH"] = str(config)
    child_env.update(trust_bundle(root / "ca-bundle.crt", ca_pem))
    try:
        child_env.update(start_proxy(root, workspace, env, injections, ca_pem=ca_pem))
    except ProxyError as exc:
        raise BoxError(str(exc)) from None
    # 0600 and never through a planted link: the agent's output may name its endpoints.
    log_fd = os.open(
        root / "startup.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600
    )
    if os.geteuid() == 0:  # the agent (and `sbx exec cat` in the simulator) reads it back
        os.fchown(log_fd, uid, uid)
    log = os.fdopen(log_fd, "ab")
    subprocess.Popen(
        [*prefix, "-m", "launcher"],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        env=child_env,
        cwd=str(seen),
        start_new_session=True,
    )
    log.close()


def _own_uid(uid: int | None) -> bool:
    """Whether `uid` is a box's alone (as root, a leased uid): safe to stop as a whole."""
    return uid is not None and boxuids.isolated() and uid not in (0, os.getuid())


def stop(root: Path, *, uid: int | None = None, grace_s: float = 10.0) -> None:
    """SIGTERM every process of the box (launcher, agent, proxy); SIGKILL stragglers. With
    the box's own `uid` (as root) that is every process of the uid, whatever its
    environment; else (the caller's uid, or none known) those carrying the box's tag."""
    try:
        if uid is not None and _own_uid(uid):
            processes.terminate_uid(uid, grace_s=grace_s)
        processes.terminate_tagged(box_tag(root), grace_s=grace_s)
        processes.terminate_tagged(proxy_tag(root), grace_s=grace_s)
    except RuntimeError as exc:
        raise BoxError(f"cannot stop the box at {root}: {exc}") from None


def remove(root: Path, *, uid: int | None = None, cache: Path | None = None) -> None:
    """Stop the box, delete its root, park the uv cache it kept outside (`cache`), give
    its uid back (in that order: the uid is free only once nothing of it is left)."""
    stop(root, uid=uid)
    if root.is_symlink():
        root.unlink()
    elif root.exists():
        shutil.rmtree(root)
    if cache is not None:
        park(cache)
    release_uid(root, uid)


def status(root: Path, *, uid: int | None = None) -> str:
    """`running` while the box's launcher or agent runs (its tag, and as root its uid)."""
    pids = processes.tagged_pids(box_tag(root))
    if uid is not None and _own_uid(uid):
        # A tag another box forged does not count; root is the launcher before setpriv
        # has dropped to the box uid (a status asked right after start must see it).
        pids = [p for p in pids if {uid, 0} & set(processes.uids_of(p))]
    return "running" if pids else "stopped"


def run_command(
    root: Path,
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    workspace: Path,
    uid: int,
    cwd: str | None = None,
    detach: bool = False,
    stdin: str | None = None,
    capture: bool = False,
    timeout: float | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run a command in the box as `uid`; its exit code passes through."""
    root.mkdir(mode=0o755, parents=True, exist_ok=True)
    prefix, _ = interpreter(root, uid)
    given = Path(workspace)
    workspace = agent_workspace(root, given, uid)
    if cwd and workspace != given and Path(cwd).is_relative_to(given):
        cwd = str(workspace / Path(cwd).relative_to(given))  # the staged copy's
    child_env = base_env(root, workspace, env, uid)
    full = [*prefix[:-1], *argv]  # the setpriv part only: run argv itself as the box uid
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
