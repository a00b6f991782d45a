"""Version grammar, order, the next rebuild suffix, and the stale-move guard."""

from __future__ import annotations

import pytest

from bandkit.errors import BandkitError
from bandkit.release import versions
from bandkit.release.versions import NeverPublished, Version, VersionError


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0.0.0", Version(0, 0, 0)),
        ("6.0.1", Version(6, 0, 1)),
        ("10.20.30", Version(10, 20, 30)),
        ("6.0.1-r1", Version(6, 0, 1, revision=1)),
        ("6.0.1-r12", Version(6, 0, 1, revision=12)),
        ("0.0.0-rc1", Version(0, 0, 0, rc=1)),
        ("1.2.3-rc10", Version(1, 2, 3, rc=10)),
    ],
)
def test_valid_versions_parse_and_round_trip(text: str, expected: Version) -> None:
    assert versions.parse(text) == expected
    assert str(versions.parse(text)) == text


@pytest.mark.parametrize(
    "text",
    [
        "",
        "6",
        "6.0",
        "v6.0.1",
        "06.0.1",
        "6.00.1",
        "6.0.01",
        "6.0.1-r0",
        "6.0.1-r01",
        "6.0.1-rc0",
        "6.0.1-r",
        "6.0.1-rc",
        "6.0.1-r1-rc1",
        "6.0.1-rc1-r1",
        "6.0.1-beta1",
        "6.0.1+build",
        "6.0.1 ",
        " 6.0.1",
        "6.0.1\n",
        "latest",
        "-1.0.0",
        "6.0.1-r1\u0663",  # a non-ASCII digit
        "\u0666.0.1",
    ],
)
def test_invalid_versions_are_refused(text: str) -> None:
    with pytest.raises(VersionError, match=r"X\.Y\.Z, X\.Y\.Z-rN or X\.Y\.Z-rcN"):
        versions.parse(text)
    assert versions.try_parse(text) is None


def test_version_error_is_a_bandkit_error() -> None:
    assert issubclass(VersionError, BandkitError)
    assert issubclass(NeverPublished, BandkitError)


def test_impossible_versions_cannot_be_constructed() -> None:
    with pytest.raises(VersionError, match="negative"):
        Version(-1, 0, 0)
    with pytest.raises(VersionError, match="no revision"):
        Version(1, 0, 0, rc=1, revision=1)
    with pytest.raises(VersionError, match="rc >= 1"):
        Version(1, 0, 0, rc=0)


def test_order_pre_release_then_release_then_rebuilds() -> None:
    ordered = [
        "0.0.0-rc1",
        "0.0.0",
        "5.9.9-r3",
        "6.0.0-rc1",
        "6.0.0-rc2",
        "6.0.0-rc10",
        "6.0.0",
        "6.0.0-r1",
        "6.0.0-r2",
        "6.0.0-r10",
        "6.0.1",
        "6.1.0",
        "6.10.0",
        "10.0.0",
    ]
    parsed = [versions.parse(t) for t in ordered]
    assert sorted(reversed(parsed)) == parsed
    assert versions.parse("6.0.1-r1") > versions.parse("6.0.1")
    assert versions.parse("6.0.1-rc1") < versions.parse("6.0.1")
    assert versions.parse("6.0.1-r1") >= versions.parse("6.0.1-r1")


def test_versions_are_frozen_and_hashable() -> None:
    version = versions.parse("6.0.1-r2")
    with pytest.raises(AttributeError):
        version.revision = 3  # type: ignore[misc]
    assert {version, versions.parse("6.0.1-r2")} == {version}
    assert version.base == Version(6, 0, 1)
    assert version.with_revision(0) == Version(6, 0, 1)
    assert versions.parse("1.0.0-rc2").is_prerelease
    assert not version.is_prerelease


