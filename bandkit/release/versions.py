"""Version tags of the kit: grammar, order, the next rebuild suffix, and floating tags.

Grammar (no leading zeros anywhere):

- `X.Y.Z`: a release, immutable;
- `X.Y.Z-rN` (N >= 1): the Nth rebuild of release `X.Y.Z` (new base images or CVE fixes,
  same source), immutable;
- `X.Y.Z-rcN` (N >= 1): a pre-release used for rehearsals (`0.0.0-rc1`), immutable, and it
  never moves a floating tag.

Order: `X.Y.Z-rc1 < X.Y.Z-rc2 < X.Y.Z < X.Y.Z-r1 < X.Y.Z-r2 < X.Y.(Z+1)-rc1`.
Floating tags are `latest` and the bare major (`6`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import total_ordering

from bandkit.errors import BandkitError

LATEST = "latest"
_NUM = r"(0|[1-9]\d*)"
_GRAMMAR = re.compile(
    rf"(?P<major>{_NUM})\.(?P<minor>{_NUM})\.(?P<patch>{_NUM})"
    r"(?:-rc(?P<rc>[1-9]\d*)|-r(?P<rev>[1-9]\d*))?",
    re.ASCII,  # `\d` alone would also accept non-ASCII digits such as "\u0663"
)


class VersionError(BandkitError):
    """A tag that is not `X.Y.Z`, `X.Y.Z-rN` or `X.Y.Z-rcN`."""


class NeverPublished(BandkitError):
    """A rebuild was asked for a release that no registry has: there is nothing to rebuild."""


@total_ordering
@dataclass(frozen=True)
class Version:
    """One immutable version. `rc` is set for pre-releases, `revision` > 0 for rebuilds."""

    major: int
    minor: int
    patch: int
    rc: int | None = None
    revision: int = 0

    def __post_init__(self) -> None:
        if min(self.major, self.minor, self.patch, self.revision) < 0:
            raise VersionError(f"version numbers must not be negative: {self!r}")
        if self.rc is not None and (self.rc < 1 or self.revision):
            raise VersionError(f"a pre-release has rc >= 1 and no revision: {self!r}")

    def __str__(self) -> str:
        text = f"{self.major}.{self.minor}.{self.patch}"
        if self.rc is not None:
            return f"{text}-rc{self.rc}"
        return f"{text}-r{self.revision}" if self.revision else text

    def _key(self) -> tuple[int, int, int, int, int]:
        stage, number = (0, self.rc) if self.rc is not None else (1, self.revision)
        return (self.major, self.minor, self.patch, stage, number)

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Version):
            return NotImplemented
        return self._key() < other._key()

    @property
    def is_prerelease(self) -> bool:
        return self.rc is not None

    @property
    def base(self) -> Version:
        """The release this version belongs to: `-rN` and `-rcN` stripped."""
        return Version(self.major, self.minor, self.patch)

    def with_revision(self, revision: int) -> Version:
        """The rebuild `revision` of this version's base (0 is the release itself)."""
        return Version(self.major, self.minor, self.patch, revision=revision)


def parse(text: str) -> Version:
    """Parse a version tag, or raise VersionError naming the accepted forms."""
    match = _GRAMMAR.fullmatch(text)  # fullmatch: `$` would accept a trailing newline
    if match is None:
        raise VersionError(
            f"version must be X.Y.Z, X.Y.Z-rN or X.Y.Z-rcN (N >= 1, no leading zeros), "
            f"got {text[:80]!r}"
        )
    rc, rev = match["rc"], match["rev"]
    return Version(
        int(match["major"]),
        int(match["minor"]),
        int(match["patch"]),
        rc=int(rc) if rc else None,
        revision=int(rev) if rev else 0,
    )


def try_parse(text: str) -> Version | None:
    """The version a tag names, or None for any other tag (`latest`, `6`, `sha-...`)."""
    try:
        return parse(text)
    except VersionError:
        return None


def _as_version(value: str | Version) -> Version:
    return value if isinstance(value, Version) else parse(value)


def next_rebuild(
    version_base: str | Version, tags_per_registry: Mapping[str, Iterable[str]]
) -> Version:
    """The version the next rebuild of `version_base` publishes, `X.Y.Z-rN`.

    For each registry, take the highest revision of this base it has (`X.Y.Z` itself
    counts as revision 0, a registry without the base counts as "below 0"); the next
    version is the *minimum* of those maxima plus one.

    Why the minimum and not the maximum: a publish pushes to every registry in turn, so an
    interrupted one leaves the registries out of step (`-r2` in one, only `-r1` in the
    other). Taking the minimum makes the next run target that same `-r2` again; the
    planner then sees it present in one registry and absent in the other and copies the
    existing digest across. The lagging registry is healed with the same bytes, and no
    revision number ends up meaning different images in different registries, or being
    missing from one of them forever. With the maximum, `-r2` would be skipped in the
    lagging registry and `-r3` would be built fresh.

    Gaps inside one registry (`-r1`, `-r3` without `-r2`, e.g. a tag deleted by hand) are
    not refilled: only each registry's highest revision counts, so a number that may have
    been pulled once is never reused for a different image.

    Pre-releases and tags of other versions are ignored; `X.Y.Z-rN` input means its base.
    Raises NeverPublished when no registry has any revision of the base (nothing to
    rebuild), VersionError for a pre-release base, ValueError for an empty mapping.
    """
    base = _as_version(version_base)
    if base.is_prerelease:
        raise VersionError(f"pre-release {base} is never rebuilt; publish a new -rcN instead")
    base = base.base
    if not tags_per_registry:
        raise ValueError("next_rebuild needs at least one registry's tags")
    maxima: dict[str, int] = {}
    for registry, tags in tags_per_registry.items():
        revisions = [
            v.revision
            for v in map(try_parse, tags)
            if v is not None and not v.is_prerelease and v.base == base
        ]
        maxima[registry] = max(revisions, default=-1)
    if max(maxima.values()) < 0:
        raise NeverPublished(
            f"no registry has {base} ({', '.join(maxima)}): publish the release first"
        )
    return base.with_revision(min(maxima.values()) + 1)


def floating_tags(
    version: str | Version, existing_versions: Iterable[str | Version]
) -> tuple[str, ...]:
    """The floating tags publishing `version` may move: `(major, "latest")`, a subset, or ().

    Stale-move guard: a floating tag never moves backwards. `latest` moves only when
    `version` is not older than the newest release present, and the major tag only when
    it is not older than the newest release present *of that major* (rebuilding 5.9.0
    after 6.0.0 shipped may move `5`, never `latest`). Pre-releases never move anything
    and never count as "the newest release". Tags in `existing_versions` that are not
    versions (`latest`, `6`) are ignored; `version` itself may be among them.
    """
    target = _as_version(version)
    if target.is_prerelease:
        return ()
    releases = [
        v
        for v in (e if isinstance(e, Version) else try_parse(e) for e in existing_versions)
        if v is not None and not v.is_prerelease
    ]
    moves: list[str] = []
    if all(v <= target for v in releases if v.major == target.major):
        moves.append(str(target.major))
    if all(v <= target for v in releases):
        moves.append(LATEST)
    return tuple(moves)
