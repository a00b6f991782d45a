"""One spec source, two shapes: the checked-in files are the generator's output, the kit
directory's spec.yaml is the current shape (sbx 0.42.1+), its sbx-below-0.42.1/ directory
the legacy one, and both carry the same facts."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
import yaml

from bandkit.image.facts import KIT_DIR, SPEC, SPEC_LEGACY
from bandkit.kit import spec as kitspec
from bandkit.kit import spec_source

LEGACY_ONLY = ("commands", "caps", "agentContext")
CURRENT_ONLY = ("permissions", "agentInstructions")


def load(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


@pytest.mark.parametrize(
    ("path", "render"),
    [
        (spec_source.LEGACY_PATH, spec_source.render_legacy),
        (spec_source.CURRENT_PATH, spec_source.render_current),
    ],
    ids=["legacy", "current"],
)
def test_checked_in_file_is_the_generators_output(path: Path, render: Any) -> None:
    assert path.read_text(encoding="utf-8") == render(spec_source.FACTS), (
        f"{path.name} was edited by hand: change bandkit/kit/spec_source.py and run "
        "`uv run python -m bandkit.kit.spec_source --write`"
    )


def test_paths_are_the_repo_defaults() -> None:
    assert spec_source.CURRENT_PATH == SPEC == kitspec.default_spec("current")
    assert SPEC == KIT_DIR / "spec.yaml"  # what `sbx create --kit docker/band_python_kit` reads
    assert spec_source.LEGACY_PATH == SPEC_LEGACY == kitspec.default_spec("legacy")
    assert SPEC_LEGACY == KIT_DIR / "sbx-below-0.42.1" / "spec.yaml"  # a kit dir of its own
    assert sorted(p.name for p in SPEC_LEGACY.parent.iterdir()) == ["spec.yaml"]


def test_the_kit_directory_holds_no_other_spec_file() -> None:
    assert sorted(p.name for p in KIT_DIR.glob("spec*")) == ["spec.yaml"]


def test_check_mode_agrees_with_the_checked_in_files() -> None:
    assert spec_source.main(["--check"]) == 0


def test_current_shape_has_no_legacy_keys_and_vice_versa() -> None:
    legacy, current = load(spec_source.LEGACY_PATH), load(spec_source.CURRENT_PATH)
    assert not set(LEGACY_ONLY) & set(current)
    assert "aiFilename" not in current["sandbox"]
    assert not set(CURRENT_ONLY) & set(legacy)
    assert "entrypoint" not in legacy["sandbox"]
    assert kitspec.shape_keys(legacy) == (
        ["commands", "caps", "agentContext", "sandbox.aiFilename"],
        [],
    )
    assert kitspec.shape_keys(current) == (
        [],
        ["sandbox.entrypoint", "permissions", "agentInstructions"],
    )


def test_both_shapes_carry_the_same_facts() -> None:
    legacy, current = load(spec_source.LEGACY_PATH), load(spec_source.CURRENT_PATH)
    facts = spec_source.FACTS
    assert legacy["sandbox"]["image"] == current["sandbox"]["image"] == facts.image
    (startup,) = legacy["commands"]["startup"]
    assert startup["command"] == current["sandbox"]["entrypoint"] == list(facts.startup)
    assert tuple(facts.startup) == kitspec.LAUNCH_COMMAND
    assert startup["user"] == facts.user
    allow = legacy["caps"]["network"]["allow"]
    assert allow == current["permissions"]["network"]["allow"] == list(kitspec.ALLOWLIST)
    assert legacy["agentContext"] == current["agentInstructions"] == facts.instructions
    for key in ("schemaVersion", "kind", "name", "displayName", "description"):
        assert legacy[key] == current[key], key
    assert "credentials" not in legacy
    assert "credentials" not in current


@pytest.mark.parametrize("path", [spec_source.LEGACY_PATH, spec_source.CURRENT_PATH])
def test_both_files_pass_our_checks_in_their_own_shape(path: Path) -> None:
    verdict = kitspec.validate_text(path.read_text(encoding="utf-8"))
    assert verdict.ok, verdict.problems
    assert verdict.shape == ("current" if path == spec_source.CURRENT_PATH else "legacy")


def test_a_changed_fact_reaches_both_shapes() -> None:
    facts = dataclasses.replace(spec_source.FACTS, allow=("app.band.ai", "pypi.org"))
    for text in (spec_source.render_legacy(facts), spec_source.render_current(facts)):
        assert "files.pythonhosted.org" not in text
        assert not kitspec.validate_text(text).ok


def test_the_kit_declares_no_credentials() -> None:
    facts = dataclasses.replace(spec_source.FACTS, credentials=({"service": "band"},))
    with pytest.raises(ValueError, match="no credentials block"):
        spec_source.render_current(facts)


def test_instructions_with_special_characters_round_trip() -> None:
    text = "Line: with # hash\n\n  - indented: yes\n"
    facts = dataclasses.replace(spec_source.FACTS, instructions="Top\n" + text)
    for render, key in (
        (spec_source.render_legacy, "agentContext"),
        (spec_source.render_current, "agentInstructions"),
    ):
        assert yaml.safe_load(render(facts))[key] == "Top\n" + text
