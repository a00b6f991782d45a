"""Tiny but genuine `docker save` archives, and a stand-in `docker` CLI that serves them.

`write_archive(ref, path)` writes the layout `docker save` writes since Docker 25 (an OCI
image layout that also carries the classic `manifest.json`): one small layer, its image
config, an image manifest, `index.json` naming the reference, `manifest.json` with the
config and RepoTags. The image's id is its config digest, as `docker image inspect`
reports it on a daemon with a classic (overlay2) image store.

`FakeDocker(dir)` registers such images for `tests/fakes/dockerbin/docker`, a stand-in
for the docker CLI (first on a simulator's PATH: `simharness`) where no daemon (or no kit
image) can be had, or the host's images must not be used: it answers `image inspect
--format ...` and `save` for the images registered in $FAKE_DOCKER_DIR only (none when it
is unset) and logs every call there.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

DOCKERBIN = Path(__file__).resolve().parent / "dockerbin"
DIR_ENV = "FAKE_DOCKER_DIR"
CONFIG_TYPE = "application/vnd.oci.image.config.v1+json"
MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"
LAYER_TYPE = "application/vnd.oci.image.layer.v1.tar"


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), 0o644, 0
    tar.addfile(info, io.BytesIO(data))


def _layer(payload: bytes) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        _add(tar, "hello.txt", payload)
    return buffer.getvalue()


def write_archive(ref: str, path: Path, payload: bytes = b"hello") -> str:
    """Write a `docker save` archive of one image tagged `ref`; return its id (config
    digest). A different `payload` makes a different image."""
    layer = _layer(payload)
    config = json.dumps(
        {
            "architecture": "amd64",
            "os": "linux",
            "config": {"User": "1000"},
            "rootfs": {"type": "layers", "diff_ids": [_digest(layer)]},
        },
        sort_keys=True,
    ).encode()
    manifest = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": MANIFEST_TYPE,
            "config": {"mediaType": CONFIG_TYPE, "digest": _digest(config), "size": len(config)},
            "layers": [{"mediaType": LAYER_TYPE, "digest": _digest(layer), "size": len(layer)}],
        },
        sort_keys=True,
    ).encode()
    name, _, tag = ref.rpartition(":")
    index = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [
            {
                "mediaType": MANIFEST_TYPE,
                "digest": _digest(manifest),
                "size": len(manifest),
                "annotations": {
                    "io.containerd.image.name": f"docker.io/library/{name}:{tag}",
                    "org.opencontainers.image.ref.name": tag,
                },
            }
        ],
    }
    blob = lambda data: f"blobs/sha256/{_digest(data).removeprefix('sha256:')}"  # noqa: E731
    legacy = [{"Config": blob(config), "RepoTags": [ref], "Layers": [blob(layer)]}]
    with tarfile.open(path, mode="w") as tar:
        for data in (layer, config, manifest):
            _add(tar, blob(data), data)
        _add(tar, "index.json", json.dumps(index).encode())
        _add(tar, "manifest.json", json.dumps(legacy).encode())
        _add(tar, "oci-layout", b'{"imageLayoutVersion": "1.0.0"}')
    return _digest(config)


@dataclass
class FakeDocker:
    """The images the stand-in docker CLI knows (a directory of archives and its log)."""

    root: Path

    def __post_init__(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)

    @property
    def binary(self) -> str:
        return str(DOCKERBIN / "docker")

    def add(self, ref: str, payload: bytes = b"hello") -> str:
        """Build (or rebuild, with another payload) image `ref`; return its id."""
        index = self._index()
        archive = self.root / f"{hashlib.sha256(ref.encode()).hexdigest()[:16]}.tar"
        image_id = write_archive(ref, archive, payload)
        index[ref] = {"file": archive.name, "id": image_id, "size": archive.stat().st_size}
        (self.root / "images.json").write_text(json.dumps(index))
        return image_id

    def _index(self) -> dict[str, dict[str, object]]:
        path = self.root / "images.json"
        return json.loads(path.read_text()) if path.exists() else {}

    def calls(self) -> list[list[str]]:
        log = self.root / "calls.jsonl"
        lines = log.read_text().splitlines() if log.exists() else []
        return [json.loads(line) for line in lines]

    def saves(self) -> int:
        return sum(1 for argv in self.calls() if argv[:1] == ["save"])


def main(argv: list[str]) -> int:
    """The stand-in CLI (tests/fakes/dockerbin/docker runs this)."""
    root = Path(os.environ.get(DIR_ENV) or "/nonexistent")
    if root.is_dir():
        with open(root / "calls.jsonl", "a") as log:
            log.write(json.dumps(argv) + "\n")
    index = FakeDocker(root)._index() if root.is_dir() else {}
    args = [a for a in argv if a != "--"]
    if args[:2] == ["image", "inspect"] and len(args) == 5 and args[2] == "--format":
        image = index.get(args[4])
        if image is None:
            sys.stderr.write(f"Error response from daemon: No such image: {args[4]}\n")
            return 1
        out = args[3].replace("{{.Id}}", str(image["id"])).replace("{{.Size}}", str(image["size"]))
        sys.stdout.write(out + "\n")
        return 0
    if args[:1] == ["save"] and len(args) == 2:
        image = index.get(args[1])
        if image is None:
            sys.stderr.write(f"Error response from daemon: reference does not exist: {args[1]}\n")
            return 1
        sys.stdout.buffer.write((root / str(image["file"])).read_bytes())
        return 0
    sys.stderr.write(f"fake docker: unsupported: {' '.join(argv)}\n")
    return 1
