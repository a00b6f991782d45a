"""Gather the state a release plan decides on: registries (tags, probes) and git.

Read-only. For each registry: the tag list of its image and kit repositories and one
probe of each immutable reference of the version (the image, the kit in both shapes; the
planner cross-checks probes and listings).
Digests are learned for the probed version only; the other listed tags count by name (the
stale-move guard needs names, not digests). A tag listing the registry refuses stops the
release (exit 2): nothing can be decided from it. Git: whether `band-sdk-vX.Y.Z` exists,
whether the tree is clean, and the commit (the kit's revision annotation).
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from bandkit import tools
from bandkit.image.facts import REPO_ROOT
from bandkit.release.oci import Registries, RegistryError
from bandkit.release.plan import (
    GIT_TAG_PREFIX,
    KIT_SHAPES,
    Observed,
    Probe,
    RegistryObserved,
    ReleaseRefused,
    kit_tag,
)
from bandkit.release.settings import Settings, Target
from bandkit.release.versions import Version

GIT_TIMEOUT_S = 30.0
UNKNOWN_DIGEST = ""  # a listed tag whose digest was not asked for (not the version's)


@dataclass(frozen=True)
class GitState:
    tag_present: bool
    clean: bool
    commit: str
    remote: str


def _git(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`git <argv>` in `cwd`, any exit; a git that is missing or hangs refuses."""
    return tools.run(
        ["git", *argv],
        what=f"git {argv[0]}",
        timeout=GIT_TIMEOUT_S,
        cwd=cwd,
        check=False,
        error=_refused,
    )


def _refused(message: str) -> ReleaseRefused:
    return ReleaseRefused([message], ReleaseRefused.PRECONDITION)


def git_state(version: Version, cwd: Path = REPO_ROOT) -> GitState:
    """The checkout's state; a git error refuses (a tree of unknown state is not clean)."""
    status = _git("status", "--porcelain", "--untracked-files=normal", cwd=cwd)
    if status.returncode != 0:
        raise ReleaseRefused(
            [f"git status failed in {cwd}: {status.stderr.strip()[:200]}"],
            ReleaseRefused.PRECONDITION,
        )
    tag = f"{GIT_TAG_PREFIX}{version.base}"
    listed = _git("tag", "--list", tag, cwd=cwd)
    head = _git("rev-parse", "HEAD", cwd=cwd)
    remote = _git("remote", "get-url", "origin", cwd=cwd)
    return GitState(
        tag_present=listed.returncode == 0 and listed.stdout.strip() == tag,
        clean=not status.stdout.strip(),
        commit=head.stdout.strip() if head.returncode == 0 else "unknown",
        remote=remote.stdout.strip() if remote.returncode == 0 else "",
    )


def _closed(target: Target, exc: RegistryError) -> str:
    return f"{target.name}: {exc}; nothing can be decided, fail closed (exit 2)"


def observe_target(registries: Registries, target: Target, tag: str) -> RegistryObserved:
    try:
        image_tags = registries.tags(target.image)
        kit_tags = registries.tags(target.kit)
    except RegistryError as exc:
        raise ReleaseRefused([_closed(target, exc)], ReleaseRefused.IMMUTABLE) from None
    image_probe = registries.probe(target.image, tag)
    probes: dict[str, Probe] = {target.image.ref(tag): image_probe}
    for shape in KIT_SHAPES:  # the kit in both shapes: `X.Y.Z` and `X.Y.Z-sbx-below-0.42.1`
        probes[target.kit.ref(kit_tag(tag, shape))] = registries.probe(
            target.kit, kit_tag(tag, shape)
        )
    digests = dict.fromkeys(image_tags, UNKNOWN_DIGEST)
    if tag in digests:
        digests[tag] = getattr(image_probe, "digest", UNKNOWN_DIGEST)
    return RegistryObserved(
        image_repo=target.image_repo,
        kit_repo=target.kit_repo,
        image_tags=digests,
        kit_tags=frozenset(kit_tags),
        probes=probes,
    )


def observe(
    settings: Settings, registries: Registries, version: Version, git: GitState
) -> Observed:
    tag = str(version)
    return Observed(
        registries={t.name: observe_target(registries, t, tag) for t in settings.targets},
        git_tag_present=git.tag_present,
        tree_clean=git.clean,
    )


def all_tags(settings: Settings, registries: Registries) -> dict[str, list[str]]:
    """Image tags per registry (for the next `-rN`); a refused listing stops (exit 2)."""
    found: dict[str, list[str]] = {}
    for target in settings.targets:
        try:
            found[target.name] = registries.tags(target.image)
        except RegistryError as exc:
            raise ReleaseRefused([_closed(target, exc)], ReleaseRefused.IMMUTABLE) from None
    return found
