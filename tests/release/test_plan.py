"""The publish planner on hand-built registry snapshots (two registries, as released)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import replace

import pytest

from bandkit.errors import BandkitError
from bandkit.release.plan import (
    ABSENT,
    Observed,
    Plan,
    Present,
    Probe,
    RegistryObserved,
    ReleaseRefused,
    StepKind,
    Unknown,
    plan,
    render,
)

D1 = "sha256:" + "a" * 64
D2 = "sha256:" + "b" * 64
D3 = "sha256:" + "c" * 64
LEGACY = "-sbx-below-0.42.1"  # the legacy-shape kit's tag suffix
GHCR_IMAGE, GHCR_KIT = "ghcr.io/band-ai/band-python-kit/image", "ghcr.io/band-ai/band-python-kit"
HUB_IMAGE, HUB_KIT = "docker.io/bandhq/band-python-kit-image", "docker.io/bandhq/band-python-kit"
V = "6.0.1"
K = StepKind


def registry(
    image_repo: str,
    kit_repo: str,
    *,
    image: Probe = ABSENT,
    kit: Probe = ABSENT,
    legacy: Probe | None = None,
    tags: Iterable[str] = (),
    version: str = V,
) -> RegistryObserved:
    """A registry whose listing agrees with its probes, plus extra (older) `tags`; the
    legacy-shape kit (`V-sbx-below-0.42.1`) is probed like the kit unless `legacy` says."""
    legacy = kit if legacy is None else legacy
    image_tags = dict.fromkeys(tags, D2)
    kit_tags = set(tags)
    if isinstance(image, Present):
        image_tags[version] = image.digest
    if isinstance(kit, Present):
        kit_tags.add(version)
    if isinstance(legacy, Present):
        kit_tags.add(version + LEGACY)
    probes = {
        f"{image_repo}:{version}": image,
        f"{kit_repo}:{version}": kit,
        f"{kit_repo}:{version}{LEGACY}": legacy,
    }
    return RegistryObserved(image_repo, kit_repo, image_tags, frozenset(kit_tags), probes)


def published(image_repo: str, kit_repo: str) -> RegistryObserved:  # image D1, kits D2, D3
    return registry(image_repo, kit_repo, image=Present(D1), kit=Present(D2), legacy=Present(D3))


def observed(
    ghcr: RegistryObserved | None = None, hub: RegistryObserved | None = None, *, clean: bool = True
) -> Observed:
    regs = {
        "ghcr": ghcr or registry(GHCR_IMAGE, GHCR_KIT),
        "hub": hub or registry(HUB_IMAGE, HUB_KIT),
    }
    return Observed(regs, git_tag_present=True, tree_clean=clean)


def fresh(version: str, ghcr_tags: Iterable[str] = (), hub_tags: Iterable[str] = ()) -> Observed:
    ghcr = registry(GHCR_IMAGE, GHCR_KIT, tags=ghcr_tags, version=version)
    return observed(ghcr, registry(HUB_IMAGE, HUB_KIT, tags=hub_tags, version=version))


def refs(result: Plan, kind: StepKind) -> list[str]:
    return [s.ref for s in result.steps if s.kind is kind]


def test_fresh_publish_builds_once_and_pushes_to_both_in_both_shapes() -> None:
    result = plan(V, observed())
    writes = [K.BUILD, K.PUSH_IMAGE, K.PUSH_IMAGE, *[K.STAMP_KIT] * 4, *[K.PUSH_KIT] * 4]
    assert result.kinds()[:11] == writes
    assert result.kinds().count(K.BUILD) == 1
    assert K.COPY_IMAGE not in result.kinds()
    assert refs(result, K.PUSH_IMAGE) == [f"{GHCR_IMAGE}:{V}", f"{HUB_IMAGE}:{V}"]
    kits = [
        f"{GHCR_KIT}:{V}",
        f"{GHCR_KIT}:{V}{LEGACY}",
        f"{HUB_KIT}:{V}",
        f"{HUB_KIT}:{V}{LEGACY}",
    ]
    assert refs(result, K.PUSH_KIT) == refs(result, K.STAMP_KIT) == kits
    stamps = [(s.source, s.shape) for s in result.steps if s.kind is K.STAMP_KIT]
    assert stamps == [
        (f"{repo}@<pushed digest>", shape)
        for repo in (GHCR_IMAGE, HUB_IMAGE)
        for shape in ("current", "legacy")
    ]
    assert [s.shape for s in result.steps if s.kind is K.PUSH_KIT] == ["current", "legacy"] * 2
    assert sorted(refs(result, K.VERIFY)) == sorted(
        [f"{GHCR_IMAGE}:{V}", f"{HUB_IMAGE}:{V}", *kits]
    )


def test_floating_tags_move_last_kits_before_images() -> None:
    result = plan(V, observed(registry(GHCR_IMAGE, GHCR_KIT, tags=["6.0.0", "latest", "6"])))
    kinds = result.kinds()
    last_verify = max(i for i, k in enumerate(kinds) if k is K.VERIFY)
    first_move = kinds.index(K.MOVE_FLOATING)
    assert first_move == last_verify + 1
    assert set(kinds[first_move:]) == {K.MOVE_FLOATING}
    assert refs(result, K.MOVE_FLOATING) == [
        f"{repo}:{name}"
        for repo in (GHCR_KIT, HUB_KIT, GHCR_IMAGE, HUB_IMAGE)
        for name in ("6", "latest")
    ]
    moves = [s for s in result.steps if s.kind is K.MOVE_FLOATING]
    assert all(s.source == s.ref.rsplit(":", 1)[0] + f":{V}" for s in moves)


def test_heal_copies_the_existing_digest_and_never_rebuilds() -> None:
    ghcr = published(GHCR_IMAGE, GHCR_KIT)
    result = plan(V, observed(ghcr))
    assert not {K.BUILD, K.PUSH_IMAGE} & set(result.kinds())
    (copy,) = [s for s in result.steps if s.kind is K.COPY_IMAGE]
    assert (copy.ref, copy.source, copy.digest) == (f"{HUB_IMAGE}:{V}", f"{GHCR_IMAGE}@{D1}", D1)
    hub_kits = [f"{HUB_KIT}:{V}", f"{HUB_KIT}:{V}{LEGACY}"]
    assert refs(result, K.STAMP_KIT) == refs(result, K.PUSH_KIT) == hub_kits
    assert {s.source for s in result.steps if s.kind is K.STAMP_KIT} == {f"{HUB_IMAGE}@{D1}"}
    image_verifies = [s for s in result.steps if s.kind is K.VERIFY and "image" in s.ref]
    assert {s.digest for s in image_verifies} == {D1}
    assert any("present" in note and GHCR_IMAGE in note for note in result.skipped)
    assert K.MOVE_FLOATING in result.kinds()


def test_heal_works_whichever_registry_lags() -> None:
    hub = published(HUB_IMAGE, HUB_KIT)
    copies = [s for s in plan(V, observed(hub=hub)).steps if s.kind is K.COPY_IMAGE]
    assert [(s.ref, s.source) for s in copies] == [(f"{GHCR_IMAGE}:{V}", f"{HUB_IMAGE}@{D1}")]


def test_heal_of_a_missing_kit_only_touches_that_kit() -> None:
    ghcr = published(GHCR_IMAGE, GHCR_KIT)
    hub = registry(HUB_IMAGE, HUB_KIT, image=Present(D1))
    result = plan(V, observed(ghcr, hub))
    assert result.kinds()[:4] == [K.STAMP_KIT, K.STAMP_KIT, K.PUSH_KIT, K.PUSH_KIT]
    assert not {K.BUILD, K.PUSH_IMAGE, K.COPY_IMAGE} & set(result.kinds())
    assert refs(result, K.PUSH_KIT) == [f"{HUB_KIT}:{V}", f"{HUB_KIT}:{V}{LEGACY}"]


def test_a_missing_legacy_kit_alone_is_published_and_never_floats() -> None:
    ghcr = published(GHCR_IMAGE, GHCR_KIT)
    hub = registry(HUB_IMAGE, HUB_KIT, image=Present(D1), kit=Present(D2), legacy=ABSENT)
    result = plan(V, observed(ghcr, hub))
    assert refs(result, K.PUSH_KIT) == [f"{HUB_KIT}:{V}{LEGACY}"]
    (stamp,) = [s for s in result.steps if s.kind is K.STAMP_KIT]
    assert (stamp.shape, stamp.source) == ("legacy", f"{HUB_IMAGE}@{D1}")
    assert not any(LEGACY in ref for ref in refs(result, K.MOVE_FLOATING))
    assert f"{HUB_KIT}:{V}: present, kept" in result.skipped


@pytest.mark.parametrize(
    ("where", "artifact"), [("ghcr", "image"), ("ghcr", "kit"), ("hub", "image"), ("hub", "kit")]
)
def test_an_unknown_probe_refuses_with_exit_2_and_never_moves_floating(
    where: str, artifact: str
) -> None:
    probes: dict[tuple[str, str], Probe] = {
        (r, a): ABSENT for r in ("ghcr", "hub") for a in ("image", "kit")
    }
    probes[(where, artifact)] = Unknown("401 Unauthorized")
    snapshot = observed(
        registry(GHCR_IMAGE, GHCR_KIT, image=probes["ghcr", "image"], kit=probes["ghcr", "kit"]),
        registry(HUB_IMAGE, HUB_KIT, image=probes["hub", "image"], kit=probes["hub", "kit"]),
    )
    with pytest.raises(ReleaseRefused) as err:
        plan(V, snapshot)
    assert err.value.exit_code == 2
    assert "401 Unauthorized" in str(err.value)
    assert "fail closed: only a clear not-found counts as absent" in str(err.value)
    partial = err.value.partial
    assert partial is not None
    assert not {K.VERIFY, K.MOVE_FLOATING} & set(partial.kinds())
    if artifact == "image":  # build or copy cannot be decided: nothing is planned
        assert partial.steps == ()
    else:  # the other writes are shown for a dry run, but the refused kit is not written
        assert K.BUILD in partial.kinds()
        repo = GHCR_KIT if where == "ghcr" else HUB_KIT
        assert f"{repo}:{V}" not in refs(partial, K.PUSH_KIT)
    assert any(note.startswith("refused: ") for note in partial.skipped)


REFUSALS = [
    (
        published(GHCR_IMAGE, GHCR_KIT),
        published(HUB_IMAGE, HUB_KIT),
        f"{V} is already published in every registry (image {D1}); immutable references",
    ),
    (
        registry(GHCR_IMAGE, GHCR_KIT),
        replace(registry(HUB_IMAGE, HUB_KIT), probes={f"{HUB_IMAGE}:{V}": ABSENT}),
        f"{HUB_KIT}:{V} was not probed; fail closed",
    ),
    (
        registry(GHCR_IMAGE, GHCR_KIT),
        replace(registry(HUB_IMAGE, HUB_KIT), image_tags={V: D1}),
        f"{HUB_IMAGE}:{V} is listed in the registry's tags but probed absent; fail closed",
    ),
    (
        registry(GHCR_IMAGE, GHCR_KIT),
        replace(registry(HUB_IMAGE, HUB_KIT, image=Present(D1)), image_tags={V: D2}),
        f"{HUB_IMAGE}:{V} is listed as {D2} but probed as {D1}",
    ),
    (
        registry(GHCR_IMAGE, GHCR_KIT, image=Present(D1)),
        registry(HUB_IMAGE, HUB_KIT, image=Present(D2)),
        f"registries disagree on image {V} (ghcr: {D1}, hub: {D2}); fail closed",
    ),
    (
        published(GHCR_IMAGE, GHCR_KIT),
        registry(HUB_IMAGE, HUB_KIT, kit=Present(D2)),
        f"kit {HUB_KIT}:{V} exists but image {HUB_IMAGE}:{V} does not; fail closed",
    ),
]


@pytest.mark.parametrize(("ghcr", "hub", "message"), REFUSALS)
def test_immutability_problems_are_refused_with_exit_2(
    ghcr: RegistryObserved, hub: RegistryObserved, message: str
) -> None:
    with pytest.raises(ReleaseRefused, match=re.escape(message)) as err:
        plan(V, observed(ghcr, hub))
    assert err.value.exit_code == 2
    assert err.value.partial is not None
    assert not {K.VERIFY, K.MOVE_FLOATING} & set(err.value.partial.kinds())


def test_a_dirty_tree_is_refused_with_exit_1() -> None:
    with pytest.raises(ReleaseRefused, match="uncommitted changes") as err:
        plan(V, observed(clean=False))
    assert err.value.exit_code == 1
    assert isinstance(err.value, BandkitError)
    assert err.value.partial is not None
    assert K.MOVE_FLOATING not in err.value.partial.kinds()


@pytest.mark.parametrize("digest", ["sha256:abc", D1 + "\n", "sha256:" + "A" * 64])
def test_a_probe_answer_carries_a_real_digest(digest: str) -> None:
    with pytest.raises(ValueError, match="sha256"):
        Present(digest)


def test_immutability_wins_over_preconditions_and_every_reason_is_listed() -> None:
    hub = registry(HUB_IMAGE, HUB_KIT, image=Unknown("timeout"))
    with pytest.raises(ReleaseRefused) as err:
        plan(V, observed(hub=hub, clean=False))
    assert err.value.exit_code == 2
    assert len(err.value.reasons) == 2
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("version", ["6.0", "v6.0.1", "6.0.1-r0", "latest", ""])
def test_a_bad_version_is_refused_with_exit_1(version: str) -> None:
    with pytest.raises(ReleaseRefused, match=re.escape("X.Y.Z, X.Y.Z-rN or X.Y.Z-rcN")) as err:
        plan(version, observed())
    assert err.value.exit_code == 1
    assert err.value.partial is None


@pytest.mark.parametrize("version", ["6.0.1", "6.0.1-r2"])
def test_a_release_or_rebuild_needs_the_git_tag_of_its_base(version: str) -> None:
    snapshot = fresh(version)
    with pytest.raises(ReleaseRefused) as err:
        plan(version, Observed(snapshot.registries, git_tag_present=False, tree_clean=True))
    assert err.value.reasons == ("git tag band-sdk-v6.0.1 is missing: tag the release first",)
    assert err.value.exit_code == 1


def test_a_rehearsal_needs_no_git_tag_and_moves_no_floating_tag() -> None:
    snapshot = fresh("0.0.0-rc1")
    result = plan("0.0.0-rc1", Observed(snapshot.registries, False, True))
    assert K.BUILD in result.kinds()
    assert K.MOVE_FLOATING not in result.kinds()
    assert any("pre-release" in note for note in result.skipped)


def test_stale_move_guard_leaves_floating_tags_alone() -> None:
    result = plan("6.0.1-r1", fresh("6.0.1-r1", ["6.0.1", "6.0.2"], ["6.0.1"]))
    assert K.VERIFY in result.kinds()
    assert K.MOVE_FLOATING not in result.kinds()
    guard = [note for note in result.skipped if "stale-move guard" in note]
    assert len(guard) == 2
    assert all("6.0.2" in note for note in guard)


def test_an_older_major_moves_only_its_major_tag() -> None:
    result = plan("5.9.0-r1", fresh("5.9.0-r1", ["5.9.0", "6.0.0"], ["5.9.0", "6.0.0"]))
    moved = refs(result, K.MOVE_FLOATING)
    assert moved == [f"{GHCR_KIT}:5", f"{HUB_KIT}:5", f"{GHCR_IMAGE}:5", f"{HUB_IMAGE}:5"]
    assert any(note.startswith("latest: not moved") for note in result.skipped)


def test_move_floating_can_be_switched_off() -> None:
    result = plan(V, observed(), move_floating=False)
    assert K.MOVE_FLOATING not in result.kinds()
    assert result.kinds()[-1] is K.VERIFY
    assert "not requested" in " ".join(result.skipped)


def test_render_is_an_aligned_table_with_skip_notes() -> None:
    ghcr = published(GHCR_IMAGE, GHCR_KIT)
    result = plan(V, observed(ghcr))
    lines = render(result).splitlines()
    assert lines[0] == f"release plan for {V}: {len(result.steps)} step(s)"
    header = lines[1]
    assert header.split() == ["reference", "action", "reason"]
    column = header.index("action")
    rows = lines[2 : 2 + len(result.steps)]
    for row, step in zip(rows, result.steps, strict=True):
        assert row.startswith(step.ref)
        assert row[column:].startswith(step.kind.value)
        assert row.endswith(step.reason)
    assert lines[2 + len(result.steps)] == "skipped:"
    assert f"  - {GHCR_IMAGE}:{V}: present ({D1}), kept" in lines
