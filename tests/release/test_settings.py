"""The release configuration: both registries required, names distinct, choices checked."""

from __future__ import annotations

import pytest

from bandkit.release.settings import SettingsError, from_config

FULL = {
    "hub_image": "docker.io/bandhq/band-python-kit-image",
    "hub_kit": "docker.io/bandhq/band-python-kit",
    "ghcr_image": "ghcr.io/band-ai/band-python-kit/image",
    "ghcr_kit": "ghcr.io/band-ai/band-python-kit",
}


def test_two_registries_in_publish_order_with_defaults() -> None:
    settings = from_config(FULL)
    assert [t.name for t in settings.targets] == ["hub", "ghcr"]
    assert settings.target("ghcr").image_repo == FULL["ghcr_image"]
    assert (settings.base, settings.multi, settings.sbom) == ("official", "auto", True)


def test_an_unset_name_says_which_key_and_env_var_to_set() -> None:
    partial = {k: v for k, v in FULL.items() if k != "ghcr_kit"}
    with pytest.raises(
        SettingsError, match=r"release\.ghcr_kit is not set.*INVOKE_RELEASE_GHCR_KIT"
    ):
        from_config(partial)


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"ghcr_kit": FULL["hub_kit"]}, "must all differ"),
        ({"hub_image": "bandhq/kit"}, "HOST"),
        ({"base": "mirror"}, "official or local"),
        ({"multi": "qemu"}, "auto, buildx or per-arch"),
        ({"spec_shape": "legacy"}, r"spec_shape is gone.*X\.Y\.Z-sbx-below-0\.42\.1"),
        ({"max_age_days": "a week"}, "number of days"),
    ],
)
def test_bad_settings_are_refused(change: dict[str, str], problem: str) -> None:
    with pytest.raises(SettingsError, match=problem):
        from_config({**FULL, **change})


def test_flags_from_the_environment_are_read_as_booleans() -> None:
    assert not from_config({**FULL, "sbom": "0"}).sbom
    assert from_config({**FULL, "provenance": "1"}).provenance
