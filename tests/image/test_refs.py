"""Tag rules, digest parsing and repository references (pure, no IO)."""

from __future__ import annotations

import pytest

from bandkit.image.refs import (
    RefError,
    digest_from_push_output,
    is_floating,
    is_immutable,
    parse_digest,
    parse_repository,
    publish_order,
)

GOOD = "sha256:" + "ab" * 32


@pytest.mark.parametrize("tag", ["1.2.3", "0.0.0", "6.0.1-r1", "10.20.30-r12"])
def test_version_tags_are_immutable(tag: str) -> None:
    assert is_immutable(tag)
    assert not is_floating(tag)


@pytest.mark.parametrize("tag", ["latest", "6", "0"])
def test_latest_and_major_float(tag: str) -> None:
    assert is_floating(tag)
    assert not is_immutable(tag)


@pytest.mark.parametrize("tag", ["1.2", "01.2.3", "1.2.3-r0", "1.2.3-rc1", "v1.2.3", "dev", "6.x"])
def test_other_tags_are_neither(tag: str) -> None:
    assert not is_immutable(tag)
    assert not is_floating(tag)


def test_publish_order_puts_versions_first_and_dedups() -> None:
    assert publish_order(["latest", "6.0.1", "6", "6.0.1-r2", "latest"]) == (
        ["6.0.1", "6.0.1-r2"],
        ["latest", "6"],
    )


@pytest.mark.parametrize(
    ("tags", "message"),
    [
        (["latest"], "needs one immutable version tag"),
        (["1.2.3", "dev"], "'dev' is neither a version"),
        (["1.2.3", "2"], "floating major tag '2' does not match"),
    ],
)
def test_publish_order_refuses_unsafe_sets(tags: list[str], message: str) -> None:
    with pytest.raises(RefError, match=message):
        publish_order(tags)


def test_parse_digest_accepts_only_sha256_lower_hex() -> None:
    assert parse_digest(GOOD) == GOOD
    for bad in ("sha256:" + "AB" * 32, "sha256:abc", "sha512:" + "ab" * 64, GOOD + " ", ""):
        with pytest.raises(RefError, match="sha256:<64 lowercase hex>"):
            parse_digest(bad)


def test_digest_from_push_output_takes_the_reported_digest() -> None:
    output = (
        "The push refers to repository [127.0.0.1:5000/kit]\n"
        "5f70bf18a086: Pushed\n"
        f"1.2.3: digest: {GOOD} size: 1573\n"
    )
    assert digest_from_push_output(output) == GOOD
    with pytest.raises(RefError, match="no `digest:"):
        digest_from_push_output("denied: requested access to the resource is denied\n")


def test_parse_repository() -> None:
    repo = parse_repository("127.0.0.1:5000/band-python-kit")
    assert (repo.host, repo.name) == ("127.0.0.1:5000", "band-python-kit")
    assert repo.ref("1.2.3") == "127.0.0.1:5000/band-python-kit:1.2.3"
    assert repo.by_digest(GOOD) == f"127.0.0.1:5000/band-python-kit@{GOOD}"
    assert parse_repository("ghcr.io/band-ai/band-python-kit/image").name == (
        "band-ai/band-python-kit/image"
    )
    assert parse_repository("localhost/kit").host == "localhost"
    for bad in ("band-python-kit", "library/kit", "127.0.0.1:5000/Kit", "host.io/kit:tag"):
        with pytest.raises(RefError, match="HOST\\[:PORT\\]/NAME"):
            parse_repository(bad)
