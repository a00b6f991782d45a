"""Publish a built image to a registry and learn its digest from the registry itself.

Order (the floating tags are the commit point):
1. probe every immutable tag; any that already exists is refused (never overwritten);
2. push the immutable tags: a single- or multi-platform image (a buildx build loaded into
   a containerd image store) is pushed as it is, the index with every platform; per-arch
   images (`arches`) are pushed as `<tag>-<arch>` and merged into one manifest list with
   `docker manifest create/push`;
3. ask the registry for the manifest digest (HEAD with the v2/OCI Accept header; without
   it a registry may answer an old-format digest), never predicting it;
4. only then move the floating tags, and check each now resolves to the same digest.
Registry probes speak plain HTTP to loopback registries and HTTPS elsewhere, anonymously.

`push_dev` is the short path's push (`invoke push`): one working tag that is not a release
tag (so it can never overwrite or move one), pushed as it is; the digest `docker push`
reports must be the one the registry answers.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import httpx

from bandkit.dockercli import ImageError, docker, image_exists, require_docker, require_image
from bandkit.image.refs import (
    RefError,
    Repository,
    digest_from_push_output,
    is_floating,
    is_immutable,
    parse_digest,
    parse_repository,
    publish_order,
)

MANIFEST_ACCEPT = ", ".join(
    (
        "application/vnd.oci.image.index.v1+json",
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
        "application/vnd.docker.distribution.manifest.v2+json",
    )
)
PROBE_TIMEOUT_S = 30.0
PUSH_TIMEOUT_S = 900.0
Progress = Callable[[str], None]


@dataclass(frozen=True)
class Pushed:
    repository: str
    tags: tuple[str, ...]
    digest: str

    def by_digest(self) -> str:
        return f"{self.repository}@{self.digest}"


def _loopback(host: str) -> bool:
    name = host.rsplit(":", 1)[0] if host.count(":") == 1 else host
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name.strip("[]")).is_loopback
    except ValueError:
        return False


def manifest_url(repo: Repository, reference: str) -> str:
    scheme = "http" if _loopback(repo.host) else "https"
    return f"{scheme}://{repo.host}/v2/{repo.name}/manifests/{reference}"


def remote_digest(repo: Repository, tag: str) -> str | None:
    """The registry's digest for `tag`, or None when the registry says it is unknown.

    Only a 404 counts as absent; any other answer fails closed.
    """
    url = manifest_url(repo, tag)
    try:
        response = httpx.head(url, headers={"Accept": MANIFEST_ACCEPT}, timeout=PROBE_TIMEOUT_S)
    except httpx.HTTPError as exc:
        raise ImageError(f"registry {repo.host} unreachable ({exc}); is it up?") from None
    if response.status_code == 404:
        return None
    if response.status_code != 200:
        raise ImageError(
            f"registry answered {response.status_code} for {repo.ref(tag)}; "
            "refusing to guess whether it exists"
        )
    digest = response.headers.get("Docker-Content-Digest", "")
    try:
        return parse_digest(digest)
    except RefError:
        raise ImageError(f"registry gave no usable digest for {repo.ref(tag)}") from None


def _push(ref: str) -> str:
    return digest_from_push_output(docker(["push", ref], PUSH_TIMEOUT_S).stdout)


def _publish_one(
    source: str, repo: Repository, tag: str, arches: Sequence[str], parts_of: str | None = None
) -> None:
    """Push `source` as `repo:tag`; with arches, push `<tag>-<arch>` parts and merge them
    into one manifest list (a floating tag reuses the parts of version `parts_of`)."""
    if not arches:
        docker(["tag", source, repo.ref(tag)], 30)
        _push(repo.ref(tag))
        return
    parts = []
    for arch in arches:
        part = repo.ref(f"{parts_of or tag}-{arch}")
        if parts_of is None:
            docker(["tag", f"{source}-{arch}", part], 30)
            _push(part)
        parts.append(part)
    insecure = ["--insecure"] if _loopback(repo.host) else []
    docker(["manifest", "create", *insecure, "--amend", repo.ref(tag), *parts], 60)
    docker(["manifest", "push", *insecure, "--purge", repo.ref(tag)], PUSH_TIMEOUT_S)


def push(
    source: str,
    registry: str,
    tags: Sequence[str],
    *,
    arches: Sequence[str] = (),
    progress: Progress = print,
) -> Pushed:
    """Publish `source` under `registry` with `tags`; return the registry's digest."""
    try:
        repo = parse_repository(registry)
        immutable, floating = publish_order(list(tags))
    except RefError as exc:
        raise ImageError(f"{exc}") from None
    require_docker("image.push")
    for src in [f"{source}-{a}" for a in arches] or [source]:
        if not image_exists(src):
            raise ImageError(f"no local image {src}; run `invoke image.build` first")
    for tag in immutable:
        if remote_digest(repo, tag) is not None:
            raise ImageError(
                f"{repo.ref(tag)} already exists and version tags are immutable; "
                "publish a new version (X.Y.Z-rN) instead"
            )
    for tag in immutable:
        progress(f"image.push: pushing {repo.ref(tag)}")
        _publish_one(source, repo, tag, arches)
    digests = {tag: remote_digest(repo, tag) for tag in immutable}
    digest = digests[immutable[0]]
    if digest is None or len(set(digests.values())) != 1:
        raise ImageError(f"immutable tags resolve to different digests: {digests}")
    for tag in floating:
        progress(f"image.push: moving {repo.ref(tag)}")
        _publish_one(source, repo, tag, arches, parts_of=immutable[0])
        if remote_digest(repo, tag) != digest:
            raise ImageError(f"{repo.ref(tag)} does not resolve to {digest}")
    progress(f"image.push: digest {digest}")
    return Pushed(f"{repo.host}/{repo.name}", (*immutable, *floating), digest)


def push_dev(source: str, registry: str, tag: str, *, progress: Progress = print) -> Pushed:
    """Push `source` as `registry:tag`, a working tag (moved on every push); the
    registry's digest pins it. Release tags are refused: they go through `push`."""
    try:
        repo = parse_repository(registry)
    except RefError as exc:
        raise ImageError(f"{exc}") from None
    if is_immutable(tag) or is_floating(tag):
        raise ImageError(
            f"{tag!r} is a release tag; publish releases with `uv run invoke image.push`"
        )
    require_docker("push")
    require_image(source)
    progress(f"pushing {repo.ref(tag)}")
    docker(["tag", source, repo.ref(tag)], 30)
    reported = _push(repo.ref(tag))
    answered = remote_digest(repo, tag)
    if answered != reported:
        raise ImageError(
            f"docker push reported {reported} but the registry answers {answered} "
            f"for {repo.ref(tag)}"
        )
    return Pushed(f"{repo.host}/{repo.name}", (tag,), reported)
