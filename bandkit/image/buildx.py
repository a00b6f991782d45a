"""Does the selected Docker have a builder that builds several platforms in one command?

`probe()` gathers the facts from three commands (`docker buildx version`, `docker buildx
inspect`, `docker info --format '{{json .DriverStatus}}'`); `decide(facts, platforms)` is
pure and returns a `Verdict` with the reason either way, so `image.build` can say which
path it took and why. The rule:

- no buildx plugin: no;
- the builder is not running, or lacks a requested platform (a foreign arch needs qemu
  registered in binfmt_misc): no;
- no containerd image store (`driver-type: io.containerd.snapshotter.v1` in the daemon's
  DriverStatus): no. The `docker` driver then refuses multi-platform builds, and any other
  driver could not `--load` the resulting index into the daemon for `image.push`;
- otherwise yes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from bandkit.dockercli import docker

CONTAINERD_SNAPSHOTTER = "io.containerd.snapshotter.v1"
PROBE_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class BuilderFacts:
    buildx: str | None  # `docker buildx version` output; None when the plugin is missing
    driver: str = ""
    status: str = ""
    platforms: tuple[str, ...] = ()
    containerd_store: bool = False
    inspect_error: str = ""


@dataclass(frozen=True)
class Verdict:
    multi: bool
    reason: str


def parse_version(returncode: int, output: str) -> str | None:
    """The buildx version line, or None when `docker buildx version` did not work."""
    line = output.strip().splitlines()[0] if output.strip() else ""
    if returncode != 0 or "buildx" not in line:
        return None
    return line


def parse_inspect(output: str) -> tuple[str, str, tuple[str, ...]]:
    """(driver, first node's status, first node's platforms) from `docker buildx inspect`."""
    driver = status = ""
    platforms: tuple[str, ...] = ()
    for line in output.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key, value = key.strip(), value.strip()
        if key == "Driver" and not driver:
            driver = value
        elif key == "Status" and not status:
            status = value
        elif key == "Platforms" and not platforms:
            platforms = tuple(p.strip() for p in value.split(",") if p.strip())
    return driver, status, platforms


def parse_driver_status(output: str) -> bool:
    """True when the daemon stores images in containerd (`docker info` DriverStatus JSON)."""
    try:
        pairs = json.loads(output or "null") or []
    except json.JSONDecodeError:
        return False
    return any(
        isinstance(pair, list) and pair[:2] == ["driver-type", CONTAINERD_SNAPSHOTTER]
        for pair in pairs
    )


def _supports(builder_platforms: tuple[str, ...], wanted: str) -> bool:
    """`linux/arm64` is served by `linux/arm64` or a variant such as `linux/arm64/v8`."""
    return any(p == wanted or p.startswith(wanted + "/") for p in builder_platforms)


def decide(facts: BuilderFacts, platforms: tuple[str, ...]) -> Verdict:
    """Whether one `docker buildx build --platform a,b --load` can build `platforms`."""
    if facts.buildx is None:
        return Verdict(False, "no buildx plugin (`docker buildx version` failed)")
    if facts.inspect_error or facts.status != "running":
        detail = facts.inspect_error or f"status {facts.status or 'unknown'}"
        return Verdict(False, f"the buildx builder is not usable ({detail})")
    missing = [p for p in platforms if not _supports(facts.platforms, p)]
    if missing:
        return Verdict(
            False,
            f"the {facts.driver} builder lacks {', '.join(missing)} (has "
            f"{', '.join(facts.platforms) or 'none'}); a foreign arch needs qemu-user-static "
            "and binfmt-support",
        )
    if not facts.containerd_store:
        if facts.driver == "docker":
            why = "the docker driver builds one platform at a time without it"
        else:
            why = f"the {facts.driver} driver could not --load a multi-platform image without it"
        return Verdict(False, f"the daemon has no containerd image store ({why})")
    words = facts.buildx.split()
    version = words[1] if len(words) > 1 else "?"
    return Verdict(
        True,
        f"buildx {version} with the {facts.driver} driver and the containerd image store "
        f"builds {', '.join(platforms)} in one command",
    )


def probe() -> BuilderFacts:
    """Ask the docker CLI (DOCKER_HOST / DOCKER_CONFIG select the daemon and plugins)."""
    version = docker(["buildx", "version"], PROBE_TIMEOUT_S, check=False)
    buildx = parse_version(version.returncode, version.stdout)
    if buildx is None:
        return BuilderFacts(None)
    info = docker(["info", "--format", "{{json .DriverStatus}}"], PROBE_TIMEOUT_S, check=False)
    store = info.returncode == 0 and parse_driver_status(info.stdout)
    inspect = docker(["buildx", "inspect"], PROBE_TIMEOUT_S, check=False)
    if inspect.returncode != 0:
        error = (inspect.stderr.strip().splitlines() or ["failed"])[-1]
        return BuilderFacts(buildx, containerd_store=store, inspect_error=error)
    driver, status, platforms = parse_inspect(inspect.stdout)
    return BuilderFacts(buildx, driver, status, platforms, store)