@pytest.mark.parametrize(
    ("tags", "expected"),
    [
        # released once everywhere, never rebuilt
        ({"ghcr": ["6.0.1", "latest", "6"], "hub": ["6.0.1", "latest", "6"]}, "6.0.1-r1"),
        # both registries in step at -r2
        ({"ghcr": ["6.0.1", "6.0.1-r1", "6.0.1-r2"], "hub": ["6.0.1-r2", "6.0.1-r1"]}, "6.0.1-r3"),
        # ghcr ahead (the hub push of -r2 failed): heal -r2, do not skip to -r3
        ({"ghcr": ["6.0.1", "6.0.1-r1", "6.0.1-r2"], "hub": ["6.0.1", "6.0.1-r1"]}, "6.0.1-r2"),
        # hub ahead: the same rule, whichever registry lags
        ({"ghcr": ["6.0.1"], "hub": ["6.0.1", "6.0.1-r1"]}, "6.0.1-r1"),
        # one registry never got the release: the release itself is healed first
        ({"ghcr": ["6.0.1", "6.0.1-r1"], "hub": []}, "6.0.1"),
        # a gap inside a registry is not refilled: only each maximum counts
        ({"ghcr": ["6.0.1", "6.0.1-r1", "6.0.1-r3"], "hub": ["6.0.1-r3"]}, "6.0.1-r4"),
        # other versions, pre-releases and non-version tags are ignored
        (
            {
                "ghcr": ["6.0.0-r9", "6.0.2", "6.0.1", "6.0.1-rc3", "sha-abc", "6.0.1-r1"],
                "hub": ["6.0.1-r1", "7.0.0-r5", "latest"],
            },
            "6.0.1-r2",
        ),
        # a single registry works the same way
        ({"only": ["6.0.1", "6.0.1-r4"]}, "6.0.1-r5"),
    ],
)
def test_next_rebuild(tags: dict[str, list[str]], expected: str) -> None:
    assert versions.next_rebuild("6.0.1", tags) == versions.parse(expected)


def test_next_rebuild_takes_the_base_of_a_rebuild_version_and_any_iterable() -> None:
    tags = {"ghcr": iter(["6.0.1", "6.0.1-r1"]), "hub": ("6.0.1", "6.0.1-r1")}
    assert str(versions.next_rebuild("6.0.1-r1", tags)) == "6.0.1-r2"
    assert str(versions.next_rebuild(Version(6, 0, 1), {"a": ["6.0.1"]})) == "6.0.1-r1"


def test_next_rebuild_of_a_never_published_release_is_refused() -> None:
    with pytest.raises(NeverPublished, match=r"no registry has 6\.0\.1 \(ghcr, hub\)"):
        versions.next_rebuild("6.0.1", {"ghcr": ["6.0.0", "latest"], "hub": []})


def test_next_rebuild_refuses_pre_releases_and_no_registries() -> None:
    with pytest.raises(VersionError, match="never rebuilt"):
        versions.next_rebuild("0.0.0-rc1", {"ghcr": ["0.0.0-rc1"]})
    with pytest.raises(ValueError, match="at least one registry"):
        versions.next_rebuild("6.0.1", {})
    with pytest.raises(VersionError):
        versions.next_rebuild("6.0", {"ghcr": ["6.0.1"]})


@pytest.mark.parametrize(
    ("version", "existing", "expected"),
    [
        ("6.0.1", [], ("6", "latest")),  # first release ever
        ("6.0.1", ["6.0.0", "5.9.0", "latest", "6"], ("6", "latest")),
        ("6.0.1", ["6.0.1"], ("6", "latest")),  # re-running the newest is not older
        ("6.0.1-r1", ["6.0.1", "6.0.0-r4"], ("6", "latest")),
        ("6.0.1", ["6.0.1-r1"], ()),  # the release is older than its own rebuild
        ("6.0.1-r1", ["6.0.2"], ()),  # stale rebuild: a newer release exists
        ("6.0.1-r1", ["6.0.1-r2"], ()),
        ("5.9.0-r1", ["6.0.0", "5.9.0"], ("5",)),  # newest of major 5, not newest overall
        ("5.9.0-r1", ["6.0.0", "5.10.0"], ()),
        ("6.0.1", ["6.0.2-rc1", "7.0.0-rc1"], ("6", "latest")),  # pre-releases never count
        ("0.0.0-rc1", [], ()),  # a pre-release never moves anything
        ("6.1.0-rc2", ["6.0.0"], ()),
    ],
)
def test_floating_tags_and_stale_move_guard(
    version: str, existing: list[str], expected: tuple[str, ...]
) -> None:
    assert versions.floating_tags(version, existing) == expected


def test_floating_tags_accept_parsed_versions() -> None:
    newer = versions.parse("6.0.2")
    assert versions.floating_tags(versions.parse("6.0.1"), [newer]) == ()
    assert versions.floating_tags("6.0.3", [newer]) == ("6", "latest")
