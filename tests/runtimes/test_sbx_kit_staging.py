"""The kit directory `sbx create` gets (`bandkit.runtimes.sbx.kits`): the repo kit's own
`spec.yaml` (current) for sbx 0.42.1+, its `sbx-below-0.42.1/spec.yaml` below that, a
legacy-only kit translated key by key for 0.42.1+ (or refused with what to do), a
current-only kit refused below 0.42.1, and the platform env added."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from bandkit.kit import spec as kitspec
from bandkit.kit import spec_source
from bandkit.runtimes.base import SandboxError
from bandkit.runtimes.sbx import kits

ENV = {"BAND_REST_URL": "http://127.0.0.1:9"}


def repo_kit(tmp_path: Path) -> Path:
    """A copy of the repo kit's layout: spec.yaml (current) and the legacy directory."""
    kit = tmp_path / "kit"
    (kit / kits.LEGACY_DIR).mkdir(parents=True)
    shutil.copy(spec_source.CURRENT_PATH, kit / "spec.yaml")
    shutil.copy(spec_source.LEGACY_PATH, kit / kits.LEGACY_DIR / "spec.yaml")
    return kit


def one_spec_kit(tmp_path: Path, source: Path) -> Path:
    kit = tmp_path / "kit"
    kit.mkdir()
    shutil.copy(source, kit / "spec.yaml")
    return kit


def stage(kit: Path, tmp_path: Path, *, current: bool, env: dict[str, str]) -> Path:
    warnings: list[str] = []
    out = kits.staged_kit(
        str(kit),
        name="box",
        env=env,
        current=current,
        kits_dir=tmp_path / "kits",
        warn=warnings.append,
    )
    assert warnings == []
    return Path(out)


def spec(kit: Path) -> dict[str, Any]:
    data = yaml.safe_load((kit / "spec.yaml").read_text())
    assert isinstance(data, dict)
    return data


def test_current_sbx_gets_the_kit_as_it_is(tmp_path: Path) -> None:
    kit = repo_kit(tmp_path)
    assert stage(kit, tmp_path, current=True, env={}) == kit.resolve()  # nothing to stage
    staged = stage(kit, tmp_path, current=True, env=ENV)
    data = spec(staged)
    assert {k: v for k, v in data.items() if k != "environment"} == yaml.safe_load(
        spec_source.CURRENT_PATH.read_text()
    )
    assert data["environment"]["variables"] == ENV
    assert not (staged / kits.LEGACY_DIR).exists()  # sbx gets one spec


def test_legacy_sbx_gets_the_kits_own_legacy_directory(tmp_path: Path) -> None:
    kit = repo_kit(tmp_path)
    for env in ({}, ENV):
        staged = stage(kit, tmp_path, current=False, env=env)
        assert staged != kit.resolve()
        data = spec(staged)
        variables = data.pop("environment", {}).get("variables", {})
        assert variables == env
        assert data == yaml.safe_load(spec_source.LEGACY_PATH.read_text())
        assert not (staged / kits.LEGACY_DIR).exists()


def test_a_current_only_kit_is_refused_below_0421_with_what_to_do(tmp_path: Path) -> None:
    kit = one_spec_kit(tmp_path, spec_source.CURRENT_PATH)
    with pytest.raises(SandboxError, match=r"no legacy sbx-below-0\.42\.1/spec\.yaml"):
        stage(kit, tmp_path, current=False, env={})


def test_a_legacy_directory_that_is_a_link_is_not_followed(tmp_path: Path) -> None:
    kit = one_spec_kit(tmp_path, spec_source.CURRENT_PATH)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.copy(spec_source.LEGACY_PATH, elsewhere / "spec.yaml")
    (kit / kits.LEGACY_DIR).symlink_to(elsewhere)
    with pytest.raises(SandboxError, match="reads only the legacy spec shape"):
        stage(kit, tmp_path, current=False, env={})


def test_a_legacy_only_kit_is_translated_with_the_same_facts(tmp_path: Path) -> None:
    kit = one_spec_kit(tmp_path, spec_source.LEGACY_PATH)
    data = spec(stage(kit, tmp_path, current=True, env={}))
    data.pop("environment", None)
    assert data == yaml.safe_load(spec_source.CURRENT_PATH.read_text())
    assert kitspec.validate_text(yaml.safe_dump(data)).ok


def test_an_untranslatable_kit_is_refused_with_what_to_do(tmp_path: Path) -> None:
    kit = one_spec_kit(tmp_path, spec_source.LEGACY_PATH)
    data = spec(kit)
    data["commands"]["install"] = [{"command": "apt-get install -y jq"}]
    (kit / "spec.yaml").write_text(yaml.safe_dump(data))
    with pytest.raises(SandboxError, match=r"write spec\.yaml in the current shape"):
        stage(kit, tmp_path, current=True, env={})


def test_a_legacy_spec_yaml_is_used_as_it_is_below_0421(tmp_path: Path) -> None:
    kit = one_spec_kit(tmp_path, spec_source.LEGACY_PATH)
    assert stage(kit, tmp_path, current=False, env={}) == kit.resolve()


def test_kit_image_reads_the_staged_spec(tmp_path: Path) -> None:
    kit = repo_kit(tmp_path)
    assert kits.kit_image(str(kit)) == spec_source.FACTS.image
    assert kits.kit_image("docker.io/bandhq/band-python-kit:1.0.0") is None
