"""The registry side of a release, through the `oras` SDK: probe, list, copy, push a kit.

One `Registries` object talks to every registry of a release (a `oras` client per host:
plain HTTP for loopback hosts, HTTPS elsewhere; credentials from the Docker config, as
`oras` loads them). Every request has a timeout and is tried once: the SDK's own retry
loop (minutes of back-off) is bypassed, because a release must fail fast and closed.

- `probe(repo, tag)`: `Present(digest)` on 200, `Absent` only on a clear not-found (404),
  `Unknown(why)` for anything else (auth, 5xx, connection refused);
- `tags(repo)`: the tag list; a repository the registry does not know (NAME_UNKNOWN /
  404) has none, any other answer raises `RegistryError`;
- `copy(src, digest, dst, tag)`: the manifest (and, for an index, every child manifest)
  copied byte for byte, blobs mounted or streamed, so the digest is the same everywhere;
- `push_kit` / `kit_config`: the kit artifact (`kit_artifact`) and its config read back.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import oras.container  # type: ignore[import-untyped]
import requests

from bandkit.errors import BandkitError
from bandkit.image.push import MANIFEST_ACCEPT, _loopback
from bandkit.image.refs import Repository
from bandkit.kit.bump_bases import SingleShotRegistry
from bandkit.release.kit_artifact import KitArtifact
from bandkit.release.plan import ABSENT, Present, Probe, Unknown

REQUEST_TIMEOUT_S = 60.0
INDEX_TYPES = (
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
)
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
_CHUNK = 1 << 20


class RegistryError(BandkitError):
    """A registry answered something a release cannot act on (always fail closed)."""


def _client_for(host: str) -> SingleShotRegistry:
    return SingleShotRegistry(host, insecure=_loopback(host), timeout_s=REQUEST_TIMEOUT_S)


def _error_codes(response: requests.Response) -> set[str]:
    try:
        body = response.json()
    except ValueError:
        return set()
    errors = body.get("errors") if isinstance(body, dict) else None
    return {str(e.get("code")) for e in errors or [] if isinstance(e, dict)}


def sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


@dataclass
class Registries:
    """Clients for the registries of one release, made on first use."""

    _clients: dict[str, SingleShotRegistry] | None = None

    def _client(self, repo: Repository) -> tuple[SingleShotRegistry, oras.container.Container]:
        clients = self._clients if self._clients is not None else {}
        self._clients = clients
        if repo.host not in clients:
            clients[repo.host] = _client_for(repo.host)
        client = clients[repo.host]
        container = oras.container.Container(f"{repo.host}/{repo.name}")
        client.auth.load_configs(container)
        return client, container

    def _url(self, repo: Repository, path: str) -> str:
        client, _ = self._client(repo)
        return f"{client.prefix}://{repo.host}/v2/{repo.name}/{path}"

    def _request(self, repo: Repository, method: str, path: str, **kw: Any) -> requests.Response:
        client, _ = self._client(repo)
        try:
            return client.do_request(self._url(repo, path), method, **kw)
        except ValueError as exc:  # the SDK's "Cannot respond to request for authentication"
            raise RegistryError(
                f"registry {repo.host} refused {method} {path} without credentials it "
                f"accepts ({exc}); log in (`docker login {repo.host}`) and re-run"
            ) from None
        except (requests.RequestException, OSError) as exc:
            raise RegistryError(
                f"registry {repo.host} did not answer {method} {path}: {exc}"
            ) from None

    def probe(self, repo: Repository, tag: str) -> Probe:
        """What `repo:tag` is: present (digest), absent (a clear 404), or unknown."""
        try:
            response = self._request(
                repo, "HEAD", f"manifests/{tag}", headers={"Accept": MANIFEST_ACCEPT}
            )
        except RegistryError as exc:
            return Unknown(str(exc))
        if response.status_code == 404:
            return ABSENT
        if response.status_code != 200:
            return Unknown(f"HTTP {response.status_code} for {repo.ref(tag)}")
        digest = response.headers.get("Docker-Content-Digest", "")
        try:
            return Present(digest)
        except ValueError:
            return Unknown(f"no usable digest for {repo.ref(tag)} ({digest[:80]!r})")

    def tags(self, repo: Repository) -> list[str]:
        """Every tag of `repo` (following pagination); none when the repository is unknown."""
        found: list[str] = []
        path = "tags/list?n=1000"
        while path:
            response = self._request(repo, "GET", path)
            if response.status_code == 404 and _error_codes(response) <= {"NAME_UNKNOWN"}:
                return found
            if response.status_code != 200:
                raise RegistryError(
                    f"listing tags of {repo.host}/{repo.name} answered HTTP "
                    f"{response.status_code} {sorted(_error_codes(response))}; fail closed"
                )
            found += response.json().get("tags") or []
            link = response.links.get("next", {}).get("url", "")
            path = link.split(f"/v2/{repo.name}/", 1)[-1] if link else ""
        return found

    def manifest(self, repo: Repository, reference: str) -> tuple[bytes, str]:
        """The raw manifest bytes and media type; a digest reference is checked."""
        response = self._request(
            repo, "GET", f"manifests/{reference}", headers={"Accept": MANIFEST_ACCEPT}
        )
        if response.status_code != 200:
            raise RegistryError(
                f"{repo.host}/{repo.name} answered HTTP {response.status_code} for manifest "
                f"{reference}"
            )
        raw = response.content
        if reference.startswith("sha256:") and sha256(raw) != reference:
            raise RegistryError(f"manifest {reference} of {repo.name} does not hash to itself")
        media = response.headers.get("Content-Type", "").split(";")[0].strip()
        return raw, media or str(json.loads(raw).get("mediaType", ""))

    def _put_manifest(self, repo: Repository, reference: str, raw: bytes, media: str) -> str:
        response = self._request(
            repo, "PUT", f"manifests/{reference}", data=raw, headers={"Content-Type": media}
        )
        if response.status_code not in (200, 201):
            raise RegistryError(
                f"{repo.ref(reference)} refused the manifest: HTTP {response.status_code} "
                f"{sorted(_error_codes(response))}"
            )
        digest = response.headers.get("Docker-Content-Digest", sha256(raw))
        if digest != sha256(raw):
            raise RegistryError(f"{repo.ref(reference)} stored {digest}, not {sha256(raw)}")
        return digest

    def _has_blob(self, repo: Repository, digest: str) -> bool:
        return self._request(repo, "HEAD", f"blobs/{digest}").status_code == 200

    def _copy_blob(self, src: Repository, dst: Repository, descriptor: dict[str, Any]) -> None:
        digest = str(descriptor["digest"])
        if self._has_blob(dst, digest):
            return
        if src.host == dst.host:
            mounted = self._request(dst, "POST", f"blobs/uploads/?mount={digest}&from={src.name}")
            if mounted.status_code == 201:
                return
        with _downloaded(self, src, digest) as path:
            client, container = self._client(dst)
            layer = {"digest": digest, "size": path.stat().st_size}
            try:
                response = client.put_upload(str(path), container, layer)
            except (requests.RequestException, ValueError, OSError) as exc:
                raise RegistryError(
                    f"upload of {digest[:19]} to {dst.host} failed: {exc}"
                ) from None
            if response.status_code != 201:
                raise RegistryError(
                    f"{dst.host} refused blob {digest[:19]}: HTTP {response.status_code}"
                )

    def copy(self, src: Repository, digest: str, dst: Repository, tag: str) -> str:
        """Copy `src@digest` to `dst:tag` byte for byte (children and blobs first)."""
        raw, media = self.manifest(src, digest)
        document = json.loads(raw)
        if media in INDEX_TYPES:
            for child in document.get("manifests", []):
                self.copy(src, str(child["digest"]), dst, str(child["digest"]))
        else:
            for blob in [document["config"], *document.get("layers", [])]:
                self._copy_blob(src, dst, blob)
        return self._put_manifest(dst, tag, raw, media)

    def push_kit(self, repo: Repository, tag: str, artifact: KitArtifact) -> str:
        """Push the kit artifact's blobs and manifest as `repo:tag`; return its digest."""
        client, container = self._client(repo)
        with tempfile.TemporaryDirectory(prefix="bandkit-kit-") as tmp:
            for descriptor, data in artifact.blobs():
                if self._has_blob(repo, str(descriptor["digest"])):
                    continue
                path = Path(tmp) / str(descriptor["digest"]).replace(":", "-")
                path.write_bytes(data)
                response = client.put_upload(str(path), container, descriptor)
                if response.status_code != 201:
                    raise RegistryError(
                        f"{repo.host} refused a kit blob: HTTP {response.status_code}"
                    )
        return self._put_manifest(repo, tag, artifact.manifest, OCI_MANIFEST)

    def blob(self, repo: Repository, digest: str) -> bytes:
        response = self._request(repo, "GET", f"blobs/{digest}")
        if response.status_code != 200 or sha256(response.content) != digest:
            raise RegistryError(f"blob {digest[:19]} of {repo.name}: HTTP {response.status_code}")
        return response.content


@contextlib.contextmanager
def _downloaded(registries: Registries, repo: Repository, digest: str) -> Iterator[Path]:
    """A blob streamed to a temporary file and checked against its digest."""
    response = registries._request(repo, "GET", f"blobs/{digest}", stream=True)
    if response.status_code != 200:
        raise RegistryError(
            f"{repo.host} answered HTTP {response.status_code} for blob {digest[:19]}"
        )
    with tempfile.TemporaryDirectory(prefix="bandkit-blob-") as tmp:
        path = Path(tmp) / "blob"
        hasher = hashlib.sha256()
        with path.open("wb") as out:
            for chunk in response.iter_content(chunk_size=_CHUNK):
                hasher.update(chunk)
                out.write(chunk)
        if "sha256:" + hasher.hexdigest() != digest:
            raise RegistryError(f"blob {digest[:19]} from {repo.host} is corrupt")
        yield path
