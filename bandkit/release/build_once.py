"""Build the release image once (amd64 + arm64) and push it to the first registry.

`image.build` picks the path (and says which and why): buildx when the selected Docker
has a multi-platform builder (`invoke image.builder`, then export its environment), else
one classic build per arch (arm64 under qemu) merged into one manifest list at push.

- buildx: one `docker buildx build`, with `--provenance=mode=max` and `--sbom=true` when
  configured (the SBOM generator is the `docker/buildkit-syft-scanner` image, which the
  builder pulls: offline, set `release.sbom` false); the index is pushed as it is,
  attestation manifests included.
- per-arch: the classic builder cannot make attestations, so none are attached, and the
  summary says so. Each arch is pushed as `<version>-<arch>` (the parts the manifest list
  points at; not versions, so never probed or moved) and merged with `docker manifest`.

Every other registry gets the first one's digest copied (`oci.Registries.copy`), so the
bytes and the digest are the same everywhere.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from bandkit.dockercli import ImageError, docker
from bandkit.image import build as image_build
from bandkit.image.push import PUSH_TIMEOUT_S, _loopback
from bandkit.image.refs import Repository, digest_from_push_output
from bandkit.release.settings import PLATFORMS, Settings

SOURCE_TAG = "band-python-kit:release"
SBOM_SCANNER = "buildkit-syft-scanner"
Progress = Callable[[str], None]
NO_ATTEST = (
    "not attached: the per-arch path's classic builder cannot make attestations; start "
    "the side builder (`uv run invoke image.builder`, export what it prints) to attach "
    "SBOM and provenance"
)


@dataclass(frozen=True)
class Source:
    """What was built: the local tag, the per-arch parts (empty for one buildx index)."""

    tag: str
    arches: tuple[str, ...]
    attestations: str  # what is attached, or why nothing is


def attest_flags(settings: Settings) -> tuple[str, ...]:
    flags = ["--provenance=mode=max"] if settings.provenance else []
    return (*flags, "--sbom=true") if settings.sbom else tuple(flags)


def build(
    settings: Settings,
    progress: Progress,
    *,
    no_cache: bool = False,
    build_args: tuple[tuple[str, str], ...] = (),
) -> Source:
    """One multi-platform build; `build_args` override Dockerfile ARGs (a rebuild's new
    base pins)."""
    base: image_build.Base = "local" if settings.base == "local" else "official"
    multi: image_build.Multi = next((m for m in image_build.MULTIS if m == settings.multi), "auto")
    request = image_build.BuildRequest(
        platforms=PLATFORMS,
        tag=SOURCE_TAG,
        base=base,
        multi=multi,
        attest=attest_flags(settings),
        no_cache=no_cache,
        build_args=build_args,
    )
    try:
        built = image_build.build(request, progress)
    except ImageError as exc:
        if settings.sbom and SBOM_SCANNER in str(exc):
            raise ImageError(
                f"the SBOM generator ({SBOM_SCANNER}) could not be pulled by the builder; "
                "make it reachable, or publish without an SBOM: INVOKE_RELEASE_SBOM=0 "
                "(provenance stays)"
            ) from None
        raise
    if len(built) == 1:
        flags = attest_flags(settings)
        what = ", ".join(f.removeprefix("--") for f in flags) if flags else "none (configured off)"
        return Source(SOURCE_TAG, (), f"buildx: {what}")
    return Source(SOURCE_TAG, tuple(image_build.arch_of(b.platform) for b in built), NO_ATTEST)


def push_first(source: Source, repo: Repository, tag: str, progress: Progress) -> None:
    """Push the build as `repo:tag` (the digest is read back from the registry after)."""
    if not source.arches:
        docker(["tag", source.tag, repo.ref(tag)], 30)
        progress(f"docker push {repo.ref(tag)}")
        digest_from_push_output(docker(["push", repo.ref(tag)], PUSH_TIMEOUT_S).stdout)
        return
    parts = []
    for arch in source.arches:
        part = repo.ref(f"{tag}-{arch}")
        docker(["tag", f"{source.tag}-{arch}", part], 30)
        progress(f"docker push {part}")
        digest_from_push_output(docker(["push", part], PUSH_TIMEOUT_S).stdout)
        parts.append(part)
    insecure = ["--insecure"] if _loopback(repo.host) else []
    docker(["manifest", "create", *insecure, "--amend", repo.ref(tag), *parts], 60)
    progress(f"docker manifest push {repo.ref(tag)} ({' + '.join(source.arches)})")
    docker(["manifest", "push", *insecure, "--purge", repo.ref(tag)], PUSH_TIMEOUT_S)


def untag(source: Source, repo: Repository, tag: str) -> None:
    """Drop the local refs `push_first` made (the registry keeps everything)."""
    refs = [repo.ref(f"{tag}-{a}") for a in source.arches] or [repo.ref(tag)]
    docker(["rmi", *refs], 60, check=False)


def push(source: Source, repo: Repository, tag: str, progress: Progress) -> None:
    """`push_first`, then drop the local refs it made."""
    try:
        push_first(source, repo, tag, progress)
    finally:
        untag(source, repo, tag)
