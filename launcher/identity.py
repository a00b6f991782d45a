"""The identity phase: the launcher runs only as the agent user."""

from __future__ import annotations

import os

from launcher.constants import AGENT_UID, EnvVar
from launcher.environment import LauncherEnv
from launcher.errors import LauncherError, Phase


def current_uid() -> int:
    """Test seam: the uid the launcher runs as."""
    return os.getuid()


def require_agent_uid(env: LauncherEnv) -> int:
    expected = env.expected_uid()
    uid = current_uid()
    if uid != expected:
        default = " (the default)" if expected == AGENT_UID else f" (from {EnvVar.AGENT_UID})"
        raise LauncherError(
            Phase.IDENTITY,
            f"the launcher must run as the agent user, uid {expected}{default}, got uid {uid}: "
            "start it through the image entrypoint (which drops to the agent user) or "
            f"`setpriv --reuid={expected} --regid={expected} --clear-groups`",
        )
    return uid
