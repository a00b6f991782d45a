"""What a release publishes where: the two registries and the build's choices, from config.

The invoke configuration (`release:` in `invoke.yaml`, or `INVOKE_RELEASE_<KEY>` in the
environment) holds one image name and one kit name per registry, in publish order:

    release:
      hub_image: docker.io/bandhq/band-python-kit-image
      hub_kit: docker.io/bandhq/band-python-kit
      ghcr_image: ghcr.io/band-ai/band-python-kit/image
      ghcr_kit: ghcr.io/band-ai/band-python-kit

plus `base` (official: the Dockerfile's pins; local: `invoke image.bases`), `multi`
(the multi-platform path, as `image.build --multi`), `sbom` / `provenance` (attestations
on the buildx path) and `source` (the kit's source annotation; default: the git remote,
else the checkout). The kit is published in both spec shapes, the current one as
`X.Y.Z` and the legacy one as `X.Y.Z-sbx-below-0.42.1` (`plan.kit_tag`); the former
`spec_shape` setting is refused with that explanation.
Nothing has a registry by default: an unset name is an error that says which key to set.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from bandkit.errors import BandkitError
from bandkit.image.refs import RefError, Repository, parse_repository

REGISTRY_NAMES = ("hub", "ghcr")
PLATFORMS = ("linux/amd64", "linux/arm64")
DEFAULTS: dict[str, object] = {
    "hub_image": "",
    "hub_kit": "",
    "ghcr_image": "",
    "ghcr_kit": "",
    "base": "official",
    "multi": "auto",
    "sbom": True,
    "provenance": True,
    "source": "",
    "max_age_days": 7.0,
}


class SettingsError(BandkitError):
    """The release configuration is incomplete or malformed."""


@dataclass(frozen=True)
class Target:
    """One registry of the release: its name, image repository and kit repository."""

    name: str
    image: Repository
    kit: Repository

    @property
    def image_repo(self) -> str:
        return f"{self.image.host}/{self.image.name}"

    @property
    def kit_repo(self) -> str:
        return f"{self.kit.host}/{self.kit.name}"


@dataclass(frozen=True)
class Settings:
    targets: tuple[Target, ...]
    base: str = "official"
    multi: str = "auto"
    sbom: bool = True
    provenance: bool = True
    source: str = ""
    max_age_days: float = 7.0

    def target(self, name: str) -> Target:
        return next(t for t in self.targets if t.name == name)


def _repo(config: Mapping[str, object], key: str) -> Repository:
    value = str(config.get(key) or "")
    if not value:
        raise SettingsError(
            f"release.{key} is not set: put it in invoke.yaml (release: {key}: HOST/NAME) "
            f"or export INVOKE_RELEASE_{key.upper()}"
        )
    try:
        return parse_repository(value)
    except RefError as exc:
        raise SettingsError(f"release.{key}: {exc}") from None


def _flag(value: object) -> bool:
    if isinstance(value, str):
        return value.strip().lower() not in ("", "0", "false", "no", "off")
    return bool(value)


def from_config(config: Mapping[str, object]) -> Settings:
    """Settings from the `release` configuration mapping (defaults filled in)."""
    merged = {**DEFAULTS, **dict(config)}
    targets = tuple(
        Target(name, _repo(merged, f"{name}_image"), _repo(merged, f"{name}_kit"))
        for name in REGISTRY_NAMES
    )
    repos = [t.image_repo for t in targets] + [t.kit_repo for t in targets]
    if len(set(repos)) != len(repos):
        raise SettingsError(f"release image and kit names must all differ, got {repos}")
    if "spec_shape" in merged:
        raise SettingsError(
            "release.spec_shape is gone: every release publishes the kit in the current "
            "shape as X.Y.Z and in the legacy one (sbx below 0.42.1) as "
            "X.Y.Z-sbx-below-0.42.1; remove the setting"
        )
    base, multi = (str(merged[k]) for k in ("base", "multi"))
    if base not in ("official", "local"):
        raise SettingsError(f"release.base must be official or local, got {base!r}")
    if multi not in ("auto", "buildx", "per-arch"):
        raise SettingsError(f"release.multi must be auto, buildx or per-arch, got {multi!r}")
    try:
        max_age = float(str(merged["max_age_days"]))
    except ValueError:
        raise SettingsError("release.max_age_days must be a number of days") from None
    return Settings(
        targets,
        base=base,
        multi=multi,
        sbom=_flag(merged["sbom"]),
        provenance=_flag(merged["provenance"]),
        source=str(merged["source"] or ""),
        max_age_days=max_age,
    )
