"""A kit image built on this host reaches sbx (`bandkit.runtimes.sbx.templates`): loaded by
`docker save | sbx template load` once per digest, recorded before it is loaded, not
loaded again while sbx holds that digest, removed by teardown (after the sandboxes that
use it). The simulator refuses to create from an image it does not hold, as real sbx
fails to pull a local build; the docker side is a stand-in CLI serving genuine archives."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from bandkit.manifest import Kind, Manifest, teardown
from bandkit.runtimes.base import SandboxError, SandboxSpec
from bandkit.runtimes.sbx import SbxRuntime
from tests.fakes.docker_archive import DIR_ENV, FakeDocker
from tests.fakes.simharness import Sim, simulator
from tests.runtimes.helpers import make_kit

IMAGE = "band-python-kit:local"


@pytest.fixture
def sim(monkeypatch: pytest.MonkeyPatch) -> Iterator[Sim]:
    with simulator("0.47.0", require_templates=True) as s:
        s("policy", "init", "balanced", check=True)
        for key, value in s.env.items():
            monkeypatch.setenv(key, value)
        yield s


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeDocker:
    docker = FakeDocker(tmp_path / "docker")
    monkeypatch.setenv(DIR_ENV, str(docker.root))
    return docker


def runtime(manifest: Manifest | None, lines: list[str], fake: FakeDocker, tmp: Path) -> SbxRuntime:
    return SbxRuntime(
        manifest=manifest,
        kits_dir=tmp / "kits",
        supervise=False,
        docker=fake.binary,
        progress=lines.append,
    )


def spec(name: str, sim: Sim, kit: Path) -> SandboxSpec:
    return SandboxSpec(name, (sim.workspace(name),), kit=str(kit))


def templates(sim: Sim) -> list[dict[str, object]]:
    images: list[dict[str, object]] = json.loads(sim("template", "ls", "--json").stdout)["images"]
    return images


def test_loaded_once_a_second_provision_skips_it_and_teardown_removes_it(
    sim: Sim, fake: FakeDocker, tmp_path: Path
) -> None:
    kit = make_kit(tmp_path)
    image_id = fake.add(IMAGE)
    lines: list[str] = []
    with Manifest.open(tmp_path / "one.json") as first:
        one = runtime(first, lines, fake, tmp_path)
        one.create(spec("one", sim, kit))
        assert fake.saves() == 1
        kinds = [r.kind for r in first.resources]
        assert kinds.index(Kind.TEMPLATE) < kinds.index(Kind.SANDBOX)  # removed after it
        recorded = first.find(Kind.TEMPLATE, f"sbx/template/{image_id}")
        assert recorded is not None
        assert recorded.details["image"] == IMAGE
        assert image_id.removeprefix("sha256:").startswith(recorded.details["listed"])
        assert any(f"loading {IMAGE} ({image_id[:19]}" in line for line in lines)
        (held,) = templates(sim)
        assert (held["repository"], held["tag"]) == ("docker.io/library/band-python-kit", "local")

        with Manifest.open(tmp_path / "two.json") as second:  # another provision, same image
            two = runtime(second, lines, fake, tmp_path)
            two.create(spec("two", sim, kit))
            assert fake.saves() == 1  # not loaded again
            assert not [r for r in second.resources if r.kind is Kind.TEMPLATE]
            assert any("already in sbx's image store; not loading it" in line for line in lines)

            early = teardown(first, one.removers())  # "two" still uses the template
            assert [r.kind for r, _ in early.failed] == [Kind.TEMPLATE]
            assert "in use by sandbox two" in early.failed[0][1]
            assert len(templates(sim)) == 1
            assert teardown(second, two.removers()).clean
        assert teardown(first, one.removers()).clean  # the re-run finishes the job
    assert templates(sim) == []
    assert not (tmp_path / "one.json").exists()


def test_a_rebuilt_image_is_loaded_again_and_the_old_one_is_not_touched(
    sim: Sim, fake: FakeDocker, tmp_path: Path
) -> None:
    kit = make_kit(tmp_path)
    fake.add(IMAGE)
    lines: list[str] = []
    rt = runtime(None, lines, fake, tmp_path)
    rt.create(spec("old", sim, kit))
    rebuilt = fake.add(IMAGE, payload=b"rebuilt")
    rt.create(spec("new", sim, kit))
    assert fake.saves() == 2
    (held,) = templates(sim)
    assert rebuilt.removeprefix("sha256:").startswith(str(held["id"]))


def test_an_image_neither_here_nor_in_sbx_fails_the_create_with_the_fix(
    sim: Sim, fake: FakeDocker, tmp_path: Path
) -> None:
    with Manifest.open(tmp_path / "m.json") as manifest:
        rt = runtime(manifest, [], fake, tmp_path)
        with pytest.raises(SandboxError) as err:
            rt.create(spec("nope", sim, make_kit(tmp_path)))
        assert 'pull failed for image "band-python-kit:local"' in str(err.value)
        assert "`uv run invoke image.build` first" in str(err.value)
        assert not [r for r in manifest.resources if r.kind is Kind.TEMPLATE]
        assert teardown(manifest, rt.removers()).clean
    assert fake.saves() == 0


def test_a_pinned_image_is_left_to_sbx_and_docker_is_never_asked(
    fake: FakeDocker, tmp_path: Path
) -> None:
    rt = runtime(None, [], fake, tmp_path)
    assert rt.ensure_template("ghcr.io/band-ai/kit/image:1.0.0@sha256:" + "a" * 64) == "pinned"
    assert fake.calls() == []


@pytest.mark.parametrize("image", ["--output=/tmp/x", "a b", "../up:tag", ""])
def test_an_image_reference_that_is_not_one_is_refused_before_docker_runs(
    fake: FakeDocker, tmp_path: Path, image: str
) -> None:
    with pytest.raises(SandboxError, match="is not an image reference"):
        runtime(None, [], fake, tmp_path).ensure_template(image)
    assert fake.calls() == []


def test_an_archive_of_another_image_than_inspected_fails_closed(
    sim: Sim, fake: FakeDocker, tmp_path: Path
) -> None:
    fake.add(IMAGE)
    index = json.loads((fake.root / "images.json").read_text())
    index[IMAGE]["id"] = "sha256:" + "e" * 64  # the tag moved between inspect and save
    (fake.root / "images.json").write_text(json.dumps(index))
    with pytest.raises(SandboxError, match="wrote an image other than"):
        runtime(None, [], fake, tmp_path).ensure_template(IMAGE)


def test_a_save_that_is_no_image_archive_fails_and_loads_nothing(
    sim: Sim, fake: FakeDocker, tmp_path: Path
) -> None:
    fake.add(IMAGE)
    archive = json.loads((fake.root / "images.json").read_text())[IMAGE]["file"]
    (fake.root / archive).write_bytes(b"truncated")  # `docker save` exits 0 with junk
    with pytest.raises(SandboxError, match="sbx template load"):
        runtime(None, [], fake, tmp_path).ensure_template(IMAGE)
    assert templates(sim) == []
