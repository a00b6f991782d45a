"""An in-memory pair of registries with the `oci.Registries` surface, for executor tests.

Manifests are stored by tag and by digest per repository; `down` hosts answer every
probe with `Unknown` and every other call with `RegistryError`, like a registry that
stopped. `writes` records each mutation in order, so a test can say nothing was changed.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field

from bandkit.image.refs import Repository
from bandkit.release.build_once import Source
from bandkit.release.kit_artifact import KitArtifact
from bandkit.release.oci import Registries, RegistryError, sha256
from bandkit.release.plan import ABSENT, Present, Probe, Unknown
from bandkit.release.settings import Settings, from_config

INDEX = "application/vnd.oci.image.index.v1+json"
HUB, GHCR = "hub.test:5000", "ghcr.test:5000"


def settings() -> Settings:
    return from_config(
        {
            "hub_image": f"{HUB}/bandhq/band-python-kit-image",
            "hub_kit": f"{HUB}/bandhq/band-python-kit",
            "ghcr_image": f"{GHCR}/band-ai/band-python-kit/image",
            "ghcr_kit": f"{GHCR}/band-ai/band-python-kit",
        }
    )


def index(label: str) -> bytes:
    """A stand-in image index (its bytes, hence its digest, differ per label)."""
    return json.dumps({"mediaType": INDEX, "manifests": [], "label": label}).encode()


@dataclass
class FakeRegistries(Registries):
    store: dict[str, dict[str, bytes]] = field(default_factory=lambda: defaultdict(dict))
    blobs: dict[str, bytes] = field(default_factory=dict)
    down: set[str] = field(default_factory=set)
    writes: list[str] = field(default_factory=list)

    @staticmethod
    def _key(repo: Repository) -> str:
        return f"{repo.host}/{repo.name}"

    def _up(self, repo: Repository) -> None:
        if repo.host in self.down:
            raise RegistryError(f"registry {repo.host} did not answer: connection refused")

    def put(self, repo: Repository, tag: str, raw: bytes) -> str:
        self._up(repo)
        digest = sha256(raw)
        self.store[self._key(repo)][tag] = raw
        self.store[self._key(repo)][digest] = raw
        self.writes.append(f"{repo.ref(tag)}={digest}")
        return digest

    def probe(self, repo: Repository, tag: str) -> Probe:
        if repo.host in self.down:
            return Unknown(f"registry {repo.host} did not answer: connection refused")
        raw = self.store[self._key(repo)].get(tag)
        return ABSENT if raw is None else Present(sha256(raw))

    def tags(self, repo: Repository) -> list[str]:
        self._up(repo)
        return [t for t in self.store[self._key(repo)] if not t.startswith("sha256:")]

    def manifest(self, repo: Repository, reference: str) -> tuple[bytes, str]:
        self._up(repo)
        raw = self.store[self._key(repo)].get(reference)
        if raw is None:
            raise RegistryError(f"{repo.ref(reference)}: HTTP 404")
        return raw, INDEX

    def copy(self, src: Repository, digest: str, dst: Repository, tag: str) -> str:
        raw, _ = self.manifest(src, digest)
        return self.put(dst, tag, raw)

    def push_kit(self, repo: Repository, tag: str, artifact: KitArtifact) -> str:
        for descriptor, data in artifact.blobs():
            self.blobs[str(descriptor["digest"])] = data
        return self.put(repo, tag, artifact.manifest)

    def blob(self, repo: Repository, digest: str) -> bytes:
        self._up(repo)
        return self.blobs[digest]


@dataclass
class FakeBuild:
    """The builder and first pusher: counts builds, pushes a stand-in index."""

    registries: FakeRegistries
    label: str = "built"
    builds: int = 0

    def build(self) -> Source:
        self.builds += 1
        return Source("band-python-kit:release", ("amd64", "arm64"), "none (test)")

    def push(self, source: Source, repo: Repository, tag: str, progress: object) -> None:
        self.registries.put(repo, tag, index(self.label))
