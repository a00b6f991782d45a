"""What a demo run can leave behind, every kind of it, for the tests that say "nothing".

`leftovers(run_dir)` looks at the world, not at the manifest (the manifest is what might
be wrong): the platform's agents and rooms (the running emulator's API, else its state
file), sandboxes of the local and docker runtimes (their state directories, containers,
networks), stored secrets (the keychains), egress rules (docker grants, proxies),
processes (any live process whose command line or environment names the run's
directories), staged workspaces, the run's own files (manifest, lock, run record) and
docker env files in /tmp. It returns one readable line per leftover; `[]` is clean.
`secrets_in(...)` says which of the given secrets appear in outputs and files.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import httpx

from bandkit import processes
from bandkit.demo.layout import DemoLayout
from bandkit.emulator import service
from examples.docker_demo.cast import DEMO_NAMES, DEMO_SANDBOXES

ROOM_TITLE = "Design Review"
CACHE_DIRS = {".uv-cache", ".sdk", "cli", "keychain"}  # caches; the keychain is checked apart
TMP = Path("/tmp")


def leftovers(run_dir: Path, *, docker: bool = False, keep_pids: Iterable[int] = ()) -> list[str]:
    """Everything of a demo run in `run_dir` that is still there (`keep_pids`: processes
    the test itself started there, such as a shared emulator)."""
    layout = DemoLayout.for_run_dir(run_dir)
    found = platform_leftovers(run_dir)
    found += process_leftovers((run_dir, layout.box_root), keep_pids=keep_pids)
    found += file_leftovers(layout)
    if docker:
        found += docker_leftovers()
    return found


def platform_leftovers(run_dir: Path) -> list[str]:
    """Demo agents and rooms on the local platform of `run_dir` (running or stopped)."""
    try:
        record = service.running(run_dir)
    except service.PlatformError as exc:
        return [f"platform: {exc}"]
    if record is not None:
        key = service.read_user_key(record)
        agents = _get(record.rest_url, "/api/v1/me/agents", key)
        rooms = _get(record.rest_url, "/api/v1/me/chats", key)
    else:
        state_file = run_dir / service.STATE_FILE
        if not state_file.exists():
            return []
        state = json.loads(state_file.read_text(encoding="utf-8"))
        agents = list(state.get("agents", {}).values())
        rooms = list(state.get("rooms", {}).values())
    out = [f"platform agent {a.get('name')}" for a in agents if a.get("name") in DEMO_NAMES]
    out += [f"platform room {r.get('title')}" for r in rooms if ROOM_TITLE in str(r.get("title"))]
    return out


def _get(rest_url: str, path: str, key: str) -> list[dict[str, Any]]:
    response = httpx.get(rest_url + path, headers={"x-api-key": key}, timeout=10)
    response.raise_for_status()
    return list(response.json()["data"])


def process_leftovers(roots: Iterable[Path], *, keep_pids: Iterable[int] = ()) -> list[str]:
    """Live processes (not this one) whose argv or environment names one of `roots`."""
    needles = [str(root).encode() for root in roots]
    skipped = {os.getpid(), *keep_pids}
    found: dict[int, bytes] = {}

    def names_a_root(proc: processes.Proc) -> bool:
        environ = b"\0".join(proc.environ)
        if proc.pid in skipped or not any(n in proc.cmdline or n in environ for n in needles):
            return False
        found[proc.pid] = proc.cmdline
        return True

    pids = processes.scan(names_a_root)
    shown = {pid: argv.replace(b"\0", b" ").decode(errors="replace") for pid, argv in found.items()}
    return [f"process {pid}: {shown[pid][:160]}" for pid in pids]


def file_leftovers(layout: DemoLayout) -> list[str]:
    out = [
        f"file {path}"
        for path in (layout.manifest, Path(str(layout.manifest) + ".lock"), layout.run_file)
        if path.exists()
    ]
    if layout.workspaces.is_dir():
        out += [f"workspace {p}" for p in layout.workspaces.iterdir()]
    for runtime in ("local", "docker"):
        state = layout.runtimes / runtime
        if not state.is_dir():
            continue
        out += [f"{runtime} secret {p}" for p in (state / "keychain").glob("*")]
        out += [f"local sandbox {p}" for p in (state / "sandboxes").glob("*")]
        boxes = state / ("boxes" if runtime == "local" else "docker")
        out += [
            f"{runtime} box {p}"
            for p in boxes.glob("*")
            if p.name not in CACHE_DIRS and not p.name.startswith(".")
        ]
    for env_file in TMP.glob("bandkit-env-*"):
        try:
            text = env_file.read_text(errors="replace")
        except OSError:
            continue
        if str(layout.box_root) in text:
            out.append(f"docker env file {env_file}")
    return out


def docker_leftovers() -> list[str]:
    """Demo containers and their networks (by name), whoever made them."""
    containers = _docker("ps", "--all", "--format", "{{.Names}}")
    networks = _docker("network", "ls", "--format", "{{.Name}}")
    out = [f"docker container {name}" for name in containers if name in DEMO_SANDBOXES]
    out += [
        f"docker network {name}"
        for name in networks
        if any(name.startswith(f"bandkit-{sandbox}-") for sandbox in DEMO_SANDBOXES)
    ]
    return out


def _docker(*args: str) -> list[str]:
    done = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=60, check=True)
    return done.stdout.split()


def texts(*roots: Path, skip: Iterable[str] = (service.KEY_FILE,)) -> str:
    """Every file under `roots` (caches left out) as text, for secret greps."""
    skipped = set(skip)
    out = []
    for root in roots:
        # os.walk never enters a cache (rglob did, and a sandbox that outlived a killed run
        # may still be creating and deleting temp dirs there) and skips what vanishes.
        for folder, dirs, files in os.walk(root):
            dirs[:] = [name for name in dirs if name not in CACHE_DIRS]
            for name in files:
                path = Path(folder, name)
                try:
                    if name in skipped or not stat.S_ISREG(path.lstat().st_mode):
                        continue  # no link, socket or fifo is read
                    out.append(path.read_text(errors="replace"))
                except FileNotFoundError:
                    continue  # gone since the listing
    return "\n".join(out)


def secrets_in(secrets: Iterable[str], *outputs: str, roots: Iterable[Path] = ()) -> list[str]:
    """Which of `secrets` appear in `outputs` or in any file under `roots`."""
    everything = "\n".join([*outputs, texts(*roots)])
    return [secret for secret in secrets if secret and secret in everything]
