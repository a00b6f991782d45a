"""The config phase: find and read band.yaml, validate it, resolve identity and endpoints.

Precedence, for every value: environment (BAND_AGENT_ID, BAND_REST_URL,
BAND_WS_URL) -> band.yaml -> production default (endpoints only) -> fail.

Validation is the pydantic schema in `launcher.schema` (unknown keys refused, scalars
coerced like upstream's models: a quoted "true" is true). Importing pydantic
costs most of the launcher's start-up time, so a document whose exact bytes
already passed validation (recorded in the stamp under runtime.statePath by the
last successful launch, see `launcher.stamp`) is not validated again; the spec
is read from the parsed document by `build_spec` in both cases. (Validating on
every launch instead, with the models as the only reader, measured 0.35-0.38x
upstream's start in `python -m bandkit.bench launcher`, over the 0.3x budget.)
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from launcher.constants import (
    CONFIG_FILENAME,
    DEFAULT_ENTRYPOINT,
    DEFAULT_PROJECT_PATH,
    DEFAULT_REST_URL,
    DEFAULT_WS_URL,
    PLACEHOLDER_AGENT_ID,
    CredentialSource,
    EnvVar,
)
from launcher.environment import LauncherEnv
from launcher.errors import LauncherError, Phase
from launcher.urls import endpoint_problem, redact_url


@dataclass(frozen=True)
class RepoSpec:
    url: str
    branch: str | None
    index: bool


@dataclass(frozen=True)
class CredentialsSpec:
    source: CredentialSource
    path: str | None
    acknowledge_plaintext: bool


@dataclass(frozen=True)
class RuntimeSpec:
    environment_path: str
    state_path: str
    cache_path: str
    log_path: str


@dataclass(frozen=True)
class WorkspaceSpec:
    """band.yaml after validation, before environment overrides."""

    agent_id: str
    entrypoint: str
    rest_url: str
    ws_url: str
    project_path: str
    repo: RepoSpec | None
    credentials: CredentialsSpec | None
    runtime: RuntimeSpec


@dataclass(frozen=True)
class ConfigDocument:
    """The file as read: where it is, its bytes' digest and the parsed mapping."""

    path: Path
    digest: str
    data: dict[str, Any]


def resolve_workspace(env: LauncherEnv) -> Path:
    """WORKSPACE_DIR (set by the sandbox runtime), resolved; it must be a directory."""
    if not env.workspace_dir:
        raise LauncherError(
            Phase.CONFIG,
            f"{EnvVar.WORKSPACE_DIR} is not set: the sandbox runtime sets it to the mounted "
            "workspace (set it yourself when running the launcher by hand)",
        )
    workspace = Path(env.workspace_dir).resolve()
    if not workspace.is_dir():
        raise LauncherError(Phase.CONFIG, f"workspace is not a directory: {workspace}")
    return workspace


def locate_config(env: LauncherEnv, workspace: Path) -> Path:
    """BAND_KIT_CONFIG_PATH when set (relative to the workspace), else band.yaml in it."""
    if env.config_path:
        return workspace / env.config_path  # an absolute override replaces the workspace
    return workspace / CONFIG_FILENAME


def read_document(path: Path) -> ConfigDocument:
    """Read and parse the YAML (safe loader); it must be a mapping."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise LauncherError(
            Phase.CONFIG,
            f"workspace configuration not found: {path} (copy band.yaml from the "
            "echo-agent starter, or point BAND_KIT_CONFIG_PATH at yours)",
        ) from None
    except OSError as exc:
        raise LauncherError(Phase.CONFIG, f"cannot read {path}: {exc.strerror}") from None
    return parse_document(raw, path)


def parse_document(raw: bytes, path: Path) -> ConfigDocument:
    """Parse band.yaml bytes read from `path` (safe loader); it must be a mapping."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        data = yaml.load(raw, Loader=loader)  # noqa: S506 - a safe loader, C or pure Python
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise LauncherError(Phase.CONFIG, f"invalid YAML in {path}{where}") from None
    if not isinstance(data, dict):
        raise LauncherError(Phase.CONFIG, f"{path} must contain a YAML mapping at the top level")
    return ConfigDocument(path=path, digest=hashlib.sha256(raw).hexdigest(), data=data)


