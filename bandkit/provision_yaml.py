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
    path = band_yaml(workspace)
    yaml = _yaml()
    data = _mapping(yaml.load(path.read_text(encoding="utf-8")), str(path))
    agent = data.get("agent")
    if agent is None:
        data["agent"] = {"id": agent_id}
    else:
        _mapping(agent, f"{path}: agent")["id"] = agent_id
    tmp = path.with_name(f".{path.name}.provision.tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        yaml.dump(data, fh)
    tmp.chmod(path.stat().st_mode & 0o777)
    tmp.replace(path)
    validateband_yaml(path, expected_id=agent_id)


def validateband_yaml(path: Path, *, expected_id: str) -> None:
    from launcher.config import read_document, validated_spec
    from launcher.errors import LauncherError

    try:
        spec = validated_spec(read_document(path), trusted_digest=None)
    except LauncherError as exc:
        raise BandYamlError(
            f"band.yaml no longer validates after writing agent.id: {exc}"
        ) from None
    if spec.agent_id != expected_id:
        raise BandYamlError(f"wrote agent.id to {path} but it did not round-trip; check the file")
