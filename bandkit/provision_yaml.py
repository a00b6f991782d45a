"""band.yaml edits for provisioning: read agent.id, write it back keeping comments and
layout (ruamel round trip), then validate the file with the launcher's own schema."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ruamel.yaml import YAML


class BandYamlError(Exception):
    """band.yaml is missing, malformed, or no longer valid after the edit."""


def _yaml() -> YAML:
    yaml = YAML()
    yaml.preserve_quotes = True
    return yaml


def band_yaml(workspace: Path) -> Path:
    path = workspace / "band.yaml"
    if not path.is_file():
        raise BandYamlError(f"no band.yaml in workspace {workspace}; copy the echo-agent starter")
    return path


def _mapping(value: Any, what: str) -> Any:
    if value is None:
        return {}
    if not hasattr(value, "get"):
        raise BandYamlError(f"{what} must be a mapping, got {type(value).__name__}")
    return value


def read_agent_id(workspace: Path) -> str:
    path = band_yaml(workspace)
    data = _mapping(_yaml().load(path.read_text(encoding="utf-8")), str(path))
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

    if not path.is_file():
        return False
    data = _mapping(_yaml().load(path.read_text(encoding="utf-8")), str(path))
    agent = _mapping(data.get("agent"), f"{path}: agent")
    if str(agent.get("id") or "") != expected_id:
        return False
    _set_agent_id(path, PLACEHOLDER_AGENT_ID)
    return True


def _set_agent_id(path: Path, agent_id: str) -> None:
    """ruamel round trip into a sibling temp file, validated before it replaces `path`."""
    yaml = _yaml()
    data = _mapping(yaml.load(path.read_text(encoding="utf-8")), str(path))
    agent = data.get("agent")
    if agent is None:
        data["agent"] = {"id": agent_id}
    else:
        _mapping(agent, f"{path}: agent")["id"] = agent_id
    tmp = path.with_name(f".{path.name}.provision.tmp")
    try:
        with tmp.open("w", encoding="utf-8") as fh:
            yaml.dump(data, fh)
        tmp.chmod(path.stat().st_mode & 0o777)
        validateband_yaml(tmp, expected_id=agent_id, shown=path)
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)


def validateband_yaml(path: Path, *, expected_id: str, shown: Path | None = None) -> None:
    from dataclasses import replace

    from launcher.config import read_document, validated_spec
    from launcher.errors import LauncherError

    try:
        document = replace(read_document(path), path=shown or path)
        spec = validated_spec(document, trusted_digest=None)
    except LauncherError as exc:
        raise BandYamlError(
            f"{shown or path} no longer validates after writing agent.id, so it was "
            f"left unchanged: {exc}"
        ) from None
    if spec.agent_id != expected_id:
        raise BandYamlError(
            f"wrote agent.id to {shown or path} but it did not round-trip; check the file"
        )
