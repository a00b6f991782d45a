"""Pure rules about image references: digests, tags, and the order tags are published in.

No IO here. Tag grammar (from the release process): `X.Y.Z` and `X.Y.Z-rN` are
immutable versions, published once and never overwritten; `latest` and a bare major
(`6`) float, and move only after every immutable tag of the same push succeeded.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from bandkit.errors import BandkitError

DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
IMMUTABLE = re.compile(r"^(?P<major>0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-r[1-9]\d*)?$")
MAJOR = re.compile(r"^(0|[1-9]\d*)$")
FLOATING_NAMES = ("latest",)
# `docker push` ends with "<tag>: digest: sha256:<hex> size: <n>".
_PUSH_DIGEST = re.compile(r"digest: (sha256:[0-9a-f]{64}) size: \d+")
# host[:port]/path, lowercase path components as the distribution spec allows.
_REPOSITORY = re.compile(
    r"^(?P<host>[a-zA-Z0-9.-]+(:\d+)?)/(?P<name>[a-z0-9]+([._-][a-z0-9]+)*"
    r"(/[a-z0-9]+([._-][a-z0-9]+)*)*)$"
)


class RefError(BandkitError):
    """A malformed digest, tag or repository reference."""


def parse_digest(text: str) -> str:
    """Return the digest if it is `sha256:` + 64 lowercase hex, else raise RefError."""
    if not DIGEST.match(text):
        raise RefError(f"digest must be sha256:<64 lowercase hex>, got {text[:80]!r}")
    return text


def digest_from_push_output(output: str) -> str:
    """The manifest digest `docker push` reported (the last one, if several)."""
    found = _PUSH_DIGEST.findall(output)
    if not found:
        raise RefError("no `digest: sha256:... size: N` line in the docker push output")
    return parse_digest(found[-1])


@dataclass(frozen=True)
class Repository:
    """A registry repository: `host[:port]/name[/name...]`."""

    host: str
    name: str

    def ref(self, tag: str) -> str:
        return f"{self.host}/{self.name}:{tag}"

    def by_digest(self, digest: str) -> str:
        return f"{self.host}/{self.name}@{parse_digest(digest)}"


def parse_repository(text: str) -> Repository:
    """`HOST[:PORT]/NAME`; the host must look like one (a dot, a port, or localhost)."""
    match = _REPOSITORY.match(text)
    host = match["host"] if match else ""
    if match is None or not ("." in host or ":" in host or host == "localhost"):
        raise RefError(
            f"registry must be HOST[:PORT]/NAME (e.g. 127.0.0.1:5000/band-python-kit), got {text!r}"
        )
    return Repository(host, match["name"])


def is_immutable(tag: str) -> bool:
    return IMMUTABLE.match(tag) is not None


def is_floating(tag: str) -> bool:
    return tag in FLOATING_NAMES or MAJOR.match(tag) is not None


def publish_order(tags: list[str]) -> tuple[list[str], list[str]]:
    """Split tags into (immutable, floating) in publish order, or raise RefError.

    At least one immutable version is required, a floating major must equal that
    version's major, and any other tag is refused rather than silently pushed.
    """
    immutable = [t for t in dict.fromkeys(tags) if is_immutable(t)]
    floating = [t for t in dict.fromkeys(tags) if is_floating(t)]
    other = [t for t in tags if t not in immutable and t not in floating]
    if other:
        raise RefError(
            f"tag {other[0]!r} is neither a version (X.Y.Z, X.Y.Z-rN) nor floating "
            "(latest, <major>)"
        )
    if not immutable:
        raise RefError("push needs one immutable version tag (X.Y.Z or X.Y.Z-rN)")
    majors = {m["major"] for t in immutable if (m := IMMUTABLE.match(t))}
    for tag in floating:
        if MAJOR.match(tag) and tag not in majors:
            raise RefError(f"floating major tag {tag!r} does not match version(s) {immutable}")
    return immutable, floating
