"""The kit directory `sbx create` gets (`bandkit.runtimes.sbxkit`): the repo kit's
`spec-current.yaml` for sbx 0.42.1+, a legacy-only kit translated key by key (or refused
with what to do), legacy left as it is below 0.42.1, and the platform env added."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from bandkit.kit import spec as kitspec
from bandkit.kit import spec_source
from bandkit.runtimes import sbxkit
from bandkit.runtimes.base import SandboxError

ENV = {"BAND_REST_URL": "http://127.0.0.1:9"}


def kit_dir(tmp_path: Path, *, current_file: bool) -> Path:
    kit = tmp_path / "kit"
    kit.mkdir()
    shutil.copy(spec_source.LEGACY_PATH, kit / "spec.yaml")
    if current_file:
        shutil.copy(spec_source.CURRENT_PATH, kit / "spec-current.yaml")
    return kit


def stage(kit: Path, tmp_path: Path, *, current: bool, env: dict[str, str]) -> Path:
    warnings: list[str] = []
    out = sbxkit.staged_kit(
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


def test_current_sbx_gets_the_kits_own_current_file(tmp_path: Path) -> None:
    staged = stage(kit_dir(tmp_path, current_file=True), tmp_path, current=True, env=ENV)
    data = spec(staged)
    expected = yaml.safe_load(spec_source.CURRENT_PATH.read_text())
    assert {k: v for k, v in data.items() if k != "environment"} == expected
    assert data["environment"]["variables"] == ENV
    assert not (staged / "spec-current.yaml").exists()


def test_a_legacy_only_kit_is_translated_with_the_same_facts(tmp_path: Path) -> None:
    staged = stage(kit_dir(tmp_path, current_file=False), tmp_path, current=True, env={})
    data = spec(staged)
    data.pop("environment", None)
    assert data == yaml.safe_load(spec_source.CURRENT_PATH.read_text())
    assert kitspec.validate_text(yaml.safe_dump(data)).ok


def test_an_untranslatable_kit_is_refused_with_what_to_do(tmp_path: Path) -> None:
    kit = kit_dir(tmp_path, current_file=False)
    data = spec(kit)
    data["commands"]["install"] = [{"command": "apt-get install -y jq"}]
    (kit / "spec.yaml").write_text(yaml.safe_dump(data))
    with pytest.raises(SandboxError, match=r"add a spec-current\.yaml beside spec\.yaml"):
        stage(kit, tmp_path, current=True, env={})


def test_legacy_sbx_keeps_spec_yaml(tmp_path: Path) -> None:
    kit = kit_dir(tmp_path, current_file=True)
    assert stage(kit, tmp_path, current=False, env={}) == kit.resolve()  # nothing to stage
    staged = stage(kit, tmp_path, current=False, env=ENV)
    assert "commands" in spec(staged)
    assert spec(staged)["environment"]["variables"] == ENV


def test_a_current_spec_yaml_is_used_as_it_is(tmp_path: Path) -> None:
    kit = tmp_path / "kit"
    kit.mkdir()
    shutil.copy(spec_source.CURRENT_PATH, kit / "spec.yaml")
    assert stage(kit, tmp_path, current=True, env={}) == kit.resolve()