def _section(data: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = data.get(key)
    return value if isinstance(value, Mapping) else {}


def _pick(section: Mapping[str, Any], alias: str, name: str, default: Any) -> Any:
    """A field by its camelCase key, else its snake_case name, else the default."""
    if alias in section:
        return section[alias]
    return section.get(name, default)


_TRUE_WORDS = frozenset({"1", "on", "t", "true", "y", "yes"})


def _text(value: Any) -> Any:
    """A validated string field: the schema (like upstream's) also takes UTF-8 bytes."""
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode()
    return value


def _flag(value: Any) -> bool:
    """A validated bool field read as pydantic's lax mode reads it (upstream's models):
    true/false, 1/0, 1.0/0.0, and the words 1/0, true/false, yes/no, on/off, t/f, y/n
    in any case (also as bytes). Only ever called on a document that validated."""
    value = _text(value)
    if isinstance(value, str):
        return value.lower() in _TRUE_WORDS
    return bool(value == 1)


def build_spec(data: Mapping[str, Any]) -> WorkspaceSpec:
    """Read a *validated* document into a WorkspaceSpec (defaults and scalar coercion
    as in the schema, so the fast path that skips pydantic reads the same values)."""
    agent = _section(data, "agent")
    band = _section(data, "band")
    runtime = _section(data, "runtime")
    repo = data.get("repo")
    credentials = data.get("credentials")
    return WorkspaceSpec(
        agent_id=_text(agent.get("id", "")),
        entrypoint=_text(agent.get("entrypoint", DEFAULT_ENTRYPOINT)),
        rest_url=_text(_pick(band, "restUrl", "rest_url", "")),
        ws_url=_text(_pick(band, "wsUrl", "ws_url", "")),
        project_path=_text(_section(data, "project").get("path", DEFAULT_PROJECT_PATH)),
        repo=(
            RepoSpec(
                url=_text(repo["url"]).strip(),
                branch=(_text(repo.get("branch")) or "").strip() or None,
                index=_flag(repo.get("index", False)),
            )
            if isinstance(repo, Mapping)
            else None
        ),
        credentials=(
            CredentialsSpec(
                source=CredentialSource(credentials["source"]),
                path=_text(credentials.get("path")),
                acknowledge_plaintext=_flag(
                    _pick(
                        credentials,
                        "acknowledgePlaintextInSandbox",
                        "acknowledge_plaintext_in_sandbox",
                        False,
                    )
                ),
            )
            if isinstance(credentials, Mapping)
            else None
        ),
        runtime=RuntimeSpec(
            environment_path=_text(_pick(runtime, "environmentPath", "environment_path", "")),
            state_path=_text(_pick(runtime, "statePath", "state_path", "")),
            cache_path=_text(_pick(runtime, "cachePath", "cache_path", "")),
            log_path=_text(_pick(runtime, "logPath", "log_path", "")),
        ),
    )


def validated_spec(document: ConfigDocument, *, trusted_digest: str | None) -> WorkspaceSpec:
    """Validate (unless these exact bytes passed before) and build the spec."""
    if document.digest != trusted_digest:
        from launcher.schema import validate_document

        validate_document(document.data, source=str(document.path))
    return build_spec(document.data)


@dataclass(frozen=True)
class Endpoints:
    rest_url: str
    ws_url: str
    insecure: bool  # plain http/ws in use (emulator only; warned about at every launch)


def resolve_endpoints(spec: WorkspaceSpec, env: LauncherEnv) -> Endpoints:
    """REST and WS URLs: environment -> band.yaml -> production defaults, then checked."""
    allow_insecure = env.insecure_endpoints_allowed()
    rest = env.rest_url or spec.rest_url or DEFAULT_REST_URL
    ws = env.ws_url or spec.ws_url or DEFAULT_WS_URL
    for name, value, scheme, insecure in (
        (EnvVar.REST_URL, rest, "https", "http"),
        (EnvVar.WS_URL, ws, "wss", "ws"),
    ):
        problem = endpoint_problem(
            value, scheme=scheme, insecure_scheme=insecure, allow_insecure=allow_insecure
        )
        if problem:
            raise LauncherError(Phase.CONFIG, f"{name} {problem}, got {redact_url(value)!r}")
    insecure_in_use = rest.startswith("http://") or ws.startswith("ws://")
    return Endpoints(rest_url=rest, ws_url=ws, insecure=insecure_in_use)


def resolve_agent_id(spec: WorkspaceSpec, env: LauncherEnv) -> str:
    """BAND_AGENT_ID, else agent.id; never empty, never the starter placeholder."""
    agent_id = (env.agent_id or spec.agent_id).strip()
    if not agent_id:
        raise LauncherError(
            Phase.CONFIG, f"agent id missing: set agent.id in band.yaml or {EnvVar.AGENT_ID}"
        )
    if agent_id == PLACEHOLDER_AGENT_ID:
        raise LauncherError(
            Phase.CONFIG,
            f"agent.id is still the starter placeholder {PLACEHOLDER_AGENT_ID!r}: register "
            "the agent first (`band-kit provision`, or the kit's provisioning task) or set "
            f"{EnvVar.AGENT_ID}",
        )
    return agent_id
