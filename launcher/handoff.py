"""The hand-off model: what the checking phases (`launch.resolve_launch`) give the phases
with side effects (`repo`, `sync`, `launch.execute`). Its own module so that `sync` and
`report` depend on the model, not on `launch` (no import cycle)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from launcher.config import Endpoints, RepoSpec
from launcher.constants import CredentialSource


@dataclass(frozen=True)
class ResolvedLaunch:
    """Everything the side-effect phases need, checked. Credentials are never repr'd."""

    workspace: Path
    config_path: Path
    config_digest: str
    config_revalidated: bool
    project: Path
    entrypoint: Path
    environment_path: Path
    state_path: Path
    cache_path: Path
    log_path: Path
    sdk_home: Path
    sdk_uv: str
    interpreter: Path
    agent_id: str
    endpoints: Endpoints
    credential_source: CredentialSource | None
    repo: RepoSpec | None
    credentials: dict[str, str] = field(repr=False)
    stamp: dict[str, Any] = field(repr=False)
    endpoint_wait_s: float = 0.0  # BAND_KIT_ENDPOINT_WAIT_S: the reach phase's bound
