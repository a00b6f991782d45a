"""`kit.bump-bases`: re-pin the Dockerfile's base images to their tags' current digests.

The kit image's bases are pinned on single lines, `ARG NAME=<repo>:<tag>@sha256:<hex>`
(`PYTHON_BASE_IMAGE`, `UV_IMAGE`). For each pin, ask the registry what `<repo>:<tag>`
resolves to now (the multi-platform index digest, anonymously, through the `oras` SDK)
and rewrite that one line; every other byte of the Dockerfile stays. The weekly rebuild
opens a pull request with the result; `release.rebuild` builds on the same current digests
(passed as build arguments) before the pull request lands.

Online only: a registry that cannot be reached is an error that says so (exit 1), and
nothing is rewritten unless every pin resolved.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import oras.container  # type: ignore[import-untyped]
import oras.provider  # type: ignore[import-untyped]
import requests

from bandkit.errors import BandkitError
from bandkit.fsio import write_atomic
from bandkit.image.facts import DOCKERFILE

PINNED = ("PYTHON_BASE_IMAGE", "UV_IMAGE")
REQUEST_TIMEOUT_S = 30.0
INDEX_ACCEPT = ", ".join(
    (
        "application/vnd.oci.image.index.v1+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.docker.distribution.manifest.v2+json",
    )
)
_PIN = re.compile(r"^(?P<ref>[^@\s]+):(?P<tag>[\w][\w.-]*)@(?P<digest>sha256:[0-9a-f]{64})$")
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
Resolve = Callable[[str, str], str]  # (repository, tag) -> digest


class BumpError(BandkitError):
    """A pin could not be read, resolved or rewritten."""


class SingleShotRegistry(oras.provider.Registry):  # type: ignore[misc]
    """The `oras` registry client with one attempt per request and a timeout on each (the
    SDK's own retry loop backs off for minutes, which hides an outage instead of saying it)."""

    def __init__(self, host: str, *, insecure: bool = False, timeout_s: float = 60.0) -> None:
        super().__init__(hostname=host, insecure=insecure)
        self.session.request = functools.partial(self.session.request, timeout=timeout_s)

    def do_request(self, *args: Any, **kwargs: Any) -> requests.Response:
        once = oras.provider.Registry.do_request.__wrapped__  # past @decorator.retry()
        response: requests.Response = once(self, *args, **kwargs)
        return response


def registry_of(repository: str) -> tuple[str, str]:
    """(API host, repository path): `python` is Docker Hub's `library/python`."""
    first, _, rest = repository.partition("/")
    if not rest or ("." not in first and ":" not in first and first != "localhost"):
        path = repository if rest else f"library/{repository}"
        return "registry-1.docker.io", path
    host = "registry-1.docker.io" if first == "docker.io" else first
    return host, rest


def resolve_online(repository: str, tag: str) -> str:
    """The digest `repository:tag` resolves to now; BumpError (naming the host) if offline."""
    host, path = registry_of(repository)
    client = SingleShotRegistry(host, timeout_s=REQUEST_TIMEOUT_S)
    url = f"https://{host}/v2/{path}/manifests/{tag}"
    try:
        client.auth.load_configs(oras.container.Container(f"{host}/{path}:{tag}"))
        response = client.do_request(url, "HEAD", headers={"Accept": INDEX_ACCEPT})
    except (requests.RequestException, ValueError, OSError) as exc:
        raise BumpError(
            f"offline? cannot reach {host} to resolve {repository}:{tag} "
            f"({type(exc).__name__}); kit.bump-bases needs the network, nothing was changed"
        ) from None
    digest = response.headers.get("Docker-Content-Digest", "")
    if response.status_code != 200 or not _DIGEST.match(digest):
        raise BumpError(
            f"{host} answered HTTP {response.status_code} for {repository}:{tag}; "
            "nothing was changed"
        )
    return digest


@dataclass(frozen=True)
class Change:
    path: Path
    name: str
    old: str
    new: str

    @property
    def changed(self) -> bool:
        return self.old != self.new


def pins(text: str, path: Path) -> dict[str, re.Match[str]]:
    """The pinned ARG values by name; each must be on exactly one `ARG NAME=` line."""
    found: dict[str, re.Match[str]] = {}
    for name in PINNED:
        lines = re.findall(rf"^ARG {name}=(\S*)[ \t]*$", text, flags=re.MULTILINE)
        if len(lines) != 1:
            raise BumpError(f"{path}: expected one `ARG {name}=` line, found {len(lines)}")
        match = _PIN.match(lines[0])
        if match is None:
            raise BumpError(f"{path}: {name} is not pinned as <repo>:<tag>@sha256:<64 hex>")
        found[name] = match
    return found


def rewrite(text: str, name: str, value: str) -> str:
    """`text` with the single `ARG name=...` line set to `value`; nothing else moves."""
    pattern = re.compile(rf"^(ARG {name}=)\S*([ \t]*)$", re.MULTILINE)
    new, count = pattern.subn(lambda m: f"{m[1]}{value}{m[2]}", text)
    if count != 1:
        raise BumpError(f"expected one `ARG {name}=` line, found {count}")
    return new


def bump(
    paths: Sequence[Path] = (DOCKERFILE,), resolve: Resolve = resolve_online, *, write: bool = True
) -> list[Change]:
    """Resolve every pin of every file first, then rewrite the files whose pins moved."""
    planned: list[tuple[Path, str, list[Change]]] = []
    for path in paths:
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise BumpError(f"cannot read {path}: {exc.strerror}") from None
        changes = []
        for name, match in pins(text, path).items():
            digest = resolve(match["ref"], match["tag"])
            new = f"{match['ref']}:{match['tag']}@{digest}"
            changes.append(Change(path, name, match[0], new))
        planned.append((path, text, changes))
    done: list[Change] = []
    for path, text, changes in planned:
        updated = text
        for change in changes:
            updated = rewrite(updated, change.name, change.new)
        if write and updated != text:
            write_atomic(path, updated, mode=0o644)
        done += changes
    return done
