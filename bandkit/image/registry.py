"""A throwaway registry on 127.0.0.1 (Debian's docker-registry) for tests and benchmarks.

The daemons treat all of 127.0.0.0/8 as insecure registries, so any port works, and a fresh
port keeps concurrent runs (or a registry someone left running) out of the way. On exit the
registry stops and the local refs naming it (which `docker push` needed) are dropped; the
layers stay, the kit image still uses them.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from bandkit.dockercli import ImageError

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


def _free_loopback_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def local_registry(folder: Path) -> Iterator[str]:
    """Run a registry with its storage in `folder`; yield its `127.0.0.1:PORT`."""
    binary = shutil.which("docker-registry")
    if binary is None:
        raise ImageError("local registry: docker-registry is missing: apt-get install it")
    addr = f"127.0.0.1:{_free_loopback_port()}"
    config = folder / "config.yml"
    config.write_text(CONFIG.format(root=folder / "data", addr=addr))
    log_path = folder / "registry.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen([binary, "serve", str(config)], stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                if httpx.get(f"http://{addr}/v2/", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise ImageError(f"local registry did not start: {log_path.read_text()[-2000:]}")
            time.sleep(0.1)
        yield addr
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        _untag(addr)


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
