"""Local registries on 127.0.0.1 (Debian's docker-registry): a throwaway one, a kept one.

- `local_registry(folder)`: for tests and benchmarks, on a fresh port (concurrent runs, or
  a registry someone left running, stay out of the way); on exit it stops and the local
  refs naming it (which `docker push` needed) are dropped; the layers stay, the kit image
  still uses them.
- `ensure_kept(folder)` / `stop_kept(folder)`: the registry `invoke push` starts when none
  is configured. It outlives the task (its own session), and `folder/state.json` records
  its address and pid, so a later `push` reuses it and `invoke image.registry --stop`
  stops it. It prefers 127.0.0.1:5000 and keeps its address across restarts while that
  port is free, so a spec stamped with it stays valid; its storage stays in `folder/data`.
  It also carries the folder's process tag, so one whose task was killed before recording
  it is still found: `stop_kept` stops it, and `ensure_kept` replaces it.

The daemons treat all of 127.0.0.0/8 as insecure registries, so any port works.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import yaml

from bandkit import processes
from bandkit.dockercli import ImageError
from bandkit.fsio import write_private

CONFIG = """version: 0.1
storage:
  filesystem:
    rootdirectory: {root}
  delete:
    enabled: true
http:
  addr: {addr}
"""
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0
PREFERRED_ADDR = "127.0.0.1:5000"
STATE = "state.json"


def _free_loopback_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _port_free(addr: str) -> bool:
    host, port = addr.rsplit(":", 1)
    with socket.socket() as probe:
        try:
            probe.bind((host, int(port)))
        except OSError:
            return False
    return True


def _answers(addr: str) -> bool:
    try:
        return httpx.get(f"http://{addr}/v2/", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def _tag(folder: Path) -> str:
    return f"bandkit-registry:{folder.absolute()}"


def _start(folder: Path, addr: str, *, detached: bool) -> subprocess.Popen[bytes]:
    """Start a registry serving `folder/data` on `addr` and wait until it answers (a
    detached one tagged with the folder's tag first: it outlives the task)."""
    binary = shutil.which("docker-registry")
    if binary is None:
        raise ImageError("local registry: docker-registry is missing: apt-get install it")
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / "config.yml"
    config.write_text(CONFIG.format(root=folder / "data", addr=addr))
    log_path = folder / "registry.log"
    with log_path.open("ab") as log:
        proc = subprocess.Popen(
            [binary, "serve", str(config)],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            env={**os.environ, processes.TAG_ENV: _tag(folder)} if detached else None,
            start_new_session=detached,
        )
    deadline = time.monotonic() + START_TIMEOUT_S
    while not _answers(addr):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.terminate()
            raise ImageError(f"local registry did not start: {log_path.read_text()[-2000:]}")
        time.sleep(0.1)
    return proc


@contextlib.contextmanager
def local_registry(folder: Path) -> Iterator[str]:
    """Run a registry with its storage in `folder`; yield its `127.0.0.1:PORT`."""
    addr = f"127.0.0.1:{_free_loopback_port()}"
    proc = _start(folder, addr, detached=False)
    try:
        yield addr
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        _untag(addr)


@dataclass(frozen=True)
class Kept:
    """The kept registry: where it listens, and whether this call started it."""

    addr: str
    pid: int
    started: bool


def _recorded(folder: Path) -> tuple[str, int] | None:
    try:
        data = json.loads((folder / STATE).read_text(encoding="utf-8"))
        return str(data["addr"]), int(data["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _ours(pid: int, folder: Path) -> bool:
    """True while `pid` is a live (not zombie) docker-registry serving `folder`'s config."""
    arguments = processes.cmdline(pid) or ()
    config = str(folder.absolute() / "config.yml").encode()
    return processes.alive(pid) and config in arguments and b"serve" in arguments


def kept_status(folder: Path) -> Kept | None:
    """The recorded registry when it still runs and answers, else None."""
    recorded = _recorded(folder)
    if recorded is None:
        return None
    addr, pid = recorded
    if _ours(pid, folder) and _answers(addr):
        return Kept(addr, pid, started=False)
    return None


def ensure_kept(folder: Path) -> Kept:
    """The recorded registry if it runs; else start one (the recorded address when its
    port is free, else 127.0.0.1:5000 when free, else a free port) and record it."""
    folder = folder.absolute()
    running = kept_status(folder)
    if running is not None:
        return running
    processes.terminate_tagged(_tag(folder), grace_s=STOP_TIMEOUT_S)  # one on no record
    recorded = _recorded(folder)
    wanted = [recorded[0]] if recorded else []
    addr = next(
        (a for a in [*wanted, PREFERRED_ADDR] if _port_free(a)),
        f"127.0.0.1:{_free_loopback_port()}",
    )
    proc = _start(folder, addr, detached=True)
    write_private(folder / STATE, json.dumps({"addr": addr, "pid": proc.pid}) + "\n")
    return Kept(addr, proc.pid, started=True)


def stop_kept(folder: Path) -> str | None:
    """Stop the recorded registry (its storage stays) and drop the local refs naming it;
    return its address, or None when none was running."""
    folder = folder.absolute()
    recorded = _recorded(folder)
    (folder / STATE).unlink(missing_ok=True)
    addr = None
    if recorded is not None and _ours(recorded[1], folder):
        addr, pid = recorded
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        while _ours(pid, folder):
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                break
            time.sleep(0.05)
    # One on no record (its task was killed as it started it) serves the address its
    # config names.
    if processes.terminate_tagged(_tag(folder), grace_s=STOP_TIMEOUT_S) and addr is None:
        addr = _configured_addr(folder)
    if addr is not None:
        _untag(addr)
    return addr


def _configured_addr(folder: Path) -> str | None:
    try:
        config = yaml.safe_load((folder / "config.yml").read_text(encoding="utf-8"))
        return str(config["http"]["addr"])
    except (OSError, yaml.YAMLError, KeyError, TypeError):
        return None


def _untag(addr: str) -> None:
    listed = subprocess.run(
        ["docker", "image", "ls", "--digests", "--format", "{{.Repository}} {{.Tag}} {{.Digest}}"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    refs = []
    for line in listed.stdout.splitlines():
        repo, tag, digest = line.split()
        if repo.startswith(f"{addr}/"):
            refs.append(f"{repo}:{tag}" if tag != "<none>" else f"{repo}@{digest}")
    if refs:
        subprocess.run(["docker", "rmi", *refs], capture_output=True, check=False, timeout=120)
