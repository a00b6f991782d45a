"""The process environment as the launcher sees it: a documented set of names.

Names are matched case-insensitively (an exact-case match wins over other
spellings), like the upstream launcher. Everything else in the environment is
ignored here and passed to the agent untouched.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from launcher.constants import (
    AGENT_UID,
    CREDENTIAL_NAMES,
    DEFAULT_SDK_HOME,
    EnvVar,
)
from launcher.errors import LauncherError, Phase

MAX_ENDPOINT_WAIT_S = 600.0


def _lookup(environ: Mapping[str, str], name: str) -> str:
    if name in environ:
        return environ[name]
    lowered = name.lower()
    for key in sorted(environ):  # sorted: deterministic when several spellings exist
        if key.lower() == lowered:
            return environ[key]
    return ""


@dataclass(frozen=True)
class LauncherEnv:
    """The environment values the launcher uses; credentials are never repr'd."""

    workspace_dir: str = ""
    config_path: str = ""
    allow_insecure: str = ""
    agent_uid: str = ""
    sdk_home: str = DEFAULT_SDK_HOME
    sdk_uv: str = ""
    agent_id: str = ""
    rest_url: str = ""
    ws_url: str = ""
    log_level: str = ""
    endpoint_wait: str = ""
    credentials: dict[str, str] = field(default_factory=dict, repr=False)

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> LauncherEnv:
        env = os.environ if environ is None else environ
        credentials = {name: value for name in CREDENTIAL_NAMES if (value := _lookup(env, name))}
        return cls(
            workspace_dir=_lookup(env, EnvVar.WORKSPACE_DIR),
            config_path=_lookup(env, EnvVar.CONFIG_PATH),
            allow_insecure=_lookup(env, EnvVar.ALLOW_INSECURE_ENDPOINTS),
            agent_uid=_lookup(env, EnvVar.AGENT_UID),
            # `or`: a present-but-empty BAND_SDK_HOME must still fence /opt/band.
            sdk_home=_lookup(env, EnvVar.SDK_HOME) or DEFAULT_SDK_HOME,
            sdk_uv=_lookup(env, EnvVar.SDK_UV),
            agent_id=_lookup(env, EnvVar.AGENT_ID),
            rest_url=_lookup(env, EnvVar.REST_URL),
            ws_url=_lookup(env, EnvVar.WS_URL),
            log_level=_lookup(env, EnvVar.LOG_LEVEL),
            endpoint_wait=_lookup(env, EnvVar.ENDPOINT_WAIT),
            credentials=credentials,
        )

    def insecure_endpoints_allowed(self) -> bool:
        """`BAND_KIT_ALLOW_INSECURE_ENDPOINTS=1` opts in; unset, empty or 0 does not."""
        value = self.allow_insecure.strip()
        if value in ("", "0"):
            return False
        if value == "1":
            return True
        raise LauncherError(
            Phase.CONFIG,
            f"{EnvVar.ALLOW_INSECURE_ENDPOINTS} must be 1 (allow http/ws) or 0, got {value!r}",
        )

    def expected_uid(self) -> int:
        """The agent uid the launcher must run as: BAND_KIT_AGENT_UID, default 1000."""
        raw = self.agent_uid.strip()
        if not raw:
            return AGENT_UID
        if not raw.isdigit() or int(raw) == 0:
            raise LauncherError(
                Phase.IDENTITY,
                f"{EnvVar.AGENT_UID} must be a non-root numeric uid, got {raw!r}",
            )
        return int(raw)

    def endpoint_wait_s(self) -> float:
        """`BAND_KIT_ENDPOINT_WAIT_S`: seconds (0 to 600) to wait for the endpoints before
        the exec; unset or empty is 0, no wait."""
        raw = self.endpoint_wait.strip()
        if not raw:
            return 0.0
        try:
            value = float(raw)
        except ValueError:
            value = -1.0
        if not 0 <= value <= MAX_ENDPOINT_WAIT_S:
            raise LauncherError(
                Phase.CONFIG,
                f"{EnvVar.ENDPOINT_WAIT} must be a number of seconds from 0 to "
                f"{MAX_ENDPOINT_WAIT_S:g}, got {raw!r}",
            )
        return value
