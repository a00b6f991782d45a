"""The kit directory `sbx create` gets: in the shape the installed sbx decodes, with the
sandbox's platform env added.

sbx reads `DIR/spec.yaml`. From 0.42.1 its decoder takes only the current shape
(`sandbox.entrypoint`, `permissions.network`, `agentInstructions`); before that the legacy
one (`commands.startup`, `caps.network`, `agentContext`). For a local kit directory:

- the shape sbx needs comes from `spec-current.yaml` beside `spec.yaml` when the kit ships
  both (ours does), else `spec.yaml` is translated key by key (one argv startup command,
  no install commands or initFiles: anything else is refused with what to do);
- the platform env (BAND_REST_URL, BAND_WS_URL, ...) is added to `environment.variables`,
  so the agent reaches the platform provisioning used (the VM gets no host env).

Staging copies the kit (links kept as links, never followed) into a private directory. A
kit reference (OCI, git) is used as it is.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from bandkit.runtimes.base import SandboxError, validate_name

CURRENT_SHAPE_FROM = (0, 42, 1)
CURRENT_FILE = "spec-current.yaml"
LEGACY_KEYS = ("commands", "caps", "agentContext")


def load(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    if not isinstance(data, dict):
        raise SandboxError(f"kit spec {path} is not a mapping")
    return data


def is_legacy(data: Mapping[str, Any]) -> bool:
    sandbox = data.get("sandbox") if isinstance(data.get("sandbox"), dict) else {}
    return any(key in data for key in LEGACY_KEYS) or "aiFilename" in (sandbox or {})


def to_current(data: Mapping[str, Any], source: Path) -> dict[str, Any]:
    """A legacy-shape spec in the current shape (the same facts, the new keys)."""
    commands = dict(data.get("commands") or {})
    startup = list(commands.pop("startup", None) or [])
    if commands or len(startup) != 1 or not isinstance(startup[0].get("command"), list):
        raise SandboxError(
            f"kit {source}: sbx 0.42.1+ reads only the current spec shape, and this spec "
            "cannot be translated (it needs exactly one argv `commands.startup` entry and "
            f"no install commands or initFiles); add a {CURRENT_FILE} beside spec.yaml"
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


def shaped_spec(source: Path, *, current: bool) -> dict[str, Any] | None:
    """The spec to stage when spec.yaml is not already in the needed shape, else None."""
    if not current:
        return None
    spec = load(source / "spec.yaml")
    if not is_legacy(spec):
        return None
    if (source / CURRENT_FILE).is_file():
        return load(source / CURRENT_FILE)
    return to_current(spec, source)


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
    kits_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    staged = kits_dir / validate_name(name)
    if staged.exists():
        shutil.rmtree(staged)
    shutil.copytree(source, staged, symlinks=True)
    (staged / CURRENT_FILE).unlink(missing_ok=True)
    variables = dict((data.get("environment") or {}).get("variables") or {})
    variables.update(env)
    if variables:
        data.setdefault("environment", {})["variables"] = variables
    spec_file = staged / "spec.yaml"
    spec_file.unlink()  # a planted link is replaced, never written through
    spec_file.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return str(staged.resolve())


def kit_name(kit: str) -> str:
    """AGENT for `create --kit`: the kit's own name (spec.yaml), or the ref's last segment."""
    spec = Path(kit) / "spec.yaml"
    if spec.is_file():
        data = yaml.safe_load(spec.read_text(encoding="utf-8")) or {}
        if isinstance(data, dict) and data.get("name"):
            return str(data["name"])
    return kit.rstrip("/").rsplit("/", 1)[-1].split("@")[0].split(":")[0]
