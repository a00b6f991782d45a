"""The kit as an OCI artifact: the stamped spec as config, one empty layer, annotations.

Shape (what `sbx kit push` publishes and `sbx create --kit <oci-ref>` consumes):
- manifest `application/vnd.oci.image.manifest.v1+json` with
  `artifactType: application/vnd.docker.sandbox.kit.v2`;
- config: the stamped spec, bytes as written, `application/vnd.docker.sandbox.kit.v2.spec+yaml`;
- exactly one layer, an empty tar in gzip (`application/vnd.oci.image.layer.v1.tar+gzip`),
  byte-identical on every run (no timestamp in the gzip header);
- annotations: `org.opencontainers.image.source` (where the kit comes from) and
  `org.opencontainers.image.revision` (the commit).

Pure: `build` returns the bytes; `check` compares what a registry served with them.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

ARTIFACT_TYPE = "application/vnd.docker.sandbox.kit.v2"
CONFIG_TYPE = "application/vnd.docker.sandbox.kit.v2.spec+yaml"
LAYER_TYPE = "application/vnd.oci.image.layer.v1.tar+gzip"
MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"
SOURCE = "org.opencontainers.image.source"
REVISION = "org.opencontainers.image.revision"
# An empty tar archive is two 512-byte zero blocks; gzip it with mtime 0 so it never varies.
EMPTY_LAYER = gzip.compress(b"\0" * 1024, compresslevel=9, mtime=0)


def _descriptor(media: str, data: bytes) -> dict[str, Any]:
    return {
        "mediaType": media,
        "digest": "sha256:" + hashlib.sha256(data).hexdigest(),
        "size": len(data),
    }


@dataclass(frozen=True)
class KitArtifact:
    config: bytes
    manifest: bytes

    def blobs(self) -> Iterator[tuple[dict[str, Any], bytes]]:
        yield _descriptor(CONFIG_TYPE, self.config), self.config
        yield _descriptor(LAYER_TYPE, EMPTY_LAYER), EMPTY_LAYER

    @property
    def digest(self) -> str:
        return "sha256:" + hashlib.sha256(self.manifest).hexdigest()


def build(stamped_spec: str, *, source: str, revision: str) -> KitArtifact:
    """The artifact for one registry's stamped spec (canonical JSON manifest bytes)."""
    config = stamped_spec.encode("utf-8")
    manifest = {
        "schemaVersion": 2,
        "mediaType": MANIFEST_TYPE,
        "artifactType": ARTIFACT_TYPE,
        "config": _descriptor(CONFIG_TYPE, config),
        "layers": [_descriptor(LAYER_TYPE, EMPTY_LAYER)],
        "annotations": {SOURCE: source, REVISION: revision},
    }
    raw = json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode()
    return KitArtifact(config, raw)


def check(manifest: bytes, config: bytes, expected: str) -> list[str]:
    """Problems with a kit a registry served (its manifest and config bytes); [] if none."""
    try:
        doc = json.loads(manifest)
    except ValueError:
        return ["the kit manifest is not JSON"]
    problems = []
    if doc.get("artifactType") != ARTIFACT_TYPE:
        problems.append(f"artifactType is {doc.get('artifactType')!r}, not {ARTIFACT_TYPE}")
    if (doc.get("config") or {}).get("mediaType") != CONFIG_TYPE:
        problems.append(f"config media type is not {CONFIG_TYPE}")
    layers = doc.get("layers") or []
    if [layer.get("mediaType") for layer in layers] != [LAYER_TYPE]:
        problems.append(f"the kit must have exactly one {LAYER_TYPE} layer")
    if SOURCE not in (doc.get("annotations") or {}):
        problems.append(f"no {SOURCE} annotation")
    if config != expected.encode("utf-8"):
        problems.append("the config served differs from the stamped spec, byte for byte")
    return problems
