"""The kit directory `sbx create` gets: in the shape the installed sbx decodes, with the
sandbox's platform env added.

sbx reads `DIR/spec.yaml`. From 0.42.1 its decoder takes only the current shape
(`sandbox.entrypoint`, `permissions.network`, `agentInstructions`); below that the legacy
one (`commands.startup`, `caps.network`, `agentContext`). Our kit's `spec.yaml` is the
current shape and its legacy shape is a kit directory of its own inside it,
`sbx-below-0.42.1/` (`LEGACY_DIR`). For a local kit directory:

- sbx 0.42.1+: a current `spec.yaml` is used as it is; a legacy one is translated key by
  key (one argv startup command, no install commands or initFiles: anything else is
  refused with what to do);
- below 0.42.1: a legacy `spec.yaml` is used as it is; for a current one the kit's
  `sbx-below-0.42.1/spec.yaml` is staged in its place (no translation this way: the
  legacy grammar needs a user and a startup mode the current shape does not state), else
  it is refused with what to do;
- the platform env (BAND_REST_URL, BAND_WS_URL, ...) is added to `environment.variables`,
  so the agent reaches the platform provisioning used (the VM gets no host env).

Staging copies the kit (links kept as links, never followed) into a private directory
(0700, ours, never a link: its default name under /tmp is predictable), without its
legacy directory: sbx gets one spec. A kit reference (OCI, git) is used as it is.
`kit_image` reads the image a staged kit names (the sbx runtime loads a local one).
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from bandkit.fsio import UnsafePathError, own_dir
from bandkit.image.facts import LEGACY_KIT_NAME
from bandkit.runtimes.base import SandboxError, validate_name

CURRENT_SHAPE_FROM = (0, 42, 1)
LEGACY_DIR = LEGACY_KIT_NAME  # the legacy shape's kit directory, inside the kit
LEGACY_KEYS = ("commands", "caps", "agentContext")  # and sandbox.aiFilename
CURRENT_KEYS = ("permissions", "agentInstructions")  # and sandbox.entrypoint


def load(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    if not isinstance(data, dict):
        raise SandboxError(f"kit spec {path} is not a mapping")
    return data


def _sandbox(data: Mapping[str, Any]) -> Mapping[str, Any]:
    sandbox = data.get("sandbox")
    return sandbox if isinstance(sandbox, dict) else {}


def is_legacy(data: Mapping[str, Any]) -> bool:
    """Whether the spec has keys only sbx below 0.42.1 decodes."""
    return any(key in data for key in LEGACY_KEYS) or "aiFilename" in _sandbox(data)


def is_current(data: Mapping[str, Any]) -> bool:
    """Whether the spec has keys of the current shape (an entrypoint below 0.42.1 would
    run only on an attached terminal, never headless)."""
    return any(key in data for key in CURRENT_KEYS) or "entrypoint" in _sandbox(data)


def to_current(data: Mapping[str, Any], source: Path) -> dict[str, Any]:
    """A legacy-shape spec in the current shape (the same facts, the new keys)."""
    commands = dict(data.get("commands") or {})
    startup = list(commands.pop("startup", None) or [])
    if commands or len(startup) != 1 or not isinstance(startup[0].get("command"), list):
        raise SandboxError(
            f"kit {source}: sbx 0.42.1+ reads only the current spec shape, and this legacy "
            "spec cannot be translated (it needs exactly one argv `commands.startup` entry "
            "and no install commands or initFiles); write spec.yaml in the current shape "
            f"and keep the legacy one as {LEGACY_DIR}/spec.yaml"
        )
    out: dict[str, Any] = {}
    for key, value in data.items():
        if key == "sandbox":
            sandbox = {k: v for k, v in dict(value or {}).items() if k != "aiFilename"}
            out["sandbox"] = {**sandbox, "entrypoint": [str(a) for a in startup[0]["command"]]}
        elif key == "caps":
            out["permissions"] = value
        elif key == "agentContext":
            out["agentInstructions"] = value
        elif key != "commands":
            out[key] = value
    return out


def legacy_spec(source: Path) -> dict[str, Any]:
    """The kit's own legacy shape (`LEGACY_DIR/spec.yaml`), for sbx below 0.42.1."""
    path = source / LEGACY_DIR / "spec.yaml"
    if path.is_file() and not (source / LEGACY_DIR).is_symlink():
        data = load(path)
        if is_legacy(data):
            return data
    raise SandboxError(
        f"kit {source}: this sbx (below 0.42.1) reads only the legacy spec shape, and the "
        f"kit's spec.yaml is the current one with no legacy {LEGACY_DIR}/spec.yaml beside "
        "it; add one (ours: docker/band_python_kit/sbx-below-0.42.1), or upgrade sbx to "
        "0.42.1 or later"
    )


def shaped_spec(source: Path, *, current: bool) -> dict[str, Any] | None:
    """The spec to stage when spec.yaml is not already in the needed shape, else None."""
    spec = load(source / "spec.yaml")
    if current:
        return to_current(spec, source) if is_legacy(spec) else None
    return legacy_spec(source) if is_current(spec) else None


def staged_kit(
    kit: str,
    *,
    name: str,
    env: Mapping[str, str],
    current: bool,
    kits_dir: Path,
    warn: Any,
) -> str:
    """The kit argument for `sbx create` (see the module docstring)."""
    source = Path(kit)
    if not source.is_dir():
        if env:
            warn(
                f"kit {kit} is a reference: the sandbox uses its own endpoints "
                "(band.yaml or the kit's), not the ones provisioning used"
            )
        return kit
    if not (source / "spec.yaml").is_file():
        if not env:
            return str(source.resolve())  # sbx says what is wrong with it
        raise SandboxError(f"kit {kit} has no spec.yaml")
    data = shaped_spec(source, current=current)
    if data is None and not env:
        return str(source.resolve())
    if data is None:
        data = load(source / "spec.yaml")
    try:
        own_dir(kits_dir, mode=0o700, what="the sbx kits directory", parents=True)
    except UnsafePathError as exc:
        raise SandboxError(f"sbx: {exc}") from None
    staged = kits_dir / validate_name(name)
    if staged.exists():
        shutil.rmtree(staged)
    shutil.copytree(source, staged, symlinks=True)
    nested = staged / LEGACY_DIR
    if nested.is_symlink() or nested.is_file():
        nested.unlink()
    elif nested.is_dir():
        shutil.rmtree(nested)
    variables = dict((data.get("environment") or {}).get("variables") or {})
    variables.update(env)
    if variables:
        data.setdefault("environment", {})["variables"] = variables
    spec_file = staged / "spec.yaml"
    spec_file.unlink()  # a planted link is replaced, never written through
    spec_file.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return str(staged.resolve())


def kit_image(kit: str) -> str | None:
    """The image a kit directory's spec.yaml names (`sandbox.image`); None for a kit
    reference (sbx resolves its image itself) or a spec without one."""
    spec = Path(kit) / "spec.yaml"
    if not spec.is_file():
        return None
    image = (load(spec).get("sandbox") or {}).get("image")
    return image if isinstance(image, str) and image else None


def kit_name(kit: str) -> str:
    """AGENT for `create --kit`: the kit's own name (spec.yaml), or the ref's last segment."""
    spec = Path(kit) / "spec.yaml"
    if spec.is_file():
        data = yaml.safe_load(spec.read_text(encoding="utf-8")) or {}
        if isinstance(data, dict) and data.get("name"):
            return str(data["name"])
    return kit.rstrip("/").rsplit("/", 1)[-1].split("@")[0].split(":")[0]
