"""The short path, `invoke build push`: the kit image built here, pushed, its spec pinned.

One set of defaults serves both verbs (the tag `build` makes is the one `push` pushes);
`image.build` / `image.push` keep every option.

`build_here` (`invoke build`):
1. base: the official bases (the Dockerfile's pins) when both are present or can be
   pulled; otherwise the local ones, said in one note. Local bases this machine lacks are
   made first (exactly `invoke image.bases`: debootstrap, about a minute, once), because
   the verb promises an image with no step before it; an error still names what is
   missing (debootstrap, root).
2. `image.build` for this machine's platform under `SOURCE_TAG`; the builder stage trusts
   the host's extra CAs (`SSL_CERT_FILE` / `REQUESTS_CA_BUNDLE`) as `image.build` does.

`push_here` (`invoke push`):
1. registry: `--registry`, else the `registry` setting (`invoke.yaml`), else the kept local
   registry on 127.0.0.1 (`registry.ensure_kept`: started on first use, recorded under
   the run directory, reused later; `invoke image.registry --stop` stops it);
2. `SOURCE_TAG` pushed as `<registry>:WORK_TAG`, a working tag that is never a release
   tag, and the digest read back from the registry;
3. a copy of the kit spec stamped `<registry>:WORK_TAG@<digest>` written to
   `dist/spec.yaml`; the repo's spec is only read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bandkit.dockercli import ImageError, docker, image_exists, require_docker
from bandkit.image import bases as image_bases
from bandkit.image import build as image_build
from bandkit.image import registry as image_registry
from bandkit.image.facts import (
    IMAGE_NAME,
    LOCAL_TAG,
    REGISTRY_SETTING,
    REPO_ROOT,
    SPEC,
    host_arch,
    official_python_base,
    official_uv_image,
)
from bandkit.image.push import Pushed, push_dev
from bandkit.image.refs import RefError, parse_repository
from bandkit.kit.spec import stamp_file

SOURCE_TAG = LOCAL_TAG  # what `build` makes and `push` pushes
WORK_TAG = "dev"  # the tag `push` moves; the stamped spec pins the digest
DIST_SPEC = REPO_ROOT / "dist" / "spec.yaml"
REGISTRY_FOLDER = "registry"  # the kept local registry, under the run directory
STOP_COMMAND = "uv run invoke image.registry --stop"
PULL_TIMEOUT_S = 600.0
Progress = Callable[[str], None]


@dataclass(frozen=True)
class RegistryChoice:
    """Where `push` goes: a repository (`HOST[:PORT]/NAME`), or "" for the local one."""

    registry: str
    source: str  # "--registry", "the registry setting", or "none configured"


def choose_registry(flag: str, configured: str) -> RegistryChoice:
    """`--registry` wins, then the configuration; neither means the local registry."""
    if flag:
        return RegistryChoice(flag, "--registry")
    if configured:
        return RegistryChoice(configured, f"the {REGISTRY_SETTING} setting")
    return RegistryChoice("", "none configured")


def local_repository(addr: str) -> str:
    return f"{addr}/{IMAGE_NAME}"


def official_unavailable() -> str | None:
    """None when both official bases are here or pulled now, else why not (one line)."""
    for ref in (official_python_base(), official_uv_image()):
        if image_exists(ref):
            continue
        proc = docker(["pull", "--quiet", ref], PULL_TIMEOUT_S, check=False)
        if proc.returncode != 0:
            reason = (proc.stderr.strip().splitlines() or ["docker pull failed"])[-1]
            reason = reason.removeprefix("Error response from daemon: ")
            return f"{ref.split('@', 1)[0]}: {reason[:160]}"
    return None


def build_here(
    note: Progress = print, progress: Progress = print, *, no_cache: bool = False
) -> image_build.Built:
    """Build `SOURCE_TAG` for this machine: official bases if reachable, else local ones."""
    require_docker("build")
    arch = host_arch()
    base: image_build.Base = "official"
    reason = official_unavailable()
    if reason is not None:
        local = (image_bases.python_tag(arch), image_bases.uv_tag(arch))
        note(f"official bases cannot be pulled ({reason}); using local bases {' + '.join(local)}")
        if not all(image_exists(ref) for ref in local):
            note(
                "making the missing local bases first (`uv run invoke image.bases` does the "
                "same; debootstrap, about a minute, once)"
            )
            image_bases.ensure_bases((arch,), progress)
        base = "local"
    request = image_build.BuildRequest(tag=SOURCE_TAG, base=base, no_cache=no_cache)
    return image_build.build(request, progress)[0]


@dataclass(frozen=True)
class Published:
    pushed: Pushed
    image_ref: str  # `<registry>:WORK_TAG`, as stamped (with `@<digest>`)
    spec: Path


def push_here(flag: str, configured: str, run_dir: Path, note: Progress = print) -> Published:
    """Push `SOURCE_TAG` to the chosen registry, then write the stamped `DIST_SPEC`."""
    choice = choose_registry(flag, configured)
    registry = choice.registry
    if registry:
        try:
            parse_repository(registry)
        except RefError as exc:
            raise ImageError(f"{exc} ({choice.source})") from None
        note(f"registry {registry} ({choice.source})")
    else:
        folder = run_dir / REGISTRY_FOLDER
        kept = image_registry.ensure_kept(folder)
        registry = local_repository(kept.addr)
        verb = "started" if kept.started else "reusing"
        note(
            f"no registry configured (--registry, or `{REGISTRY_SETTING}:` in invoke.yaml): "
            f"{verb} the local registry on {kept.addr} (recorded in {folder}; "
            f"stop it with `{STOP_COMMAND}`)"
        )
    pushed = push_dev(SOURCE_TAG, registry, WORK_TAG, progress=note)
    note(f"digest {pushed.digest}")
    image_ref = f"{registry}:{WORK_TAG}"
    DIST_SPEC.parent.mkdir(exist_ok=True)
    stamp_file(SPEC, image_ref, pushed.digest, DIST_SPEC)
    note(f"wrote {DIST_SPEC} (image: {image_ref}@{pushed.digest})")
    return Published(pushed, image_ref, DIST_SPEC)


def stop_local(run_dir: Path) -> str:
    """Stop the kept local registry (its storage stays); say what happened."""
    addr = image_registry.stop_kept(run_dir / REGISTRY_FOLDER)
    return f"stopped the local registry on {addr}" if addr else "no local registry runs"


def local_status(run_dir: Path) -> str:
    kept = image_registry.kept_status(run_dir / REGISTRY_FOLDER)
    if kept is None:
        return "no local registry runs (`uv run invoke push` starts one)"
    return f"local registry on {kept.addr} (pid {kept.pid}): {local_repository(kept.addr)}"
