"""band.yaml edits for provisioning: read agent.id, write it back keeping comments and
layout (ruamel round trip), then validate the file with the launcher's own schema."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from bandkit.errors import BandkitError
from bandkit.fsio import UnsafePathError, read_regular, write_sandbox_file


class BandYamlError(BandkitError):
    """band.yaml is missing, malformed, or no longer valid after the edit."""


def _yaml() -> YAML:
    yaml = YAML()
    yaml.preserve_quotes = True
    return yaml


def band_yaml(workspace: Path) -> Path:
    path = workspace / "band.yaml"
    if not path.exists() and not path.is_symlink():
        raise BandYamlError(f"no band.yaml in workspace {workspace}; copy the echo-agent starter")
    return path


def _read(path: Path) -> str:
    """band.yaml's text, refusing a symlink or hard link the sandbox may have planted."""
    try:
        raw, _ = read_regular(path, what="band.yaml")
    except UnsafePathError as exc:
        raise BandYamlError(str(exc)) from None
    except OSError as exc:
        raise BandYamlError(f"cannot read {path}: {exc.strerror}") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise BandYamlError(f"{path} is not UTF-8 text") from None


def _mapping(value: Any, what: str) -> Any:
    if value is None:
        return {}
    if not hasattr(value, "get"):
        raise BandYamlError(f"{what} must be a mapping, got {type(value).__name__}")
    return value


def read_agent_id(workspace: Path) -> str:
    path = band_yaml(workspace)
    data = _mapping(_yaml().load(_read(path)), str(path))
    agent = _mapping(data.get("agent"), f"{path}: agent")
    return str(agent.get("id") or "")


def has_real_id(agent_id: str) -> bool:
    from launcher.constants import PLACEHOLDER_AGENT_ID

    return bool(agent_id) and agent_id != PLACEHOLDER_AGENT_ID


def write_agent_id(workspace: Path, agent_id: str) -> None:
    """Set agent.id keeping every comment and the layout, then validate like the launcher."""
    _set_agent_id(band_yaml(workspace), agent_id)


def reset_agent_id(path: Path, expected_id: str) -> bool:
    """Put the starter placeholder back where provisioning wrote `expected_id`.

    Returns False (and changes nothing) when the file is gone or its agent.id is no
    longer `expected_id` (someone else's id now: not ours to clear).
    """
    from launcher.constants import PLACEHOLDER_AGENT_ID

    if not path.exists() and not path.is_symlink():
        return False
    data = _mapping(_yaml().load(_read(path)), str(path))
    agent = _mapping(data.get("agent"), f"{path}: agent")
    if str(agent.get("id") or "") != expected_id:
        return False
    _set_agent_id(path, PLACEHOLDER_AGENT_ID)
    return True


def _set_agent_id(path: Path, agent_id: str) -> None:
    """ruamel round trip in memory, validated like the launcher, then replaced atomically.

    The workspace belongs to the sandbox: band.yaml is read without following links, and
    the new file is a fresh `mkstemp` sibling renamed over it, so a planted link (at
    band.yaml or any temp name) is never written through. Its mode and owner are decided
    by `write_sandbox_file` (0644, the directory's owner), never taken from the old file:
    a sandbox that made band.yaml 6777 must not get back a setuid-root file.
    """
    yaml = _yaml()
    text = _read(path)
    data = _mapping(yaml.load(text), str(path))
    agent = data.get("agent")
    if agent is None:
        data["agent"] = {"id": agent_id}
    else:
        _mapping(agent, f"{path}: agent")["id"] = agent_id
    out = io.StringIO()
    yaml.dump(data, out)
    new = out.getvalue().encode("utf-8")
    validate_band_yaml(new, expected_id=agent_id, shown=path)
    write_sandbox_file(path, new)


def validate_band_yaml(raw: bytes, *, expected_id: str, shown: Path) -> None:
    from launcher.config import parse_document, validated_spec
    from launcher.errors import LauncherError

    try:
        spec = validated_spec(parse_document(raw, shown), trusted_digest=None)
    except LauncherError as exc:
        raise BandYamlError(
            f"{shown} no longer validates after writing agent.id, so it was left unchanged: {exc}"
        ) from None
    if spec.agent_id != expected_id:
        raise BandYamlError(f"wrote agent.id to {shown} but it did not round-trip; check the file")
