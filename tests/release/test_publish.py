"""`publish` / `rebuild` end to end on in-memory registries: order, healing, fail closed."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from bandkit.image.facts import DOCKERFILE, SPEC, SPEC_LEGACY
from bandkit.kit import bump_bases
from bandkit.kit.spec import stamp
from bandkit.release import publish as release
from bandkit.release.execute import ReleaseStopped
from bandkit.release.gather import GitState
from bandkit.release.oci import sha256
from bandkit.release.plan import ReleaseRefused
from tests.release.fakes import FakeBuild, FakeRegistries, index, settings

NOW = datetime(2030, 1, 1, tzinfo=UTC)  # the SDK lock is old enough by then, for good
TAGGED = GitState(tag_present=True, clean=True, commit="c0ffee", remote="https://example.test/kit")
S = settings()
HUB, GHCR = S.target("hub"), S.target("ghcr")


def run(
    registries: FakeRegistries,
    version: str,
    *,
    git: GitState = TAGGED,
    hook: Callable[[str], None] | None = None,
    **options: object,
) -> tuple[release.Outcome | None, list[str], FakeBuild]:
    lines: list[str] = []
    fake = FakeBuild(registries)

    def progress(line: str) -> None:
        lines.append(line)
        if hook:
            hook(line)

    outcome = release.publish(
        S, version, git=git, registries=registries, now=NOW, progress=progress,
        builder=fake.build, pusher=fake.push, **options,  # type: ignore[arg-type]
    )  # fmt: skip
    return outcome, lines, fake


def resolved(reg: FakeRegistries, repo: str, tag: str) -> str | None:
    raw = reg.store[repo].get(tag)
    return None if raw is None else sha256(raw)


def test_a_release_builds_once_pins_each_kit_and_moves_floating_tags_kits_first(
    record_in_tmp: Path,
) -> None:
    reg = FakeRegistries()
    reg.put(HUB.image, "1.1.0", index("old"))
    reg.put(GHCR.image, "1.1.0", index("old"))
    _, lines, fake = run(reg, "1.2.0")
    assert fake.builds == 1
    digest = resolved(reg, HUB.image_repo, "1.2.0")
    assert digest is not None
    assert resolved(reg, GHCR.image_repo, "1.2.0") == digest
    for target in (HUB, GHCR):
        kit = reg.store[target.kit_repo]["1.2.0"]
        config = reg.blobs[yaml.safe_load(kit)["config"]["digest"]].decode()
        assert config == stamp(SPEC.read_text(), target.image.ref("1.2.0"), digest)
        legacy = reg.store[target.kit_repo]["1.2.0-sbx-below-0.42.1"]  # for sbx below 0.42.1
        config = reg.blobs[yaml.safe_load(legacy)["config"]["digest"]].decode()
        assert config == stamp(SPEC_LEGACY.read_text(), target.image.ref("1.2.0"), digest)
        for floating in ("1", "latest"):
            assert reg.store[target.image_repo][floating] == reg.store[target.image_repo]["1.2.0"]
            assert reg.store[target.kit_repo][floating] == kit  # the current shape
    refs = [w.split("=", 1)[0].rsplit(":", 1) for w in reg.writes]
    moved = [repo for repo, tag in refs if tag in ("1", "latest")]
    kit_repos = {HUB.kit_repo, GHCR.kit_repo}
    assert len(moved) == 8
    assert set(moved[:4]) == kit_repos  # every kit moved before any image
    assert set(moved[4:]) == {HUB.image_repo, GHCR.image_repo}
    assert any(line.startswith("release summary:") for line in lines)
    recorded = json.loads(record_in_tmp.read_text())  # what release.yml attests
    assert recorded["digest"] == digest
    assert recorded["subject"] == GHCR.image_repo
    assert set(recorded["kits"]) == set(recorded["legacy_kits"]) == kit_repos
    assert recorded["kits"][HUB.kit_repo] == sha256(reg.store[HUB.kit_repo]["1.2.0"])
    legacy_digest = sha256(reg.store[HUB.kit_repo]["1.2.0-sbx-below-0.42.1"])
    assert recorded["legacy_kits"][HUB.kit_repo] == legacy_digest


def test_a_kit_served_in_the_wrong_shape_stops_at_verify(record_in_tmp: Path) -> None:
    reg = FakeRegistries()
    swapped: list[str] = []

    def swap(line: str) -> None:  # someone re-tags the legacy kit over the current one
        if "] verify " in line and not swapped:
            swapped.append(line)
            reg.put(HUB.kit, "1.2.0", reg.store[HUB.kit_repo]["1.2.0-sbx-below-0.42.1"])

    with pytest.raises(ReleaseStopped) as stopped:
        run(reg, "1.2.0", hook=swap)
    assert stopped.value.exit_code == 2
    assert "is in the legacy spec shape, not current" in str(stopped.value)
    assert "latest" not in reg.store[HUB.kit_repo]
    assert not record_in_tmp.exists()


def test_a_dry_run_changes_nothing_and_prints_the_plan(record_in_tmp: Path) -> None:
    reg = FakeRegistries()
    outcome, lines, fake = run(reg, "1.2.0", dry_run=True)
    assert outcome is not None
    assert outcome.dry_run
    assert reg.writes == []
    assert fake.builds == 0
    assert any(line.startswith("release plan for 1.2.0") for line in lines)
    assert "dry run: nothing was changed" in lines
    assert not record_in_tmp.exists()


def test_one_registry_having_the_version_heals_the_other_by_copy() -> None:
    reg = FakeRegistries()
    digest = reg.put(HUB.image, "1.2.0", index("published"))
    _, lines, fake = run(reg, "1.2.0", move_floating=False)
    assert fake.builds == 0
    assert resolved(reg, GHCR.image_repo, "1.2.0") == digest
    assert not any("] build " in line for line in lines)


def test_a_probe_error_at_the_commit_point_stops_before_any_floating_tag(
    record_in_tmp: Path,
) -> None:
    reg = FakeRegistries()

    def ghcr_goes_down(line: str) -> None:
        if "] verify " in line:
            reg.down.add(GHCR.image.host)

    with pytest.raises(ReleaseStopped) as stopped:
        run(reg, "1.2.0", hook=ghcr_goes_down)
    assert stopped.value.exit_code == 2
    assert "no floating tag moved" in str(stopped.value)
    assert not record_in_tmp.exists()  # a half release is never attested
    for repo in (HUB.image_repo, HUB.kit_repo):
        assert "latest" not in reg.store[repo]
        assert "1" not in reg.store[repo]


def test_a_reference_that_appears_after_planning_is_never_overwritten() -> None:
    reg = FakeRegistries()
    other = index("someone else's")

    def race(line: str) -> None:
        if line.startswith("[3/") and "push-image" in line:
            reg.put(GHCR.image, "1.2.0", other)

    with pytest.raises(ReleaseStopped) as stopped:
        run(reg, "1.2.0", hook=race)
    assert stopped.value.exit_code == 2
    assert reg.store[GHCR.image_repo]["1.2.0"] == other
    assert "never overwritten" in str(stopped.value)


def test_an_already_published_version_is_refused_with_exit_2_and_nothing_written() -> None:
    reg = FakeRegistries()
    run(reg, "1.2.0")
    before = list(reg.writes)
    with pytest.raises(ReleaseRefused) as refused:
        run(reg, "1.2.0")
    assert refused.value.exit_code == 2
    assert reg.writes == before


def test_the_stale_move_guard_keeps_latest_on_the_newer_release() -> None:
    reg = FakeRegistries()
    for target in (HUB, GHCR):
        reg.put(target.image, "2.0.0", index("two"))
        reg.put(target.image, "latest", index("two"))
    _, lines, _ = run(reg, "1.3.0")
    assert reg.store[HUB.image_repo]["latest"] == index("two")
    assert reg.store[HUB.image_repo]["1"] == reg.store[HUB.image_repo]["1.3.0"]
    assert any("latest: not moved, newer 2.0.0 is present" in line for line in lines)


def test_preconditions_refuse_before_any_registry_is_touched() -> None:
    reg = FakeRegistries()
    dirty = GitState(tag_present=True, clean=False, commit="c0ffee", remote="")
    with pytest.raises(ReleaseRefused, match="uncommitted changes") as refused:
        run(reg, "1.2.0", git=dirty)
    assert refused.value.exit_code == 1
    with pytest.raises(ReleaseRefused, match="pre-release rehearsals"):
        run(reg, "1.2.0", git=dirty, allow_dirty=True)
    untagged = GitState(tag_present=False, clean=True, commit="c0ffee", remote="")
    with pytest.raises(ReleaseRefused, match=r"band-sdk-v1\.2\.0 is missing"):
        run(reg, "1.2.0", git=untagged)
    with pytest.raises(ReleaseRefused, match="version must be"):
        run(reg, "1.2")
    assert reg.writes == []


def test_a_rehearsal_may_build_a_dirty_tree_and_never_moves_floating_tags() -> None:
    reg = FakeRegistries()
    dirty = GitState(tag_present=False, clean=False, commit="c0ffee", remote="")
    _, lines, fake = run(reg, "0.0.0-rc1", git=dirty, allow_dirty=True)
    assert fake.builds == 1
    assert "latest" not in reg.store[HUB.image_repo]
    assert any("uncommitted changes" in line for line in lines)
    kit = yaml.safe_load(reg.store[HUB.kit_repo]["0.0.0-rc1"])
    assert kit["annotations"]["org.opencontainers.image.revision"] == "c0ffee-dirty"


def pinned(ref: str, tag: str) -> str:
    """What the Dockerfile pins for `ref:tag` (a registry whose bases never moved)."""
    text = DOCKERFILE.read_text()
    found = [m for m in bump_bases.pins(text, DOCKERFILE).values() if m["ref"] == ref]
    return found[0]["digest"]


def moved(ref: str, tag: str) -> str:
    return "sha256:" + "9" * 64


def test_rebuild_targets_the_lagging_registry_revision_and_heals_it() -> None:
    reg = FakeRegistries()
    for target in (HUB, GHCR):
        reg.put(target.image, "1.2.0", index("release"))
    r1 = reg.put(HUB.image, "1.2.0-r1", index("rebuild 1"))  # GHCR never got -r1
    lines: list[str] = []
    fake = FakeBuild(reg)
    release.rebuild(
        S, registries=reg, progress=lines.append, git=TAGGED, now=NOW,
        builder=fake.build, pusher=fake.push,
    )  # fmt: skip
    assert lines[0].startswith("rebuild: 1.2.0 -> 1.2.0-r1")
    assert fake.builds == 0
    assert resolved(reg, GHCR.image_repo, "1.2.0-r1") == r1
    release.rebuild(
        S, registries=reg, progress=lines.append, git=TAGGED, now=NOW,
        builder=fake.build, pusher=fake.push, resolve=moved,
    )  # fmt: skip
    assert fake.builds == 1
    assert "1.2.0-r2" in reg.store[GHCR.image_repo]
    assert any(line.startswith("rebuild: base PYTHON_BASE_IMAGE moved") for line in lines)


def test_rebuild_with_no_base_moved_publishes_nothing(record_in_tmp: Path) -> None:
    reg = FakeRegistries()
    for target in (HUB, GHCR):
        reg.put(target.image, "1.2.0", index("release"))
    before = list(reg.writes)
    lines: list[str] = []
    fake = FakeBuild(reg)
    outcome = release.rebuild(
        S, registries=reg, progress=lines.append, git=TAGGED, now=NOW,
        builder=fake.build, pusher=fake.push, resolve=pinned,
    )  # fmt: skip
    assert outcome is None
    assert fake.builds == 0
    assert reg.writes == before
    assert not record_in_tmp.exists()  # the workflow attests nothing
    assert lines[-1] == "rebuild: no base moved since the Dockerfile's pins: nothing to rebuild"
